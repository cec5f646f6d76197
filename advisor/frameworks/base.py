"""The contract every framework backend implements, and the one training protocol they share.

A backend runs inside the trial child, after the parent has put the thread and parallel-library
environment in place. The child calls, in this order:

1. ``Trainer(config)``: store the config; import nothing heavy yet.
2. ``configure()``: import the framework, apply in-process thread settings (before the first
   op), and return what the framework reports back: the thread counts really in force, whether
   oneDNN is on, and so on. The harness records this as ``threads_applied``.
3. ``versions()``: library versions for provenance.
4. ``build(spec, input_shape, num_classes)``: create the model, loss and optimizer; return the
   framework's own count of trainable parameters (it must equal :func:`advisor.models.param_count`).
5. ``plan(steps_per_epoch)``: the protocol tells the backend how many optimizer steps the trial
   has, so that it applies the learning-rate schedule (:func:`learning_rate_at`) per step: the
   rate of global step ``t`` is ``self.lr_at(t)``. Under a time budget (``time_budget_s``) the
   protocol plans again after every epoch, with the epochs then projected to fit
   (:func:`budget_epochs`), so the schedule ends where the budget does.
6. For each epoch: ``train_epoch(x, y)`` on data already shuffled (and augmented,
   :func:`augment`) by the protocol, returning the mean training loss; the call returns only when
   the device work is finished. Then ``predict(x_test)`` for the test accuracy.
7. ``predict`` once more, timed, for inference throughput; ``gpu_peak_memory_mb()``; ``close()``.

:func:`run_protocol` drives that order, so timing, shuffling, evaluation and divergence are
identical for every framework. It is single-threaded and owns no process state.
"""

from __future__ import annotations

import abc
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from advisor.models import ModelSpec
from advisor.records import Config

__all__ = ["Trainer", "ProtocolResult", "TrialDiverged", "run_protocol", "batches", "DIVERGENCE_FACTOR",
           "learning_rate_at", "restart_cycles", "augment", "budget_epochs"]

# A mean epoch loss above this multiple of chance-level loss (ln C) counts as diverged.
DIVERGENCE_FACTOR = 10.0
EVAL_BATCH = 1024


# The step policy drops the rate tenfold at these fractions of the run; Caffe's inv policy uses
# its LeNet solver's constants.
STEP_DROPS = (0.5, 0.75)
INV_GAMMA, INV_POWER = 1e-4, 0.75


