"""Candidate configurations, and the knowledge-base columns the surrogate predicts them from.

Candidates come from every framework's search space for the target (``<framework>-cpu|gpu``),
sampled at random, plus the seed study's stock settings (:mod:`advisor.presets`).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Collection, Sequence

import numpy as np

from advisor import knowledge
from advisor._recommend._baseline import EPOCH_GRID
from advisor._recommend._workload import Target, WorkloadInfo, describe_workload
from advisor.records import Config

__all__ = ["DEFAULT_CANDIDATES", "MODEL_MIN_TRIALS", "Candidate", "family_key", "candidates", "columns", "unseen_knobs",
           "candidate_models", "too_small_for", "portfolio_candidates", "unique", "encode_candidates", "space_names"]

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
    #: A measurement of this recipe on another device kind: its accuracy is evidence here, its time
    #: and memory are not (a :class:`advisor._recommend._baseline.Measured`).
    accuracy_of: Any = None
    #: A portfolio recipe's measured record against the obvious default on the matrix's other
    #: datasets (``transfer`` of :func:`advisor._recommend._portfolio.build_portfolio`).
    transfer: dict[str, Any] | None = None
    #: A run under a time budget: the epochs it is predicted to complete (the median; ``config.epochs``
    #: is its cap). None: it runs ``config.epochs``.
    run_epochs: int | None = None


def family_key(c: Candidate) -> str:
    """A candidate's recipe without its run length: the epoch-grid family it belongs to."""
    import json

    return json.dumps({**c.config.to_dict(), "epochs": None}, sort_keys=True, default=str) + str(c.model)


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
            overrides: dict[str, Any] | None = None,
            reading: tuple[Sequence[int], Sequence[int]] | None = None) -> dict[str, list[Any]]:
    """Candidates as knowledge-base columns, so the surrogate sees them as it saw its trials
    (``overrides``: config fields replaced in every row, e.g. the same runs on a CPU; ``reading``:
    (epochs, schedule) per row, each row read after that many epochs of a schedule laid over its
    own, a learning-curve reading)."""
    n = len(cands)
    as_dict: dict[int, dict[str, Any]] = {}  # a candidate read at several epochs is one config
    for c in cands:
        if id(c.config) not in as_dict:
            as_dict[id(c.config)] = c.config.to_dict()
    cfgs = [{**as_dict[id(c.config)], **(overrides or {})} for c in cands]
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
    if reading is not None:
        cols["cfg_epochs"], cols["schedule_epochs"] = list(reading[0]), list(reading[1])
    return cols

#: Models considered when the user names none: the workload's default and every model the table
#: holds at least this many completed trials of.
MODEL_MIN_TRIALS = 20


@functools.lru_cache(maxsize=1)
def space_names() -> frozenset[str]:
    from advisor import space as spaces

    return frozenset(spaces.list_spaces())


def _well_known(kb: knowledge.Table) -> list[str]:
    """The models the table holds at least :data:`MODEL_MIN_TRIALS` completed trials of, most first."""
    from collections import Counter

    counts = Counter(mdl for mdl, st in zip(kb["model"], kb["status"]) if st == "ok")
    return [name for name, n in counts.most_common() if n >= MODEL_MIN_TRIALS]


def _builds(name: str, shape: Sequence[int], num_classes: int) -> bool:
    from advisor import models as model_registry

    try:
        model_registry.param_count(model_registry.get_model(name), tuple(shape), num_classes)
    except Exception:  # noqa: BLE001 - an unknown model or one that does not fit this input
        return False
    return True


def candidate_models(kb: knowledge.Table, workload: WorkloadInfo) -> list[str]:
    """The workload's default model, then the models the table knows well, that build on this input."""
    out = [workload.model]
    out += [name for name in _well_known(kb) if name not in out
            and _builds(name, workload.input_shape, workload.num_classes)]
    return out


