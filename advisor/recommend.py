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
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

import numpy as np

from advisor import knowledge
from advisor.errors import ConstraintError, KnowledgeBaseError, SurrogateError, invalid_parameter
from advisor.records import FRAMEWORKS, Config, HardwareProfile, TrialResult

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

PREFERENCES = ("fast", "accurate", "lean", "balanced")
#: ``balanced`` picks among configurations predicted within this much accuracy of the best one.
BALANCED_ACCURACY_SLACK = 0.01
DEFAULT_CANDIDATES = 500  # per framework; a few thousand in all
EVIDENCE_K = 3
# How much wider an extrapolated band is: x2 in log space for time and memory, +-0.1 accuracy.
WIDEN_LOG = 2.0
WIDEN_ACCURACY = 0.1


# --------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Constraints:
    """Bounds on the predicted median; ``None`` means no bound."""

    max_time_s: float | None = None
    min_accuracy: float | None = None
    max_memory_mb: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_time_s", "max_memory_mb"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
                raise invalid_parameter(name, "Constraints", "a positive number", v)
        if self.min_accuracy is not None and not (0.0 <= self.min_accuracy <= 1.0):
            raise invalid_parameter("min_accuracy", "Constraints", "a number in [0, 1]", self.min_accuracy)


@dataclass(frozen=True)
class Target:
    """The hardware to recommend for."""

    device_kind: str
    cores: int
    gpu_model: str | None = None
    hardware_id: str = ""
    gemm_gflops: Mapping[str, float] = field(default_factory=dict)
    physical_cores: int | None = None
    memory_gb: float | None = None


@dataclass(frozen=True)
class WorkloadInfo:
    """What is trained, known without loading any data."""

    dataset: str
    model: str
    input_shape: tuple[int, int, int]
    num_classes: int
    train_samples: int
    test_samples: int
    flops_per_sample: float
    params: int
    synthetic: bool
    train_samples_given: bool = False
    landmark: float | None = None


@dataclass(frozen=True)
class Prediction:
    """A predicted median and its 10-90% band."""

    lo: float
    mid: float
    hi: float


@dataclass(frozen=True)
class Evidence:
    """A measured trial near a recommended configuration."""

    trial_id: str
    framework: str
    dataset_name: str
    train_samples: int | None
    device_kind: str
    distance: float
    status: str
    train_time_s: float | None
    test_accuracy: float | None
    peak_memory_mb: float | None


@dataclass(frozen=True)
class Choice:
    """One recommended configuration with its predictions (never measurements) and evidence."""

    rank: int
    framework: str
    source: str
    config: dict[str, Any]
    space_params: dict[str, Any] | None
    time_s: Prediction
    accuracy: Prediction
    memory_mb: Prediction
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class Recommendation:
    """The answer of :func:`recommend`."""

    workload: WorkloadInfo
    target: Target
    constraints: Constraints
    preference: str
    choices: tuple[Choice, ...]
    n_candidates: int
    n_feasible: int
    n_front: int
    extrapolation: bool
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    table: str
    model_dir: str
    table_mismatch: bool = False
    #: No trial the surrogate was fitted on has this workload (dataset and training size): its bands
    #: use the offset calibrated on held-out workloads. ``None`` when the model does not record them.
    new_workload: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["target"]["gemm_gflops"] = dict(self.target.gemm_gflops)
        return data


# ------------------------------------------------------------------------------ workload, target


def describe_workload(dataset: str, *, model: str | None = None, train_samples: int | None = None) -> WorkloadInfo:
    """Meta-features of a workload from the dataset registry and the model spec (no data loaded).

    Raises:
        UnknownNameError: For an unknown dataset or model.
        InvalidParameterError: When ``train_samples`` is not in ``[1, train size]``.
    """
    from advisor import datasets, models
    from advisor._datasets.registry import is_npz_path

    info = datasets.get_info(dataset)
    name = model or models.default_model_for(info.input_shape)
    spec = models.get_model(name)
    n = info.train_size if train_samples is None else train_samples
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= info.train_size:
        raise invalid_parameter("train_samples", f"dataset {info.name!r}", f"an integer in [1, {info.train_size}]", n)
    shape = tuple(int(d) for d in info.input_shape)
    landmark = info.landmark
    if landmark is None and is_npz_path(info.name):
        from advisor._datasets.landmark import landmark_score

        landmark = landmark_score(info.name)  # the user's own data: measured now (one linear solve)
    return WorkloadInfo(
        dataset=info.name, model=name, input_shape=(shape[0], shape[1], shape[2]), num_classes=info.num_classes,
        train_samples=n, test_samples=info.test_size,
        flops_per_sample=models.training_flops_per_sample(spec, shape, info.num_classes),
        params=models.param_count(spec, shape, info.num_classes), synthetic=info.synthetic,
        train_samples_given=train_samples is not None, landmark=landmark,
    )


