"""Multi-objective early stopping: prune a trial whose optimistic final point is dominated.

Optuna's pruners compare one intermediate value; a study with several objectives needs its own
rule. At every epoch boundary the running trial's *final* outcome is bounded optimistically:

* time: ``t_now + remaining * min_epoch_time * (1 - slack)``, the fastest it can still finish if
  no later epoch is faster than ``(1 - slack)`` times the fastest epoch so far;
* accuracy: ``min(1, best_so_far + remaining * max(gain, min_gain))`` where ``gain`` is the largest
  epoch-to-epoch improvement seen after the first epoch (a concave learning curve never improves
  faster later); after one epoch nothing is known, so the bound is 1;
* memory: the trial's peak memory so far (memory only grows), or 0 when the harness does not
  report it per epoch (then memory never lets a trial be pruned on dominance).

The trial is pruned when that optimistic point is dominated by a point of the current Pareto front
of completed, feasible trials (once at least ``min_completed`` exist), or when it already violates a
constraint (time and memory bounds are lower bounds; accuracy is an upper bound). The last epoch
is never pruned: the trial is about to finish anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from advisor.errors import invalid_parameter
from advisor.pareto import OBJECTIVES, Constraint, dominates

__all__ = ["EarlyStopping", "optimistic_point", "prune_decision"]


@dataclass(frozen=True)
class EarlyStopping:
    """Settings of the early-stopping rule (see the module docstring).

    Attributes:
        min_completed: Completed trials needed before dominance pruning starts.
        slack: Fraction by which later epochs may be faster than the fastest so far.
        min_gain: Per-epoch accuracy gain still assumed possible on a flat curve.
    """

    min_completed: int = 5
    slack: float = 0.1
    min_gain: float = 0.005

    def __post_init__(self) -> None:
        if isinstance(self.min_completed, bool) or not isinstance(self.min_completed, int) or self.min_completed < 1:
            raise invalid_parameter("min_completed", "EarlyStopping", "an integer >= 1", self.min_completed)
        if not 0.0 <= self.slack < 1.0:
            raise invalid_parameter("slack", "EarlyStopping", "a number in [0, 1)", self.slack)
        if not 0.0 <= self.min_gain <= 1.0:
            raise invalid_parameter("min_gain", "EarlyStopping", "a number in [0, 1]", self.min_gain)

    def to_dict(self) -> dict[str, float]:
        return {"min_completed": self.min_completed, "slack": self.slack, "min_gain": self.min_gain}


def optimistic_point(
    *, epochs_done: int, epochs_total: int, train_time_s: float, epoch_times: Sequence[float],
    accuracies: Sequence[float | None], peak_memory_mb: float | None, settings: EarlyStopping,
) -> dict[str, float]:
    """The best final outcome the trial can still reach, per objective name."""
    remaining = max(0, epochs_total - epochs_done)
    fastest = min((t for t in epoch_times if t > 0), default=0.0)
    time_bound = train_time_s + remaining * fastest * (1.0 - settings.slack)
    accs = [a if a is not None else 0.0 for a in accuracies]
    best = max(accs, default=0.0)
    if len(accs) < 2:
        acc_bound = 1.0
    else:
        gain = max(b - a for a, b in zip(accs[:-1], accs[1:]))
        acc_bound = min(1.0, best + remaining * max(gain, settings.min_gain))
    if remaining == 0:
        acc_bound = best
    return {"time": time_bound, "accuracy": acc_bound, "memory": float(peak_memory_mb or 0.0)}


def prune_decision(
    point: Mapping[str, float], *, objectives: Sequence[str], front: Sequence[Mapping[str, float]],
    n_completed: int, constraints: Sequence[Constraint] = (), settings: EarlyStopping,
) -> str | None:
    """Why the trial should stop, or ``None`` to let it continue.

    Args:
        point: The optimistic final point (from :func:`optimistic_point`).
        objectives: The study's objective names.
        front: Objective values of the current Pareto front of completed feasible trials.
        n_completed: Number of completed trials in the study.
        constraints: The study's constraints.
        settings: The rule's settings.
    """
    for c in constraints:
        if not c.satisfied(point[c.objective]):
            return f"cannot satisfy {c.text}: its optimistic {c.objective} is {point[c.objective]:.4g}"
    if n_completed < settings.min_completed:
        return None
    directions = [OBJECTIVES[n].direction for n in objectives]
    mine = [point[n] for n in objectives]
    for other in front:
        theirs = [other[n] for n in objectives]
        if dominates(theirs, mine, directions):
            shown = ", ".join(f"{n}={v:.4g}" for n, v in zip(objectives, theirs))
            return f"its optimistic outcome is dominated by a completed trial ({shown})"
    return None