def too_small_for(kb: knowledge.Table, workload: WorkloadInfo) -> dict[str, int]:
    """The models the table knows well that do not build on this input because it is too small
    (each pooling halves it), each with the smallest square side it builds on."""
    shape = tuple(workload.input_shape)
    out: dict[str, int] = {}
    for name in _well_known(kb):
        if len(shape) != 3 or _builds(name, shape, workload.num_classes):
            continue
        side = next((s for s in range(max(shape[:2]) + 1, 257)
                     if _builds(name, (max(s, shape[0]), max(s, shape[1]), shape[2]), workload.num_classes)), None)
        if side is not None:
            out[name] = side
    return out


def portfolio_candidates(portfolio: list[dict[str, Any]], workload: WorkloadInfo, target: Target,
                          frameworks: Sequence[str], models: Sequence[str], model_given: bool,
                          exclude: Any, max_time_s: float | None = None) -> list[Candidate]:
    """Each portfolio recipe over the epoch grid, with the measured record that speaks for a
    question bounded by ``max_time_s`` (:func:`~advisor._recommend._portfolio.record_for`)."""
    from advisor._recommend._portfolio import record_for
    from advisor.knobs import KNOBS, forced_by_model, knob_applies
    from advisor.records import Config

    device = "cuda" if target.device_kind == "gpu" else "cpu"
    out = []
    for recipe in portfolio:
        fw = str(recipe.get("framework"))
        mdl = workload.model if model_given else str(recipe["model"])
        if fw not in frameworks or mdl not in models:
            continue
        params = {k.name: recipe[k.name] for k in KNOBS if k.name in recipe and k.name not in exclude
                  and knob_applies(k, fw, target.device_kind) and not (device == "cuda" and k.cpu_speed)}
        params.update(forced_by_model(fw, mdl))
        record = record_for(recipe, max_time_s)
        if record is None and recipe.get("transfers"):
            continue  # it wins only given more time than the bound
        for e in EPOCH_GRID:
            try:
                cfg = Config.from_dict({**params, "framework": fw, "epochs": e, "device": device,
                                        "threads": target.cores if device == "cpu" else 1})
            except Exception:  # noqa: BLE001 - a recipe this target cannot take
                break
            out.append(Candidate(cfg, "portfolio", None, model=mdl, transfer=record))
    return out


def unique(cands: list[Candidate]) -> list[Candidate]:
    """One candidate per (model, config); a measured one wins over a predicted copy of itself."""
    seen: dict[str, int] = {}
    out: list[Candidate] = []
    for c in cands:
        key = c.config.to_json() + "|" + str(c.model)
        if key in seen:
            if c.measured is not None:
                out[seen[key]] = c
            elif c.accuracy_of is not None and out[seen[key]].measured is None and (
                    out[seen[key]].accuracy_of is None  # e.g. the default, measured on a CPU
                    or c.accuracy_of.accuracy[1] > out[seen[key]].accuracy_of.accuracy[1]):  # two runs stand in: the better
                out[seen[key]] = dataclasses.replace(out[seen[key]], accuracy_of=c.accuracy_of)
            continue
        seen[key] = len(out)
        out.append(c)
    return out


def encode_candidates(cands: list[Candidate], workload: WorkloadInfo, target: Target, surrogate: Any,
            overrides: dict[str, Any] | None = None,
            reading: tuple[Sequence[int], Sequence[int]] | None = None) -> np.ndarray:
    from advisor.surrogate.features import encode

    x = np.empty((len(cands), len(surrogate.schema.features)))
    by_model: dict[str, list[int]] = {}
    for i, c in enumerate(cands):
        by_model.setdefault(c.model or workload.model, []).append(i)
    for mdl, idx in by_model.items():
        info = workload if mdl == workload.model else describe_workload(
            workload.dataset, model=mdl, train_samples=workload.train_samples if workload.train_samples_given else None)
        if info.landmark is None and workload.landmark is not None:
            from dataclasses import replace

            info = replace(info, landmark=workload.landmark)
        x[idx] = encode(columns([cands[i] for i in idx], info, target, overrides, None if reading is None else
                                ([reading[0][i] for i in idx], [reading[1][i] for i in idx])), surrogate.schema)
    return x