def resolve_target(device_kind: str = "cpu", *, gpu_model: str | None = None, cores: int | None = None,
                   profile: HardwareProfile | None = None) -> Target:
    """The target hardware: this machine's cached profile (or its identity: no calibration is run).

    For a GPU target on a machine without one, the GPU model is ``gpu_model`` (or unknown) and the
    CPU speed of this machine is not used.
    """
    if device_kind not in ("cpu", "gpu"):
        raise invalid_parameter("device_kind", "resolve_target", "'cpu' or 'gpu'", device_kind)
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
        raise invalid_parameter("cores", "resolve_target", "an integer >= 1", cores)
    if profile is None:
        from advisor import hardware

        profile = hardware.load_cached() or hardware.identity()
    n_cores = cores or len(profile.affinity) or profile.logical_cores
    if device_kind == "gpu" and not profile.gpus:
        return Target("gpu", n_cores, gpu_model, "", {}, None, None)
    gpu = (gpu_model or profile.gpus[0].name) if device_kind == "gpu" else None
    return Target(device_kind, n_cores, gpu, profile.profile_id, dict(profile.gemm_gflops),
                  profile.physical_cores, profile.memory_gb)


# ------------------------------------------------------------------------------------ candidates


@dataclass(frozen=True)
class _Candidate:
    config: Config
    source: str
    space_params: dict[str, Any] | None


def unseen_knobs(schema: Any) -> frozenset[str]:
    """Knobs a surrogate cannot see (fitted before they existed): candidates keep their defaults,
    since a prediction blind to a knob would pick its values at random."""
    from advisor.knobs import KNOBS
    from advisor.surrogate.features import FEATURES

    known = {f.name for f in schema.features}
    seen = {name for name in (f.name for f in FEATURES) if name in known}
    return frozenset(k.name for k in KNOBS if k.encoding != "none"
                     and k.name not in seen and f"log10_{k.name}" not in seen)


def _candidates(workload: WorkloadInfo, target: Target, frameworks: Sequence[str], *,
                per_framework: int, seed: int, exclude: Collection[str] = ()) -> list[_Candidate]:
    from advisor import space as spaces
    from advisor.presets import PRESETS

    rng = np.random.default_rng(seed)
    known = set(spaces.list_spaces())
    out: list[_Candidate] = []
    usable: list[str] = []
    for fw in frameworks:
        name = f"{fw}-{target.device_kind}"
        if name not in known:
            continue
        usable.append(fw)
        sp = spaces.load_space(name, cores=target.cores)
        for _ in range(per_framework):
            params = sp.sample(rng, exclude=exclude)
            out.append(_Candidate(sp.to_config(params), f"space:{name}", params))
    device = "cuda" if target.device_kind == "gpu" else "cpu"
    presets = [p for p in PRESETS.values() if p.dataset == workload.dataset] or list(PRESETS.values())
    for preset in presets:
        for fw in usable:
            if preset.supports(fw):
                cfg = preset.to_config(framework=fw, threads=target.cores if device == "cpu" else 1, device=device)
                out.append(_Candidate(cfg, f"preset:{preset.name}", None))
    return out


def _columns(cands: Sequence[_Candidate], workload: WorkloadInfo, target: Target) -> dict[str, list[Any]]:
    """Candidates as knowledge-base columns, so the surrogate sees them as it saw its trials."""
    n = len(cands)
    cfgs = [c.config.to_dict() for c in cands]
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


# ------------------------------------------------------------------------------- Pareto, ranking


