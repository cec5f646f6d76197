"""Recommend configurations for a new workload: candidates, predictions, constraints, Pareto, ranking.

1. Candidates come from every framework's search space for the target (``<framework>-cpu|gpu``),
   sampled at random, plus the seed study's stock settings (:mod:`advisor.presets`).
2. The surrogate predicts time, accuracy and memory for all of them in one batched call per model.
3. The user's constraints filter them (on the predicted median); the predicted Pareto front is
   kept and ranked by preference: ``fast``, ``accurate``, ``lean`` or ``balanced`` (among the
   front points predicted within one accuracy point of the best, the fastest; the next ranks are
   the front points that add the most predicted hypervolume, so the top K shows the trade-offs).
4. Each choice carries evidence: the nearest measured trials in standardised feature space.
5. When the table has no trials on the requested device kind, or none near the dataset's
   meta-features, the result says it is an extrapolation, gives the reasons and widens the bands.

Nothing here imports a deep-learning framework or Optuna, and LightGBM only when the model loads.
:func:`verify` runs chosen configurations for real through the harness.

This module wires the steps together; each lives in a private module of ``advisor._recommend``
(``_workload``, ``_candidates``, ``_constraints``, ``_ranking``, ``_evidence``, ``_result``,
``_verify``), and the public names are re-exported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from advisor import knowledge
from advisor._recommend._candidates import DEFAULT_CANDIDATES, Candidate, candidates, columns, unseen_knobs
from advisor._recommend._constraints import Constraints, check_constraints
from advisor._recommend._evidence import EVIDENCE_K, TrialSpace, extrapolation, nearest_trials, widen
from advisor._recommend._ranking import PREFERENCES, front_layers, pareto_mask, rank, spread
from advisor._recommend._result import Choice, Evidence, Prediction, Recommendation
from advisor._recommend._verify import Verification, verify
from advisor._recommend._workload import Target, WorkloadInfo, describe_workload, resolve_target
from advisor.errors import KnowledgeBaseError, SurrogateError, invalid_parameter
from advisor.records import FRAMEWORKS, HardwareProfile

__all__ = [
    "PREFERENCES",
    "Constraints",
    "Target",
    "WorkloadInfo",
    "Prediction",
    "Evidence",
    "Choice",
    "Recommendation",
    "Verification",
    "describe_workload",
    "resolve_target",
    "recommend",
    "verify",
    "warm_start_params",
    "pareto_mask",
]

# The private names these helpers had before the split; tests still reach them through this module.
_Candidate = Candidate
_candidates = candidates
_columns = columns
_rank = rank
_spread = spread


def _load(table: str | Path | None, model_dir: str | Path | None, seed: int,
          on_progress: Callable[[str], None] | None) -> tuple[knowledge.Table, Any, list[str], str]:
    from advisor import surrogate as sg

    table_path = Path(table) if table is not None else sg.shipped_table()
    if not table_path.exists():
        hint = "pass --table FILE" if table is None else "check the path"
        raise KnowledgeBaseError(f"Knowledge base {table_path} does not exist; {hint}.")
    kb = knowledge.read(table_path)
    if not any(s == "ok" for s in kb["status"]):
        raise KnowledgeBaseError(f"Knowledge base {table_path} has no trials with status 'ok': nothing to learn from.")
    if model_dir is None and table is not None:
        if on_progress is not None:
            on_progress(f"Fitting a surrogate on {table_path} ({len(kb)} trials; pass --model-dir to use a saved one)")
        model = sg.fit(kb.columns, seed=seed, source=f"knowledge base {table_path}")
        return kb, model, [], "(fitted on the table)"
    directory = Path(model_dir) if model_dir is not None else sg.shipped_model_dir()
    model = sg.load(directory)
    warning = sg.table_warning(model, table_path)
    return kb, model, [warning] if warning else [], str(directory)


def recommend(
    dataset: str,
    *,
    model: str | None = None,
    train_samples: int | None = None,
    device_kind: str = "cpu",
    gpu_model: str | None = None,
    cores: int | None = None,
    constraints: Constraints = Constraints(),
    prefer: str = "balanced",
    frameworks: Sequence[str] | None = None,
    top: int = 3,
    table: str | Path | None = None,
    model_dir: str | Path | None = None,
    candidates_per_framework: int = DEFAULT_CANDIDATES,
    seed: int = 0,
    profile: HardwareProfile | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> Recommendation:
    """Recommend the best configurations for a workload on a hardware target.

    Args:
        dataset: Registry name, ``synthetic:HxWxC`` or ``.npz`` path (only its meta-features are read).
        model: Model name; default :func:`advisor.models.default_model_for` the input shape.
        train_samples: Training samples; default the dataset's full training set.
        device_kind: ``"cpu"`` or ``"gpu"``.
        gpu_model: GPU name for a GPU target (default: this machine's GPU, if any).
        cores: Cores to use (default: the cores this process may run on).
        constraints: Bounds on predicted time, accuracy and memory.
        prefer: One of :data:`PREFERENCES`.
        frameworks: Frameworks to consider (default: all with a search space for the target).
        top: How many configurations to return.
        table: Knowledge base for evidence; default the shipped one. Given without ``model_dir``,
            a surrogate is fitted on it in memory.
        model_dir: Surrogate model folder; default the shipped model.
        candidates_per_framework: Random search-space points per framework.
        seed: Seed of the candidate draw.
        profile: Hardware profile of the target machine (default: this machine).
        on_progress: Called with a line before slow steps (fitting a surrogate on ``table``).

    Returns:
        A :class:`Recommendation`; its choices are predictions, never measurements.

    Raises:
        ConstraintError: When no candidate meets the constraints (naming the binding one).
        KnowledgeBaseError, SurrogateError, UnknownNameError: For unusable inputs.
    """
    if prefer not in PREFERENCES:
        raise invalid_parameter("prefer", "recommend", f"one of {', '.join(PREFERENCES)}", prefer)
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise invalid_parameter("top", "recommend", "an integer >= 1", top)
    fws = list(frameworks) if frameworks else list(FRAMEWORKS)
    for fw in fws:
        if fw not in FRAMEWORKS:
            raise invalid_parameter("frameworks", "recommend", f"names from {', '.join(FRAMEWORKS)}", fw)
    workload = describe_workload(dataset, model=model, train_samples=train_samples)
    target = resolve_target(device_kind, gpu_model=gpu_model, cores=cores, profile=profile)
    kb, surrogate, notes, model_where = _load(table, model_dir, seed, on_progress)

    from advisor.datasets import refused_knobs

    from advisor.hardware import cpu_bf16_support

    exclude = unseen_knobs(surrogate.schema) | refused_knobs(workload.dataset)
    if target.device_kind == "cpu" and cpu_bf16_support() is None:
        exclude |= {"bfloat16"}
    cands = candidates(workload, target, fws, per_framework=candidates_per_framework, seed=seed,
                       exclude=exclude)
    if not cands:
        raise SurrogateError(f"No framework among {', '.join(fws)} has a search space for the {device_kind} target.")
    from advisor.surrogate.features import encode

    x = encode(columns(cands, workload, target), surrogate.schema)
    pred = surrogate.predict_matrix(x)
    t_band, a_band, m_band = pred["train_time_s"], pred["test_accuracy"], pred["peak_memory_mb"]
    feasible = check_constraints(constraints, t_band.mid, a_band.mid, m_band.mid)

    reasons = extrapolation(kb, workload, target)
    known = surrogate.meta.get("workloads")
    new_workload = None
    if known is not None and len(x):
        from advisor.surrogate.model import seen_workloads

        new_workload = not bool(seen_workloads(x[:1], known)[0])  # every candidate shares the workload
    t_lo, t_hi, a_lo, a_hi, m_lo, m_hi = t_band.lo, t_band.hi, a_band.lo, a_band.hi, m_band.lo, m_band.hi
    if reasons:
        (t_lo, t_hi), (a_lo, a_hi), (m_lo, m_hi) = widen(t_band, True), widen(a_band, False), widen(m_band, True)

    idx = np.flatnonzero(feasible)
    costs = np.column_stack([np.log(t_band.mid[idx]), -a_band.mid[idx], np.log(m_band.mid[idx])])
    n_front = int(pareto_mask(costs).sum())
    pool = np.array(front_layers(costs, top))
    ordered = pool[rank(costs[pool], prefer)]
    if prefer == "balanced":
        ordered = spread(ordered, t_band.mid[idx], a_band.mid[idx], m_band.mid[idx], top)
    space = TrialSpace(surrogate, kb)
    choices: list[Choice] = []
    seen: set[str] = set()
    for j in ordered:
        i = int(idx[j])
        cand = cands[i]
        key = cand.config.to_json()
        if key in seen:
            continue
        seen.add(key)
        choices.append(Choice(
            rank=len(choices) + 1, framework=cand.config.framework, source=cand.source,
            config=cand.config.to_dict(), space_params=cand.space_params,
            time_s=Prediction(float(t_lo[i]), float(t_band.mid[i]), float(t_hi[i])),
            accuracy=Prediction(float(a_lo[i]), float(a_band.mid[i]), float(a_hi[i])),
            memory_mb=Prediction(float(m_lo[i]), float(m_band.mid[i]), float(m_hi[i])),
            evidence=nearest_trials(space, kb, x[i], cand.config.framework, EVIDENCE_K),
        ))
        if len(choices) == top:
            break
    return Recommendation(
        workload=workload, target=target, constraints=constraints, preference=prefer, choices=tuple(choices),
        n_candidates=len(cands), n_feasible=int(feasible.sum()), n_front=n_front,
        extrapolation=bool(reasons), reasons=tuple(reasons), warnings=tuple(notes),
        table=str(kb.path), model_dir=model_where, table_mismatch=bool(notes), new_workload=new_workload,
    )


def warm_start_params(framework: str, dataset: str, model: str | None, target: str, n: int, *,
                      table: str | Path | None = None, model_dir: str | Path | None = None,
                      cores: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The surrogate's predicted front for one framework, as search-space param dicts.

    Meant for ``study.enqueue_trial``: only points drawn from ``<framework>-<target>``'s search
    space are returned (presets may fall outside its ranges), balanced preference first.
    """
    rec = recommend(dataset, model=model, device_kind=target, cores=cores, frameworks=[framework],
                    top=max(1, 4 * n), table=table, model_dir=model_dir, seed=seed)
    return [dict(c.space_params) for c in rec.choices if c.space_params is not None][:n]
