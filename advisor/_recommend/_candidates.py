"""Candidate configurations, and the knowledge-base columns the surrogate predicts them from.

Candidates come from every framework's search space for the target (``<framework>-cpu|gpu``),
sampled at random, plus the seed study's stock settings (:mod:`advisor.presets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Sequence

import numpy as np

from advisor import knowledge
from advisor._recommend._workload import Target, WorkloadInfo
from advisor.records import Config

__all__ = ["DEFAULT_CANDIDATES", "Candidate", "candidates", "columns", "unseen_knobs"]

DEFAULT_CANDIDATES = 500  # per framework; a few thousand in all


@dataclass(frozen=True)
class Candidate:
    """One configuration to predict for, and where it came from (a search space or a preset)."""

    config: Config
    source: str
    space_params: dict[str, Any] | None
    #: The model it trains (None: the workload's).
    model: str | None = None
    #: Measured figures of this very configuration on this workload and hardware class, if any
    #: (a :class:`advisor._recommend._baseline.Measured`).
    measured: Any = None


def unseen_knobs(schema: Any) -> frozenset[str]:
    """Knobs a surrogate cannot see (fitted before they existed): candidates keep their defaults,
    since a prediction blind to a knob would pick its values at random."""
    from advisor.knobs import KNOBS
    from advisor.surrogate.features import FEATURES

    known = {f.name for f in schema.features}
    seen = {name for name in (f.name for f in FEATURES) if name in known}
    return frozenset(k.name for k in KNOBS if k.encoding != "none"
                     and k.name not in seen and f"log10_{k.name}" not in seen)


def candidates(workload: WorkloadInfo, target: Target, frameworks: Sequence[str], *,
               per_framework: int, seed: int, exclude: Collection[str] = (),
               models: Sequence[str] | None = None) -> list[Candidate]:
    """Random search-space points (each on one of ``models``, default the workload's) and presets."""
    from advisor import space as spaces
    from advisor.knobs import forced_by_model
    from advisor.presets import PRESETS

    rng = np.random.default_rng(seed)
    known = set(spaces.list_spaces())
    out: list[Candidate] = []
    usable: list[str] = []
    for fw in frameworks:
        name = f"{fw}-{target.device_kind}"
        if name not in known:
            continue
        usable.append(fw)
        sp = spaces.load_space(name, cores=target.cores)
        pool = list(models) if models else [workload.model]
        for k in range(per_framework):
            model = pool[k % len(pool)]
            forced = forced_by_model(fw, model)
            params = {**sp.sample(rng, exclude=set(exclude) | set(forced)), **forced}
            out.append(Candidate(sp.to_config(params), f"space:{name}", params, model=model))
    device = "cuda" if target.device_kind == "gpu" else "cpu"
    presets = [p for p in PRESETS.values() if p.dataset == workload.dataset] or list(PRESETS.values())
    for preset in presets:
        for fw in usable:
            if preset.supports(fw):
                cfg = preset.to_config(framework=fw, threads=target.cores if device == "cpu" else 1, device=device)
                out.append(Candidate(cfg, f"preset:{preset.name}", None, model=workload.model))
    return out


def columns(cands: Sequence[Candidate], workload: WorkloadInfo, target: Target,
            overrides: dict[str, Any] | None = None) -> dict[str, list[Any]]:
    """Candidates as knowledge-base columns, so the surrogate sees them as it saw its trials
    (``overrides``: config fields replaced in every row, e.g. the same runs on a CPU)."""
    n = len(cands)
    cfgs = [{**c.config.to_dict(), **(overrides or {})} for c in cands]
    cols: dict[str, list[Any]] = {f"cfg_{k}": [c[k] for c in cfgs] for k in cfgs[0] if k != "framework"} if n else {}
    gemm = dict(target.gemm_gflops)
    best = max(gemm.values()) if gemm else None
    cols.update({
        "framework": [c["framework"] for c in cfgs],
        "device_kind": [target.device_kind] * n,
        "gpu_model": [target.gpu_model or ""] * n,
        "train_samples": [workload.train_samples] * n,
        "test_samples": [workload.test_samples] * n,
        "input_h": [workload.input_shape[0]] * n,
        "input_w": [workload.input_shape[1]] * n,
        "input_c": [workload.input_shape[2]] * n,
        "num_classes": [workload.num_classes] * n,
        "model": [workload.model] * n,
        "landmark": [workload.landmark] * n,
        "flops_per_sample": [workload.flops_per_sample] * n,
        "params": [workload.params] * n,
        "cores_granted": [c["threads"] for c in cfgs],
        "hw_gemm_gflops_threads": [knowledge.gflops_at(gemm, c["threads"]) if gemm else None for c in cfgs],
        "hw_gemm_gflops_max": [best] * n,
    })
    return cols