def pareto_mask(costs: np.ndarray) -> np.ndarray:
    """Rows of ``costs`` (n x m, all minimised) that no other row dominates.

    Rows are visited in lexicographic order, so a row can only be dominated by one visited before
    it; by transitivity it suffices to test it against the front found so far, which stays small.
    Equal rows do not dominate each other: all of them are kept.
    """
    n = len(costs)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    costs = np.asarray(costs, dtype=float)
    front = np.empty_like(costs)
    k = 0
    for i in np.lexsort(costs.T[::-1]):
        row = costs[i]
        if k:
            f = front[:k]
            if np.any(np.all(f <= row, axis=1) & np.any(f < row, axis=1)):
                continue
        front[k] = row
        k += 1
        keep[i] = True
    return keep


def _rank(costs: np.ndarray, preference: str) -> np.ndarray:
    """Order of rows (costs: log time, -accuracy, log memory) by preference, best first.

    ``balanced`` first keeps the rows whose accuracy is within :data:`BALANCED_ACCURACY_SLACK` of
    the best row's and orders them by time, then memory; the other rows follow, by distance to the
    ideal point with all three objectives scaled. A knee over all three objectives alone tends to
    pick a configuration that trains in no time to a useless accuracy, which no user means by
    balanced. A knee over time and memory within the near-best set (the rule before) let a lower
    memory outweigh a several-fold longer training: on the held-out workloads of
    ``benchmarks/results/recommend.md`` it picked scikit-learn configs training 1.6-6.3x longer
    than a torch config of the same or better measured accuracy. Memory limits belong to
    ``--max-memory`` and ``--prefer lean``.
    """
    t, a, m = costs[:, 0], costs[:, 1], costs[:, 2]
    if preference == "fast":
        return np.lexsort((m, a, t))
    if preference == "accurate":
        return np.lexsort((m, t, a))
    if preference == "lean":
        return np.lexsort((t, a, m))

    def knee(block: np.ndarray) -> np.ndarray:
        span = block.max(axis=0) - block.min(axis=0)
        scaled = (block - block.min(axis=0)) / np.where(span > 0, span, 1.0)
        return np.linalg.norm(scaled, axis=1)

    near = a <= a.min() + BALANCED_ACCURACY_SLACK
    first = np.flatnonzero(near)
    rest = np.flatnonzero(~near)
    first = first[np.lexsort((m[first], t[first]))]
    rest = rest[np.lexsort((t[rest], knee(costs[rest])))] if len(rest) else rest
    return np.concatenate([first, rest])


def _spread(ordered: np.ndarray, time_s: np.ndarray, accuracy: np.ndarray, memory_mb: np.ndarray,
            want: int) -> np.ndarray:
    """``ordered`` with its first ``want`` entries made to show the trade-offs of the front.

    The first entry stays (the preference's pick); each next one is the entry that adds the most
    predicted hypervolume (time, accuracy, memory; reference 1.1 x the worst time and memory of
    ``ordered``, accuracy 0) to those chosen, ties to the earlier in ``ordered``. Without this the
    top K of ``balanced`` were K near-copies of one point (the near-best, slow configurations),
    which tells a user nothing about what a faster or leaner choice would cost. The remaining
    entries follow in their order.
    """
    from advisor.pareto import hypervolume

    if want < 2 or len(ordered) < 3:
        return ordered
    directions = ("minimize", "maximize", "minimize")
    points = {int(j): (float(time_s[j]), float(accuracy[j]), float(memory_mb[j])) for j in ordered}
    ref = (1.1 * max(p[0] for p in points.values()), 0.0, 1.1 * max(p[2] for p in points.values()))
    scale = (ref[0], 1.0, ref[2])
    chosen = [int(ordered[0])]
    while len(chosen) < min(want, len(ordered)):
        base = hypervolume([points[c] for c in chosen], directions, ref, scale=scale)
        gains = [(hypervolume([points[c] for c in chosen] + [points[int(j)]], directions, ref, scale=scale) - base,
                  -k, int(j)) for k, j in enumerate(ordered) if int(j) not in chosen]
        gain, _, best = max(gains)
        if gain <= 0:
            break
        chosen.append(best)
    return np.array(chosen + [int(j) for j in ordered if int(j) not in chosen])