def budget_epochs(budget_s: float, epoch_times: list[float], cap: int) -> int:
    """The epochs a run under a time budget is projected to complete, after ``epoch_times``.

    The next epoch is taken to last as long as the slower of the last two (a first epoch that
    warms caches up is forgotten after the second; a machine that slows down is not), and runs
    only when it fits in what is left of ``budget_s``. At least the epochs already run, at most
    ``cap``.
    """
    done = len(epoch_times)
    if done == 0:
        return cap
    left = budget_s - sum(epoch_times)
    per = max(epoch_times[-2:])
    more = int(left // per) if per > 0 else cap
    return max(done, min(cap, done + max(more, 0)))


#: ``probes``: the cycles' shares of the steps after the warm-up, in order (two short annealed runs
#: that reach a modest target early, then one long enough to be the run's best shot).
PROBE_CYCLES = (1, 2, 12)


def restart_cycles(epochs: int) -> int:
    """How many cycles a ``restarts`` schedule of ``epochs`` epochs has: lengths 1, 2, 4, ... times
    the first, as many as keep the first at least an epoch (``floor(log2(epochs + 1))``)."""
    return max(1, int(math.floor(math.log2(max(int(epochs), 1) + 1))))


def learning_rate_at(config: Config, step: int, total_steps: int, *, epochs: int | None = None) -> float:
    """The learning rate of optimizer step ``step`` (0-based) out of ``total_steps``.

    The warm-up (``warmup_fraction`` of the steps) ramps the rate linearly from ``lr / W`` to
    ``lr``; then ``constant`` keeps it, ``step`` divides it by 10 at 50% and 75% of the run,
    ``cosine`` follows half a cosine towards 0, ``onecycle`` falls linearly towards 0,
    ``inv`` is Caffe's ``lr * (1 + 1e-4 * t) ** -0.75``, and ``restarts`` is cosine annealing with
    warm restarts (SGDR) whose cycles double: :func:`restart_cycles` of the run's ``epochs``
    (default the config's), in proportion 1, 2, 4 ..., filling the steps after the warm-up, so the
    last cycle ends with the run. A cosine run peaks near its end, so a target that a shorter run
    would reach comes late in one long cycle; the doubling cycles reach an annealed accuracy after
    1, 3, 7, 15 ... first-cycle lengths, at the price of a shorter last cycle
    (``benchmarks/results/restarts.md`` has what that buys and costs). ``probes`` anneals in
    three cycles of :data:`PROBE_CYCLES` (1/15, 2/15, then 4/5 of the steps): two short runs
    that reach a modest target early, and a last cycle long enough to be the best shot.
    """
    lr = config.learning_rate
    total = max(int(total_steps), 1)
    warm = int(round(config.warmup_fraction * total))
    if step < warm:
        return lr * (step + 1) / warm
    if config.schedule == "constant":
        return lr
    if config.schedule == "inv":
        return lr * (1.0 + INV_GAMMA * step) ** -INV_POWER
    progress = (step - warm) / max(total - warm, 1)
    if config.schedule == "step":
        return lr * 0.1 ** sum(progress >= p for p in STEP_DROPS)
    if config.schedule == "cosine":
        return lr * 0.5 * (1.0 + math.cos(math.pi * progress))
    if config.schedule == "restarts":
        n = restart_cycles(config.epochs if epochs is None else epochs)
        position = progress * (2 ** n - 1)  # in units of the first cycle's length
        k = min(int(math.floor(math.log2(position + 1.0))), n - 1)  # the cycle this step is in
        within = (position - (2 ** k - 1)) / 2 ** k
        return lr * 0.5 * (1.0 + math.cos(math.pi * min(within, 1.0)))
    if config.schedule == "probes":
        position, start = progress * sum(PROBE_CYCLES), 0
        for length in PROBE_CYCLES:  # the cycle this step is in, and how far through it
            if position < start + length or length == PROBE_CYCLES[-1]:
                break
            start += length
        within = (position - start) / length
        return lr * 0.5 * (1.0 + math.cos(math.pi * min(within, 1.0)))
    return lr * max(1.0 - progress, 0.0)  # onecycle: the last step runs at lr / (steps after warm-up)


def augment(x: np.ndarray, config: Config, rng: np.random.Generator) -> np.ndarray:
    """One epoch's augmented copy of NHWC training images (the test set is never augmented).

    ``augment_translate`` shifts each image by up to that many pixels in each direction (zero
    padding, then a random crop of the original size); ``augment_flip`` mirrors a random half
    left to right. Returns ``x`` itself when both are off.
    """
    pad = config.augment_translate
    if x.ndim != 4 or not (pad or config.augment_flip):
        return x
    n, h, w, _ = x.shape
    out = x
    if pad:
        padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        dy = rng.integers(0, 2 * pad + 1, n)
        dx = rng.integers(0, 2 * pad + 1, n)
        out = np.empty_like(x)
        code = dy * (2 * pad + 1) + dx
        for c in np.unique(code):  # one slice per offset: at most (2 * pad + 1) ** 2 copies
            idx = np.flatnonzero(code == c)
            oy, ox = divmod(int(c), 2 * pad + 1)
            out[idx] = padded[idx, oy:oy + h, ox:ox + w]
    if config.augment_flip:
        flip = rng.random(n) < 0.5
        if out is x:
            out = x.copy()
        out[flip] = out[flip, :, ::-1]
    return out


class TrialDiverged(Exception):
    """Raised by the protocol when the loss becomes non-finite or explodes."""


class Trainer(abc.ABC):
    """A framework backend; see the module docstring for the call order."""

    name: str = ""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.total_steps_ = 1
        self.schedule_epochs_ = max(1, config.epochs)

    def plan(self, steps_per_epoch: int, epochs: int | None = None) -> None:
        """Record the trial's length in optimizer steps (the schedule spans all of them); ``epochs``
        (default the config's) is the run's projected length under a time budget."""
        self.schedule_epochs_ = max(1, self.config.epochs if epochs is None else int(epochs))
        self.total_steps_ = max(1, int(steps_per_epoch) * self.schedule_epochs_)

    def lr_at(self, step: int) -> float:
        """The scheduled learning rate of global step ``step``."""
        return learning_rate_at(self.config, step, self.total_steps_, epochs=self.schedule_epochs_)

    def current_learning_rate(self) -> float | None:
        """The rate the framework's optimizer holds now (read back from it), if it exposes one."""
        return None

    @abc.abstractmethod
    def configure(self) -> dict[str, Any]:
        """Import the framework, apply thread settings, and report the settings in force."""

    @abc.abstractmethod
    def versions(self) -> dict[str, str]:
        """Versions of the framework and the libraries it runs on."""

    @abc.abstractmethod
    def build(self, spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
        """Create model, loss and optimizer; return the trainable parameter count."""

    @abc.abstractmethod
    def train_epoch(self, x: np.ndarray, y: np.ndarray) -> float:
        """Train one pass over ``x`` (NHWC float32) in mini-batches; return the mean loss."""

    @abc.abstractmethod
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predicted class labels (int) for ``x``."""

    def describe(self) -> dict[str, Any]:
        """Facts known only after ``build()``, such as the engine a backend chose for the spec."""
        return {}

    def gpu_peak_memory_mb(self) -> float | None:
        """Peak GPU memory of this trial in MiB, or ``None`` on the CPU."""
        return None

    def close(self) -> None:
        """Release framework resources."""


def batches(n: int, batch_size: int) -> range:
    """Start offsets of the mini-batches of one epoch (the last one may be short)."""
    return range(0, n, batch_size)


@dataclass
class ProtocolResult:
    params: int
    description: dict[str, Any]
    train_time_s: float
    eval_time_s: float
    inference_throughput: float
    gpu_peak_memory_mb: float | None


Emit = Callable[[dict[str, Any]], None]


def _accuracy(trainer: Trainer, x: np.ndarray, y: np.ndarray) -> float:
    pred = np.asarray(trainer.predict(x)).reshape(-1)
    return float(np.mean(pred.astype(np.int64) == y.astype(np.int64)))


def run_protocol(
    trainer: Trainer,
    spec: ModelSpec,
    *,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    num_classes: int,
    config: Config,
    emit: Emit,
) -> ProtocolResult:
    """Train and evaluate with the protocol every framework shares.

    Each epoch sees the training set in a fresh order drawn from ``config.seed``; shuffling happens
    outside the timed region. Test accuracy is measured after every epoch and its time is kept
    apart from the training time. Inference throughput is measured once at the end. With
    ``time_budget_s`` the run stops before an epoch that is not projected to fit in it (the first
    epoch always runs), and the schedule is planned again after each epoch. With
    ``stop_at_accuracy`` the run stops after the first epoch whose test accuracy reaches it.

    Raises:
        TrialDiverged: When the loss is not finite or exceeds ``DIVERGENCE_FACTOR * ln(classes)``.
    """
    input_shape = tuple(int(d) for d in x_train.shape[1:])
    params = trainer.build(spec, input_shape, num_classes)
    steps_per_epoch = math.ceil(len(x_train) / config.batch_size)
    trainer.plan(steps_per_epoch)
    budget = float(config.time_budget_s or 0.0)
    stop_at = float(config.stop_at_accuracy or 0.0)
    planned = config.epochs
    epoch_times: list[float] = []
    rng = np.random.default_rng(config.seed)
    # Augmentation draws from its own stream, so turning it on leaves the shuffling order as it was.
    aug_rng = np.random.default_rng([config.seed, 1])
    limit = DIVERGENCE_FACTOR * math.log(max(num_classes, 2))
    train_total = 0.0
    eval_total = 0.0
    for epoch in range(1, config.epochs + 1):
        if budget > 0 and epoch_times:
            projected = budget_epochs(budget, epoch_times, config.epochs)
            if projected < epoch:
                break  # the next epoch is not projected to fit in the budget
            if projected != planned:
                planned = projected
                trainer.plan(steps_per_epoch, planned)
        order = rng.permutation(len(x_train))
        xs, ys = x_train[order], y_train[order]
        t0 = time.perf_counter()
        xs = augment(xs, config, aug_rng)  # the data pipeline's work counts as training time
        loss = float(trainer.train_epoch(xs, ys))
        epoch_time = time.perf_counter() - t0
        train_total += epoch_time
        epoch_times.append(epoch_time)
        diverged = not math.isfinite(loss) or loss > limit
        if diverged:
            acc = float("nan")
            eval_time = 0.0
        else:
            t1 = time.perf_counter()
            acc = _accuracy(trainer, x_test, y_test)
            eval_time = time.perf_counter() - t1
        eval_total += eval_time
        emit({
            "event": "epoch",
            "epoch": epoch,
            "train_time_s": train_total,
            "epoch_time_s": epoch_time,
            "loss": loss if math.isfinite(loss) else None,
            "test_accuracy": acc if math.isfinite(acc) else None,
            "eval_time_s": eval_time,
        })
        if diverged:
            raise TrialDiverged(f"loss {loss!r} after epoch {epoch} (limit {limit:.3g})")
        if stop_at > 0 and acc >= stop_at:
            break  # the target is reached: the time to accuracy is the training time so far
    n = len(x_test)
    t2 = time.perf_counter()
    trainer.predict(x_test)
    infer = time.perf_counter() - t2
    return ProtocolResult(
        params=params,
        description=dict(trainer.describe()),
        train_time_s=train_total,
        eval_time_s=eval_total,
        inference_throughput=n / infer if infer > 0 else float("inf"),
        gpu_peak_memory_mb=trainer.gpu_peak_memory_mb(),
    )
