"""The obvious default, the epoch grid, and measured configurations of the very workload asked about.

- **The obvious default** is what a user would run without any advice: PyTorch, Adam at 1e-3,
  batch 128, a constant rate, the workload's model. It is always a candidate (at every epoch count
  of the grid) and always reported beside the pick, so a recommendation never hides what the
  plain choice would have given.
- **The epoch grid**: trusted recipes (the default, the portfolio, measured configurations) are
  offered at several run lengths, and the learning-curve model predicts each; a question such as
  "fastest to 99%" or "best within 5 minutes" then chooses the run length too.
- **Measured configurations**: trials of the same dataset, training size, device kind (and, on a
  CPU, the same hardware profile) in the knowledge base are candidates with their measured values
  (median of repeats, spread shown). The user's own knowledge base (the trials ``--verify`` and
  ``--budget`` recorded) adds its runs of the workload to them
  (:func:`with_own_trials`), so a run measured once answers the next question as measured.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection

import numpy as np

from advisor import knowledge
from advisor._recommend._workload import Target, WorkloadInfo
from advisor.errors import KnowledgeBaseError
from advisor.knobs import KNOBS
from advisor.records import Config

__all__ = ["OBVIOUS_DEFAULT", "EPOCH_GRID", "obvious_default", "Measured", "measured_configs", "same_workload_rows",
           "time_to_accuracy", "accuracy_noise",
           "accuracy_ceiling", "CEILING_MIN_TRIALS", "measured_elsewhere", "same_samples_seen", "with_own_trials",
           "is_obvious_default"]

#: What a user would run without advice (besides the framework and the model).
OBVIOUS_DEFAULT: dict[str, Any] = {"optimizer": "adam", "learning_rate": 1e-3, "batch_size": 128, "schedule": "constant"}
#: Run lengths the trusted recipes are offered at.
EPOCH_GRID = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 60)
#: Two measured accuracies closer than this are a tie (the portfolio's record against the default),
#: and a prediction may exceed the best measured accuracy by this much (the ceiling).
MEASURED_ACCURACY_NOISE = 0.005
#: A measured time or memory's band when a configuration ran once: repeat noise on this machine is
#: about this factor.
MEASURED_TIME_FACTOR = 1.12
#: z of the 90% quantile: a band's edges are its 10% and 90% quantiles.
_Z90 = 1.2816
#: Completed trials of a dataset (at the size asked) the table must hold before their best accuracy
#: bounds the predictions for it (:func:`accuracy_ceiling`).
CEILING_MIN_TRIALS = 20


def obvious_default(framework: str, target: Target, epochs: int) -> Config:
    """The obvious default on ``target`` for ``epochs`` epochs, with every core (CPU) or one process (GPU)."""
    device = "cuda" if target.device_kind == "gpu" else "cpu"
    threads = target.cores if device == "cpu" else 1
    return Config(framework=framework, epochs=epochs, threads=threads, device=device, **OBVIOUS_DEFAULT)


def is_obvious_default(config: Config, target: Target) -> bool:
    """Whether ``config`` is the obvious default on ``target`` at some run length (its epochs, time
    budget, stop and seed aside): a measured run of it is the default, measured."""
    return config == dataclasses.replace(obvious_default(config.framework, target, config.epochs),
                                         time_budget_s=config.time_budget_s, seed=config.seed,
                                         stop_at_accuracy=config.stop_at_accuracy)


@dataclass(frozen=True)
class Measured:
    """A configuration measured on the very workload: medians, ranges and how many runs."""

    config: Config
    model: str
    repeats: int
    time_s: tuple[float, float, float]
    accuracy: tuple[float, float, float]
    memory_mb: tuple[float, float, float]
    trial_ids: tuple[str, ...]
    #: The training samples its runs used (the largest measured size stands in for a full size
    #: that was never measured, see :func:`same_workload_rows`); 0 when unknown.
    train_samples: int = 0


def with_own_trials(table: knowledge.Table, own: str | Path | None, workload: WorkloadInfo,
                    leave_out: Collection[str] = ()) -> tuple[knowledge.Table, frozenset[str], str | None]:
    """``table`` with the rows of the user's own knowledge base ``own`` that ran this workload's
    dataset (on any device) appended, for measured evidence only (the surrogate is not refitted).

    A user's ``.npz`` is recognised by its content (the digest its trials record in
    ``dataset_variant``), not by the path it was given by: a run of ``data.npz`` counts for
    ``./data.npz`` and for the file moved elsewhere, and a run of another ``data.npz`` (or of an older
    version of the file) does not; those rows take the name asked. Rows whose trial id ``table``
    already holds are left out (a user who merged the shipped table into theirs counts each run once),
    and so are those named in ``leave_out`` (an interrupted loop's runs, asked again as it was asked).

    Returns:
        ``(table, own_ids, problem)``: the table to read evidence from, the trial ids it took from
        ``own``, and a one-line reason when ``own`` could not be read (then ``table`` unchanged).
        A missing file is no problem: nothing was measured yet.
    """
    if own is None or not Path(own).exists():
        return table, frozenset(), None
    try:
        mine = knowledge.read(own)
    except (KnowledgeBaseError, OSError) as exc:
        return table, frozenset(), f"your knowledge base {own} was not read ({exc}); only the table's trials are evidence."
    have = set(table["trial_id"])
    same = _same_data(workload, mine)
    rows = [i for i, (d, v, tid) in enumerate(zip(mine["dataset_name"], mine["dataset_variant"], mine["trial_id"]))
            if same(d, v) and tid not in have and str(tid) not in leave_out]
    if not rows:
        return table, frozenset(), None
    cols = {name: list(values) + [workload.dataset if name == "dataset_name" else mine.columns[name][i] for i in rows]
            for name, values in table.columns.items()}
    return knowledge.Table(cols, table.path), frozenset(str(mine["trial_id"][i]) for i in rows), None


def _same_data(workload: WorkloadInfo, mine: knowledge.Table) -> Callable[[Any, Any], bool]:
    """Whether a row (its dataset name and variant) ran the workload's data: the same registry name,
    or for a ``.npz`` the same file content (its name alone where the file cannot be read now)."""
    from advisor._datasets.registry import is_npz_path
    from advisor._datasets.sources import npz_digest, npz_variant

    if not is_npz_path(workload.dataset) or not any(str(v or "").startswith("npz") for v in mine["dataset_variant"]):
        return lambda name, variant: name == workload.dataset
    try:
        tag = npz_variant(npz_digest(Path(workload.dataset).expanduser()))
    except OSError:
        return lambda name, variant: name == workload.dataset
    return lambda name, variant: variant == tag


def same_workload_rows(table: knowledge.Table, workload: WorkloadInfo, target: Target | None) -> list[int]:
    """Rows of ``table`` measured on this workload and hardware class: same dataset and training size
    (the full size means the largest measured, when the user gave none), same device kind, and on
    a CPU the same hardware profile and no more threads than the cores asked for (a run on two
    threads neither runs as measured nor takes its measured time on one core); on a GPU the same GPU
    model, when known; status ``ok``, uncontended, real data.

    With ``target`` None, the rows whose *accuracy* is evidence on any hardware: every device, and
    contended runs too (contention slows a run; it does not change what the run learns).
    """
    cols = table.columns
    n = len(table)
    rows = [i for i in range(n) if cols["dataset_name"][i] == workload.dataset and cols["status"][i] == "ok"
            and not cols["synthetic"][i]
            and (target is None or (not cols["contended"][i] and cols["device_kind"][i] == target.device_kind))]
    if target is None:
        pass
    elif target.device_kind == "cpu":
        rows = [i for i in rows if target.hardware_id and cols["hardware_id"][i] == target.hardware_id
                and int(cols["cfg_threads"][i] or 1) <= target.cores]
    elif target.gpu_model:
        rows = [i for i in rows if cols["gpu_model"][i] == target.gpu_model]
    sizes = [cols["train_samples"][i] for i in rows]
    if workload.train_samples_given:
        want = workload.train_samples
    else:
        largest = max((s for s in sizes if s), default=None)
        want = largest if largest and largest >= 0.5 * workload.train_samples else workload.train_samples
    return [i for i, s in zip(rows, sizes) if s == want]


def time_to_accuracy(curve: Any, times: Any, total: Any, target: float) -> tuple[float, float] | None:
    """``(training seconds, accuracy)`` at the first epoch whose test accuracy reached ``target``, read
    from a run's per-epoch curve (its epoch times scaled to its training time); None when the curve
    never reached it or is not there."""
    if not isinstance(curve, (list, tuple)) or not isinstance(times, (list, tuple)) or len(curve) != len(times) \
            or not curve or total is None or not sum(times) > 0:
        return None
    cumulative = np.cumsum(np.asarray(times, dtype=float))
    for k, acc in enumerate(curve):
        if acc is not None and acc >= target:
            return float(total) * float(cumulative[k] / cumulative[-1]), float(acc)
    return None


def accuracy_noise(accuracy: float, test_samples: int, seeds: int) -> float:
    """Half-width of the 10-90% band of the accuracy a new run (another seed) of a configuration
    will measure, given the median of its runs with ``seeds`` distinct seeds.

    Seed-to-seed variation of a trained network's test accuracy is close to the binomial noise of
    its test set, ``sqrt(p (1 - p) / n)``; the new run adds its own to that of the median. So 99%
    measured on MNIST's 10,000 test images is a firmer figure than 97% on digits' 360.
    """
    n = max(1, int(test_samples))
    p = min(max(float(accuracy), 1.0 / n), 1.0 - 1.0 / n)
    return _Z90 * float(np.sqrt(p * (1.0 - p) / n)) * float(np.sqrt(1.0 + 1.0 / max(1, seeds)))


def measured_configs(table: knowledge.Table, rows: list[int], *, models: set[str],
                     stop_at: float | None = None) -> list[Measured]:
    """The measured configurations among ``rows`` (seed aside), with medians over their repeats.

    With ``stop_at`` (a ``--target-accuracy`` question, whose runs stop at it) each run counts as it
    would have run: its time and accuracy at the first epoch reaching the target, read from its
    curve, where it reached it. A run's own stop is then the question's, not its recipe's: runs of
    a recipe with and without one are its repeats (and the recipe's unmeasured copy is this
    measurement), except a run stopped at a lower accuracy, which ended before it could show this one."""
    cols = table.columns
    groups: dict[str, list[int]] = {}
    configs: dict[str, Config] = {}
    for i in rows:
        if cols["model"][i] not in models:
            continue
        try:
            cfg = knowledge.config_from_row({k: v[i] for k, v in cols.items()})
        except Exception:  # noqa: BLE001 - a row this version cannot turn back into a config
            continue
        if stop_at:
            if cfg.stop_at_accuracy and cfg.stop_at_accuracy < stop_at:
                continue
            cfg = dataclasses.replace(cfg, stop_at_accuracy=0.0)
        key = json.dumps({**cfg.to_dict(), "seed": None, "model": cols["model"][i]}, sort_keys=True, default=str)
        groups.setdefault(key, []).append(i)
        configs[key] = cfg
    out = []
    for key, idx in groups.items():
        stopped = {i: time_to_accuracy(cols["accuracy_curve"][i], cols["epoch_times"][i], cols["train_time_s"][i],
                                       stop_at) for i in idx} if stop_at else {}

        def value(name: str, i: int) -> float:
            at = {"train_time_s": 0, "test_accuracy": 1}.get(name)
            got = stopped.get(i)
            return float(got[at]) if got is not None and at is not None else float(cols[name][i])

        def stats(name: str) -> tuple[float, float, float] | None:
            values = [value(name, i) for i in idx if cols[name][i] is not None]
            if not values:
                return None
            return float(np.min(values)), float(np.median(values)), float(np.max(values))

        t, a, m = stats("train_time_s"), stats("test_accuracy"), stats("peak_memory_mb")
        if t is None or a is None or m is None:
            continue
        noise = accuracy_noise(a[1], int(np.median([cols["test_samples"][i] or 1 for i in idx])),
                               len({cols["cfg_seed"][i] for i in idx}))
        # Every run reached the target: it is met (a run stops just past it, so its accuracy's noise
        # band straddles it; another seed gets there too, its time is what varies).
        floor = stop_at if stop_at and all(stopped.get(i) is not None for i in idx) else 0.0
        out.append(Measured(configs[key], cols["model"][idx[0]], len(idx),
                            (min(t[0], t[1] / MEASURED_TIME_FACTOR), t[1], max(t[2], t[1] * MEASURED_TIME_FACTOR)),
                            (max(floor, min(a[0], a[1] - noise)), a[1], min(1.0, max(a[2], a[1] + noise))),
                            (min(m[0], m[1] / MEASURED_TIME_FACTOR), m[1], max(m[2], m[1] * MEASURED_TIME_FACTOR)),
                            tuple(str(cols["trial_id"][i]) for i in idx),
                            int(np.median([cols["train_samples"][i] or 0 for i in idx]))))
    return out


def same_samples_seen(m: Measured, train_samples: int, config: Config | None = None) -> Config | None:
    """``m``'s configuration (or ``config``, the same recipe on another device) at ``train_samples``
    (more than its runs had) for as many samples seen: ``ceil(epochs * measured size /
    train_samples)`` epochs, its schedule laid over them.

    That run takes the same steps on more distinct data, so the accuracy ``m`` measured is
    evidence for it too, and it takes about ``m``'s time where the same epoch count would take
    ``train_samples / measured size`` times as long. None where it would not be shorter, or where
    ``m`` ran under a time budget (its length was the clock's, not its epochs').
    """
    n0, e0 = int(m.train_samples or 0), int(m.config.epochs)
    if not n0 or train_samples <= n0 or m.config.time_budget_s:
        return None
    epochs = int(np.ceil(e0 * n0 / train_samples - 1e-9))
    return dataclasses.replace(config or m.config, epochs=epochs) if epochs < e0 else None


def accuracy_ceiling(table: knowledge.Table, workload: WorkloadInfo) -> float | None:
    """The best test accuracy measured on this dataset with at least the training samples asked
    for, on any device (accuracy does not depend on it), when at least :data:`CEILING_MIN_TRIALS`
    such trials completed; otherwise None.

    A prediction above everything ever measured on the dataset is an extrapolation of the trees,
    not evidence: on Fashion-MNIST the shipped model predicted 98.5% for a one-epoch run of a
    recipe whose measured neighbours reached 90%.
    """
    cols = table.columns
    values = [float(a) for d, st, syn, n, a in zip(cols["dataset_name"], cols["status"], cols["synthetic"],
                                                   cols["train_samples"], cols["test_accuracy"])
              if d == workload.dataset and st == "ok" and not syn and a is not None and n
              and n >= workload.train_samples]
    return max(values) if len(values) >= CEILING_MIN_TRIALS else None


def measured_elsewhere(table: knowledge.Table, workload: WorkloadInfo, target: Target, *, models: set[str],
                       frameworks: set[str], exclude: Collection[str] = ()) -> list[tuple[Config, Measured]]:
    """Configurations measured on this workload on a CPU, as the same runs on ``target``'s GPU, each
    with its measurement: their accuracy is evidence there (the same recipe learns the same on
    either device), their time and memory are not. The CPU's speed settings (``Knob.cpu_speed``)
    and the knobs the answer leaves out (``exclude``, e.g. compile) take their defaults. Empty for
    a CPU target."""
    if target.device_kind != "gpu":
        return []
    out = []
    for got in measured_configs(table, same_workload_rows(table, workload, None), models=models):
        if got.config.device != "cpu" or got.config.framework not in frameworks:
            continue
        try:
            cfg = Config.from_dict({**got.config.to_dict(), "device": "cuda", "threads": 1, "inter_op_threads": 1,
                                    **{k.name: k.default for k in KNOBS if k.cpu_speed or k.name in exclude}})
        except Exception:  # noqa: BLE001 - a recipe the GPU path refuses
            continue
        out.append((cfg, got))
    return out