def _layers(costs: np.ndarray, want: int) -> list[int]:
    """Indices of the front, then of the next fronts, until ``want`` are collected."""
    remaining = np.arange(len(costs))
    layers: list[int] = []
    while len(remaining) and (not layers or len(layers) < want):
        mask = pareto_mask(costs[remaining])
        layers.extend(remaining[mask].tolist())
        remaining = remaining[~mask]
    return layers


# ------------------------------------------------------------------------------ evidence, extrap.


class _Space:
    """Standardised feature space of the table's trials, for nearest-trial evidence."""

    def __init__(self, surrogate: Any, table: knowledge.Table) -> None:
        from advisor.surrogate.features import encode

        self.schema = surrogate.schema
        self.cat = np.array([f.kind == "cat" for f in self.schema.features])
        self.log = np.array([f.log for f in self.schema.features])
        self.x = self._transform(encode(table.columns, self.schema))
        with warnings.catch_warnings():  # an all-unknown column (no GPU trials...) has no spread
            warnings.simplefilter("ignore", RuntimeWarning)
            std = np.nanstd(self.x[:, ~self.cat], axis=0)
        self.std = np.where((std > 0) & np.isfinite(std), std, 1.0)

    def _transform(self, x: np.ndarray) -> np.ndarray:
        x = x.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            x[:, self.log] = np.where(x[:, self.log] > 0, np.log10(x[:, self.log]), np.nan)
        return x

    def distances(self, q: np.ndarray) -> np.ndarray:
        """Distance from one encoded query row to every trial."""
        q = self._transform(q[None, :])[0]
        num = (self.x[:, ~self.cat] - q[~self.cat]) / self.std
        num = np.where(np.isnan(num), np.where(np.isnan(self.x[:, ~self.cat]) & np.isnan(q[~self.cat]), 0.0, 1.0), num)
        cat = self.x[:, self.cat]
        qc = q[self.cat]
        mismatch = ~((cat == qc) | (np.isnan(cat) & np.isnan(qc)))
        return np.sqrt(np.sum(num ** 2, axis=1) + mismatch.sum(axis=1))


def _evidence(space: _Space, table: knowledge.Table, q: np.ndarray, framework: str, k: int) -> tuple[Evidence, ...]:
    d = space.distances(q)
    same = np.array([f == framework for f in table["framework"]])
    ok = np.array([s == "ok" for s in table["status"]])
    # Completed trials of the same framework are the best evidence; fall back step by step.
    for mask in (same & ok, same, ok):
        if mask.any():
            pool = np.flatnonzero(mask)
            break
    else:
        pool = np.arange(len(d))
    best = pool[np.argsort(d[pool], kind="stable")[:k]]
    return tuple(
        Evidence(
            trial_id=table["trial_id"][i], framework=table["framework"][i], dataset_name=table["dataset_name"][i],
            train_samples=table["train_samples"][i], device_kind=table["device_kind"][i],
            distance=round(float(d[i]), 3), status=table["status"][i], train_time_s=table["train_time_s"][i],
            test_accuracy=table["test_accuracy"][i], peak_memory_mb=table["peak_memory_mb"][i],
        )
        for i in best
    )


def _extrapolation(table: knowledge.Table, workload: WorkloadInfo, target: Target) -> list[str]:
    ok = [i for i, s in enumerate(table["status"]) if s == "ok"]
    kinds = {table["device_kind"][i] for i in ok}
    reasons = []
    if target.device_kind not in kinds:
        reasons.append(f"the knowledge base has no measured {target.device_kind.upper()} trials "
                       f"(it holds {', '.join(sorted(kinds)).upper() or 'none'}): every figure is predicted "
                       f"from other hardware")
    elif target.device_kind == "gpu" and target.gpu_model:
        models = {table["gpu_model"][i] for i in ok if table["device_kind"][i] == "gpu"}
        if target.gpu_model not in models:
            reasons.append(f"no measured trials on GPU model {target.gpu_model!r} "
                           f"(measured: {', '.join(sorted(m for m in models if m)) or 'unknown models'})")
    h, w, c = workload.input_shape
    shapes = {(table["input_h"][i], table["input_w"][i], table["input_c"][i], table["num_classes"][i]) for i in ok}

    def near(s: tuple[Any, ...]) -> bool:
        if None in s or not s[0] or not s[1] or not s[3]:
            return False
        return (s[2] == c and abs(math.log2(h * w / (s[0] * s[1]))) <= 1.0
                and abs(math.log2(workload.num_classes / s[3])) <= 1.0)

    if not any(near(s) for s in shapes):
        seen = ", ".join(f"{a}x{b}x{cc}/{k} classes" for a, b, cc, k in sorted(shapes, key=str)[:4]) or "none"
        reasons.append(f"no measured trials on data like {h}x{w}x{c} with {workload.num_classes} classes "
                       f"(measured: {seen})")
    sizes = [table["train_samples"][i] for i in ok if table["train_samples"][i]]
    if sizes and not (min(sizes) / 4 <= workload.train_samples <= max(sizes) * 4):
        reasons.append(f"{workload.train_samples} training samples is far outside the measured "
                       f"{min(sizes)}..{max(sizes)}")
    return reasons


# ------------------------------------------------------------------------------- loading models


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


# -------------------------------------------------------------------------------------- recommend


def _widen(band: Any, log: bool) -> tuple[np.ndarray, np.ndarray]:
    if log:
        return band.mid * (band.lo / band.mid) ** WIDEN_LOG, band.mid * (band.hi / band.mid) ** WIDEN_LOG
    return np.clip(band.lo - WIDEN_ACCURACY, 0, 1), np.clip(band.hi + WIDEN_ACCURACY, 0, 1)


def _check_constraints(c: Constraints, t: np.ndarray, a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Feasible rows; when none, a ConstraintError naming the binding bound and the best value."""
    steps = [
        ("--max-time", c.max_time_s, "s", t, lambda v, b: v <= b, "the fastest predicted training time is {:.3g} s",
         lambda v: v.min()),
        ("--min-accuracy", c.min_accuracy, "", a, lambda v, b: v >= b, "the best predicted accuracy is {:.4f}",
         lambda v: v.max()),
        ("--max-memory", c.max_memory_mb, " MB", m, lambda v, b: v <= b,
         "the leanest predicted peak memory is {:.0f} MB", lambda v: v.min()),
    ]
    mask = np.ones(len(t), dtype=bool)
    applied: list[str] = []
    for flag, bound, unit, values, ok, best_text, best in steps:
        if bound is None:
            continue
        new = mask & ok(values, bound)
        if not new.any():
            within = f" among configurations that meet {' and '.join(applied)}" if applied else ""
            raise ConstraintError(
                f"No configuration is predicted to meet {flag} {bound:g}{unit}: "
                f"{best_text.format(best(values[mask]))}{within}; relax {flag}."
            )
        mask = new
        applied.append(f"{flag} {bound:g}{unit}")
    return mask


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
    cands = _candidates(workload, target, fws, per_framework=candidates_per_framework, seed=seed,
                        exclude=exclude)
    if not cands:
        raise SurrogateError(f"No framework among {', '.join(fws)} has a search space for the {device_kind} target.")
    from advisor.surrogate.features import encode

    x = encode(_columns(cands, workload, target), surrogate.schema)
    pred = surrogate.predict_matrix(x)
    t_band, a_band, m_band = pred["train_time_s"], pred["test_accuracy"], pred["peak_memory_mb"]
    feasible = _check_constraints(constraints, t_band.mid, a_band.mid, m_band.mid)

    reasons = _extrapolation(kb, workload, target)
    known = surrogate.meta.get("workloads")
    new_workload = None
    if known is not None and len(x):
        from advisor.surrogate.model import seen_workloads

        new_workload = not bool(seen_workloads(x[:1], known)[0])  # every candidate shares the workload
    t_lo, t_hi, a_lo, a_hi, m_lo, m_hi = t_band.lo, t_band.hi, a_band.lo, a_band.hi, m_band.lo, m_band.hi
    if reasons:
        (t_lo, t_hi), (a_lo, a_hi), (m_lo, m_hi) = _widen(t_band, True), _widen(a_band, False), _widen(m_band, True)

    idx = np.flatnonzero(feasible)
    costs = np.column_stack([np.log(t_band.mid[idx]), -a_band.mid[idx], np.log(m_band.mid[idx])])
    n_front = int(pareto_mask(costs).sum())
    pool = np.array(_layers(costs, top))
    ordered = pool[_rank(costs[pool], prefer)]
    if prefer == "balanced":
        ordered = _spread(ordered, t_band.mid[idx], a_band.mid[idx], m_band.mid[idx], top)
    space = _Space(surrogate, kb)
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
            evidence=_evidence(space, kb, x[i], cand.config.framework, EVIDENCE_K),
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


# ----------------------------------------------------------------------------------------- verify


_MODULE_OF = {"torch": "torch", "tensorflow": "tensorflow", "onnxruntime": "onnxruntime", "sklearn": "sklearn"}
_DOWNLOADED = ("mnist", "fashion-mnist", "cifar10")


@dataclass(frozen=True)
class Verification:
    """A recommended configuration run for real, or why it was not."""

    rank: int
    framework: str
    predicted: dict[str, Prediction]
    status: str  # a TrialResult status, or "skipped"
    measured: dict[str, float | None]
    within_band: dict[str, bool | None]
    trial_id: str | None = None
    note: str | None = None


def _why_not(choice: Choice, rec: Recommendation, data_dir: str | None) -> str | None:
    fw = choice.framework
    if importlib.util.find_spec(_MODULE_OF[fw]) is None:
        return f"rank {choice.rank}: {fw} is not installed here (pip install 'advisor[all]'), so it was not run"
    if rec.target.device_kind == "gpu":
        from advisor import hardware

        if not hardware.identity().gpus:
            return f"rank {choice.rank}: this machine has no GPU, so a GPU configuration cannot be measured here"
    if rec.workload.dataset in _DOWNLOADED:
        from advisor import datasets
        from advisor.errors import DatasetError

        try:
            datasets.find_files(rec.workload.dataset, data_dir=data_dir, download=False)
        except DatasetError as exc:
            return f"rank {choice.rank}: the {rec.workload.dataset} files are not here ({exc}); pass --data-dir"
    return None


def verify(rec: Recommendation, n: int, *, data_dir: str | None = None, workdir: str | Path | None = None,
           knowledge_path: str | Path | None = None, time_limit_s: float | None = None,
           ) -> tuple[list[Verification], knowledge.MergeStats | None]:
    """Run the top ``n`` choices through the harness and merge them into the user's knowledge base.

    Args:
        rec: A recommendation.
        n: How many of its choices to run.
        data_dir: Folder with the dataset's canonical files.
        workdir: Where trial folders go (default: a temporary folder).
        knowledge_path: The knowledge base to merge into (default :func:`knowledge.user_knowledge_path`).
        time_limit_s: Wall-time limit per trial (default 3x the predicted 90% time, plus 2 minutes).

    Returns:
        One :class:`Verification` per choice tried, and the merge statistics (``None`` if nothing ran).
    """
    from advisor import harness
    from advisor.records import Workload

    out: list[Verification] = []
    results: list[TrialResult] = []
    for choice in rec.choices[:n]:
        predicted = {"train_time_s": choice.time_s, "test_accuracy": choice.accuracy, "peak_memory_mb": choice.memory_mb}
        why = _why_not(choice, rec, data_dir)
        if why:
            out.append(Verification(choice.rank, choice.framework, predicted, "skipped", {}, {}, note=why))
            continue
        workload = Workload(dataset=rec.workload.dataset, model=rec.workload.model, data_dir=data_dir,
                            train_samples=rec.workload.train_samples if rec.workload.train_samples_given else None)
        limit = time_limit_s or 3 * choice.time_s.hi + 120
        result = harness.run_trial(workload, Config.from_dict(choice.config),
                                   limits=harness.Limits(wall_time_s=limit), workdir=workdir)
        results.append(result)
        measured = {"train_time_s": result.train_time_s, "test_accuracy": result.test_accuracy,
                    "peak_memory_mb": result.peak_memory_mb}
        within = {k: (None if v is None else bool(predicted[k].lo <= v <= predicted[k].hi)) for k, v in measured.items()}
        note = result.error.splitlines()[0][:200] if result.error else None
        out.append(Verification(choice.rank, choice.framework, predicted, result.status, measured, within,
                                trial_id=result.trial_id, note=note))
    stats = None
    if results:
        from advisor import hardware

        stats = knowledge.append_to_user_knowledge(results, hardware=hardware.load_cached(), path=knowledge_path)
    return out, stats
