"""The rules that turn predicted bands into an answer: how sure a choice must be, when the obvious
default keeps its place, the learning-curve prior over run lengths, best shots on data the table
does not hold, and the one-line refusal. :func:`advisor.recommend.recommend` applies them."""

from __future__ import annotations

import math

from typing import Any

import numpy as np

from advisor._recommend._candidates import Candidate, family_key
from advisor._recommend._constraints import CONFIDENCE, Constraints
from advisor._recommend._ranking import front_layers, rank, spread

__all__ = ["TRUSTED_SOURCES", "OWN_RUN_FILLS", "OTHER_SIZE", "BEST_SHOT_TIE", "BEST_SHOT_MAX_EPOCHS", "BEST_SHOT_CHEAP_S", "past_cap", "UNSURE_FLOOR", "ACCURACY_LEVEL_REASONS", "HARDWARE_REASONS",
           "SWITCH_CONFIDENCE", "EXPLORATORY_CONFIDENCE", "unsure_eligible", "robust_beside_default", "robust_first", "beyond_measured", "monotone_over_epochs", "capped_by_measured", "p_better", "order",
           "ran_as_asked", "best_shots", "best_shot_order", "best_shot_note", "measure_note", "reachable", "impossible", "cap_at_ceiling", "CEILING_HEADROOM"]

#: Candidates whose predicted medians are trusted for ranking (the rest rank on their band's
#: conservative side).
TRUSTED_SOURCES = frozenset({"measured", "default", "portfolio"})
#: The share of a ``--max-time`` bound a run of the user's own must have used to answer it as
#: measured (evidence first); a shorter run (a rung of the closed loop) stands beside the predictions.
OWN_RUN_FILLS = 0.75
#: The source (and accuracy basis) of a configuration measured on the dataset at another training
#: size than the one asked: its accuracy is evidence, its time and memory are predicted.
OTHER_SIZE = "measured at another size"
#: Best shots whose predicted accuracy is within this of the highest count as equally good; the
#: faster of them goes first.
BEST_SHOT_TIE = 0.005
#: Best shots run at most this many epochs (the epoch grid goes further for time-bounded questions
#: on data whose epochs take a second): without a time bound, the longest tied run is taken.
BEST_SHOT_MAX_EPOCHS = 30
#: ... unless the whole run is predicted (its band's upper edge) to take at most this long: where a
#: longer schedule costs the user seconds, it is the better shot at a target that is in doubt.
BEST_SHOT_CHEAP_S = 60.0
#: Below :data:`~advisor._recommend._constraints.CONFIDENCE` for every candidate, the surest ones down to this probability are shown
#: with a warning; below it for every candidate, the request is refused as impossible.
UNSURE_FLOOR = 0.6
#: Extrapolation reasons that leave the workload's accuracy level unknown (another dataset, kind
#: of data or training size than any measured): there a reachable-looking target gets best shots.
ACCURACY_LEVEL_REASONS = ("no measured trials on data like", "itself: its accuracy level", "training samples is far outside")
#: Extrapolation reasons about hardware (see ``_recommend._evidence.extrapolation``): only these widen time and memory.
HARDWARE_REASONS = ("the knowledge base has no measured", "no measured trials on GPU model")
#: How likely an unmeasured pick must be to beat the obvious default before it replaces it.
SWITCH_CONFIDENCE = 0.8
#: Above the best accuracy measured on the dataset, a prediction's upper edge keeps at most this
#: share of the error that best run left (its median keeps none: the measured noise only).
CEILING_HEADROOM = 0.5
#: The probability of meeting the constraints that a candidate outside :data:`TRUSTED_SOURCES` needs.
EXPLORATORY_CONFIDENCE = 0.9


def monotone_over_epochs(cands: list[Candidate], a: list[np.ndarray]) -> None:
    """The learning-curve prior, in place: a recipe offered at several run lengths (the obvious
    default and the portfolio, over the epoch grid) is predicted at least as accurate when it trains
    longer (its schedule laid over the longer run). Trees fitted without the dataset often predict a
    flat or noisy accuracy over epochs; a running maximum keeps the longer runs from looking worse."""
    families: dict[str, list[int]] = {}
    for i, c in enumerate(cands):
        if c.source in ("default", "portfolio") and c.measured is None:
            families.setdefault(family_key(c), []).append(i)
    for idx in families.values():
        idx.sort(key=lambda i: cands[i].config.epochs)
        for band in a:
            band[idx] = np.maximum.accumulate(band[idx])


def capped_by_measured(cands: list[Candidate], a: list[np.ndarray]) -> None:
    """The mirror of :func:`monotone_over_epochs`, anchored on evidence, in place: a recipe measured
    on this workload is not predicted more accurate at a shorter run length than its measured run
    reached (its band's upper edge, the measurement's noise): a recipe a --budget loop measured short
    of a target is not offered again, a few epochs shorter, at the prediction's level."""
    measured: dict[str, list[tuple[int, float]]] = {}
    for i, c in enumerate(cands):
        if c.measured is not None:
            measured.setdefault(family_key(c), []).append((c.config.epochs, float(a[2][i])))
    if not measured:
        return
    for i, c in enumerate(cands):
        runs = measured.get(family_key(c)) if c.measured is None and c.accuracy_of is None else None
        caps = [hi for epochs, hi in runs or () if epochs >= c.config.epochs]
        if caps:
            for band in a:
                band[i] = min(band[i], min(caps))


def p_better(band: list[np.ndarray], i: int, b: int, *, log: bool, lower: bool,
             pair_width: float | None = None) -> float:
    """P(candidate ``i`` beats ``b``) on one figure: lower is better for time, higher for accuracy.

    By default each figure is normal (log-normal for time) with its band's spread, and the two are
    taken as independent. With ``pair_width`` (the calibrated half-width of the 10-90% band of a
    difference of two predictions on one new dataset, in the model's units: log time, accuracy;
    ``meta["pair_offsets_new_dataset"]``), the difference itself is taken as normal with that
    spread: two predictions for one dataset share its level error, which cancels in their
    difference, so independent bands overstate how unsure the comparison is."""
    from statistics import NormalDist

    z90 = NormalDist().inv_cdf(0.9)
    f = np.log if log else (lambda v: v)
    lo, mid, hi = (f(np.maximum(band[k][[i, b]], 1e-12)) if log else band[k][[i, b]] for k in range(3))
    diff = (mid[1] - mid[0]) if lower else (mid[0] - mid[1])
    if pair_width is not None and pair_width > 0:
        return float(NormalDist().cdf(diff / (pair_width / z90)))
    sd = np.maximum((hi - lo) / (2 * z90), 1e-9)
    return float(NormalDist().cdf(diff / float(np.sqrt(np.sum(sd ** 2)))))


def order(idx: np.ndarray, t: np.ndarray, a: np.ndarray, m: np.ndarray, c: Constraints, prefer: str,
           top: int, *, memory_room_mb: float | None = None) -> tuple[list[int], str]:
    """The eligible candidates ``idx`` in recommended order, and how they were ordered
    (``memory_room_mb``: the device's memory, see :func:`spread`)."""
    if c.min_accuracy is not None and c.max_time_s is None and prefer in ("fast", "balanced"):
        order = idx[np.lexsort((-a[idx], t[idx]))]
        return [int(i) for i in order], "fastest among those likely to reach the accuracy asked for"
    if c.max_time_s is not None and c.min_accuracy is None and prefer in ("accurate", "balanced"):
        # Equal accuracy (a recipe whose longer runs the learning-curve prior holds level): the run
        # that uses more of the time asked for.
        order = idx[np.lexsort((-t[idx], -a[idx]))]
        return [int(i) for i in order], "most accurate among those likely to finish within the time asked for"
    costs = np.column_stack([np.log(t[idx]), -a[idx], np.log(m[idx])])
    pool = np.array(front_layers(costs, top))
    ordered = pool[rank(costs[pool], prefer)]
    if prefer == "balanced":
        ordered = spread(ordered, t[idx], a[idx], m[idx], top, memory_room_mb=memory_room_mb)
    return [int(idx[j]) for j in ordered], f"the Pareto front ordered by preference '{prefer}'"


def unsure_eligible(p: np.ndarray, trusted: np.ndarray) -> np.ndarray:
    """Where no candidate meets the constraints with the usual confidence, those shown anyway: down
    to :data:`UNSURE_FLOOR`, and a random draw, as at full confidence, with the margin of
    :data:`EXPLORATORY_CONFIDENCE` over a trusted candidate (the likeliest of thousands of draws is
    the likeliest to be over-predicted)."""
    return np.asarray(p >= np.where(trusted, UNSURE_FLOOR, UNSURE_FLOOR + EXPLORATORY_CONFIDENCE - CONFIDENCE))


def robust_beside_default(eligible: np.ndarray, cands: list[Candidate], p_not_worse: list[float | None]) -> np.ndarray:
    """Where nothing is likely enough to meet the constraints on a workload without measurements, the
    candidates shown (``eligible``) plus every portfolio recipe at least :data:`SWITCH_CONFIDENCE`
    likely (``p_not_worse``, from its measured record) to beat or tie the obvious default, as long
    as the default itself is shown. On data the model has not seen the trusted recipes' bands share
    one capped median and differ in the width of their lower side, so which of them clears the
    floor is noise; the record is measured."""
    if not any(eligible[i] and c.source == "default" for i, c in enumerate(cands)):
        return eligible
    robust = np.array([c.source == "portfolio" and (q or 0.0) >= SWITCH_CONFIDENCE for c, q in zip(cands, p_not_worse)])
    return eligible | robust


def past_cap(cands: list[Candidate], t_hi: np.ndarray) -> np.ndarray:
    """The runs best shots leave to last: longer than :data:`BEST_SHOT_MAX_EPOCHS` and possibly
    slower than :data:`BEST_SHOT_CHEAP_S` (``t_hi``: the upper edge of each whole run's time)."""
    return np.array([c.config.epochs > BEST_SHOT_MAX_EPOCHS for c in cands], dtype=bool) & (
        np.asarray(t_hi, dtype=float) > BEST_SHOT_CHEAP_S)


def beyond_measured(cand: Candidate, train_samples: int, table: Any, model: str) -> tuple[int, int] | None:
    """``(samples the run would see, the most any measured run of its recipe saw)`` where the run
    would see more, else None.

    Past that point, on data the table does not hold, the run's predicted accuracy is the
    learning-curve prior's extrapolation (:func:`monotone_over_epochs`: longer is no worse), which a
    recipe that overfits as it anneals breaks, so it is no evidence that the run beats the
    reference. A run under a time budget counts the epochs it is predicted to complete.
    """
    from advisor._recommend._portfolio import _recipe, longest_measured_run

    seen = int(cand.run_epochs or cand.config.epochs) * int(train_samples)
    horizon = longest_measured_run(table, _recipe(cand.config.to_dict(), cand.model or model))
    return (seen, horizon) if seen > horizon else None


def robust_first(idx: list[int], cands: list[Candidate], beats: dict[int, float | None], *,
                 longest: bool, past: np.ndarray | None = None) -> list[int]:
    """Robust candidates in the order they replace the default: the surest record first, then the
    one that won most, then (``longest``: where reaching an accuracy target at all is in doubt) the
    longest run of the recipe short of ``past`` (:func:`past_cap`; without it, longer than
    :data:`BEST_SHOT_MAX_EPOCHS`), as for best shots; otherwise the ranking's order among equals."""
    def key(i: int) -> tuple[float, int, bool, int]:
        wins = int((cands[i].transfer or {}).get("wins") or 0)
        epochs = cands[i].config.epochs
        over = bool(past[i]) if past is not None else epochs > BEST_SHOT_MAX_EPOCHS
        return -(beats.get(i) or 0.0), -wins, longest and over, -epochs if longest else 0

    return sorted(idx, key=key)


def ran_as_asked(cands: list[Candidate]) -> np.ndarray:
    """The candidates whose accuracy was measured on this workload as asked: runs of it (the table's
    or the user's own) and the same runs on another device (a recipe learns the same on either). A
    run at another training size is not: more data rarely lowers accuracy, so its falling short of
    a target says nothing about the size asked."""
    return np.array([c.measured is not None or (c.accuracy_of is not None and c.source != OTHER_SIZE)
                     for c in cands], dtype=bool)


def best_shots(c: Constraints, level_unknown: bool, t: list[np.ndarray], a: list[np.ndarray],
                m: list[np.ndarray], *, ceiling: float, always: np.ndarray | None = None,
                reachable: float | None = None, measured: np.ndarray | None = None) -> np.ndarray | None:
    """Candidates that may still meet an accuracy bound on data the table does not hold.

    There (``level_unknown``: a dataset, or kind of data, without measured trials), the accuracy
    *level* is an extrapolation (the band is widened) while the ranking of configurations
    transfers better; refusing a reachable target because the predicted medians sit low would
    leave the user with nothing. The candidates whose band's upper edge reaches the bound (and
    whose medians meet any time or memory bound) are returned, and the ``always`` ones (the
    trusted recipes: the obvious default and the portfolio) whatever their upper edge: a random
    draw's wide band reaches a target by its width, not by its merit, and a best shot among random
    draws alone trained CIFAR-10 to 39% for a 74% target, where the default's long run gets ~70%.
    When no band reaches the bound, the trusted recipes are still best shots as long as it lies
    within ``reachable``: the most the model lets any configuration reach on this data (the
    landmark plus the largest share of its error that training trials removed). A model that has
    never seen the dataset misjudges its level by far more than its band's width (the model card's
    leave-one-dataset-out error), so its low medians are no proof that a target is out of reach;
    a target above ``reachable`` is. A ``measured`` candidate (:func:`ran_as_asked`: its accuracy
    band is its runs' spread) is not among the ``always`` ones: it ran, and a band short of the bound says it did not
    get there (a closed loop's run cut to a few epochs, say), so it is a shot only where its band
    reaches the bound, as any other.
    ``None`` when the level is known (a hardware extrapolation keeps the dataset's measured level),
    the bound is not on accuracy, it asks for every test sample right (above ``ceiling``), or no
    band reaches it and it lies above ``reachable`` (or there is no trusted recipe): then the
    refusal stands.
    """
    if c.min_accuracy is None or not level_unknown or c.min_accuracy > ceiling:
        return None
    reach = a[2] >= c.min_accuracy
    if always is not None and measured is not None:
        always = always & ~np.asarray(measured, dtype=bool)
    trusted = always is not None and bool(always.any())
    if not reach.any() and not (trusted and reachable is not None and c.min_accuracy <= reachable):
        return None
    mask = reach | (always if always is not None else False)
    if c.max_time_s is not None:
        mask &= t[1] <= c.max_time_s
    if c.max_memory_mb is not None:
        mask &= m[1] <= c.max_memory_mb
    return mask if mask.any() else None


def best_shot_order(idx: np.ndarray, accuracy: np.ndarray, run: np.ndarray, record: np.ndarray) -> list[int]:
    """Best shots (``idx``) in the order the answer shows them; ``accuracy`` (the ranked side of each
    band), ``run`` (each whole run's predicted time) and ``record`` (the probability, from a portfolio
    recipe's measured record, that it beats or ties the obvious default; 0 without one) align with it.

    The highest predicted accuracy first. Within :data:`BEST_SHOT_TIE` of each other, recipes are
    told apart by evidence, not by a predicted difference smaller than the tie: the surer measured
    record first, then the longer run (on data the model does not know its predicted curves are
    often flat, and the shortest of a flat family is the worst shot at a target, not an equal one).
    """
    level = np.floor((np.max(accuracy) - np.asarray(accuracy)) / BEST_SHOT_TIE)
    return [int(i) for i in np.asarray(idx)[np.lexsort((-np.asarray(run), -np.asarray(record), level))]]


def best_shot_note(c: Constraints, shots: np.ndarray, a_hi: np.ndarray, reachable: float | None) -> str:
    """What the answer says when its choices are best shots (:func:`best_shots`)."""
    inside = bool((a_hi[shots] >= (c.min_accuracy or 0.0)).any())
    return (f"The table does not hold this workload, so its accuracy level is extrapolated: no configuration "
            f"is {UNSURE_FLOOR:.0%} likely to reach {c.min_accuracy:g} by the prediction, but "
            + (f"{int(shots.sum())} may (the target lies within their bands). " if inside else
               f"the prediction's level on data it has not seen is no proof either way (the target lies above "
               f"every band, below the {reachable or 0.0:.4f} the model lets any configuration reach here). ")
            + "The choices are the best shots, the highest predicted accuracy first; measure them on your data "
              "(--budget or --verify; what they measure is evidence for the next answer) before relying on one.")


def measure_note(schedule_s: float) -> str:
    """What to do where a single answer to an accuracy target on data the table does not hold can
    only guess (best shots, or nothing likely enough): spend what running the first choice once is
    predicted to cost on the closed loop instead, which measures the obvious default and the top
    recipes on the user's data and answers with the soonest to the target."""
    seconds = max(10.0, float(schedule_s))
    budget = f"{math.ceil(seconds / 10) * 10:.0f}s" if seconds < 120 else f"{math.ceil(seconds / 60):.0f}m"
    return (f"Whether a recipe or the plain default gets there sooner depends on how early this data lets a "
            f"curve reach the target, which the table cannot tell: add --budget {budget} to this command (what "
            f"the first choice's run is predicted to take) to measure the obvious default and the top recipes on "
            f"your data and answer with the soonest to the target.")


def reachable(landmark: float | None, surrogate: Any) -> float | None:
    """The most accuracy the model lets any configuration reach on data of this ``landmark``
    (the training rows' median landmark when it is unknown): the landmark plus the share of its
    error that the training trials removed at most (``Surrogate.headroom_cap``). ``None`` for a
    model that does not predict accuracy relative to the landmark."""
    cap = surrogate.headroom_cap
    mark = landmark if landmark is not None else surrogate.landmark_fallback
    if cap is None or mark is None:
        return None
    return float(mark + cap * (1.0 - mark))


def impossible(c: Constraints, t: list[np.ndarray], a: list[np.ndarray], p: np.ndarray) -> str:
    parts = []
    if c.min_accuracy is not None:
        # The accuracy each candidate reaches with probability UNSURE_FLOOR, from its band.
        from statistics import NormalDist

        z = NormalDist().inv_cdf(UNSURE_FLOOR)
        likely = a[1] - z * np.maximum(a[1] - a[0], 0.0) / NormalDist().inv_cdf(0.9)
        parts.append(f"the highest accuracy predicted with {UNSURE_FLOOR:.0%} probability is {likely.max():.4f}")
    if c.max_time_s is not None:
        parts.append(f"the fastest predicted training time is {t[1].min():.3g} s")
    return (f"No configuration is at least {UNSURE_FLOOR:.0%} likely to meet the constraints ({'; '.join(parts)}; "
            f"best probability {p.max():.0%}); relax them.")


def cap_at_ceiling(a: list[np.ndarray], predicted: np.ndarray, ceiling: float, noise: float) -> None:
    """Bound the ``predicted`` rows' accuracy bands (in place) by what was measured on the dataset:
    the median by ``ceiling + noise``, the upper edge by ``ceiling`` plus :data:`CEILING_HEADROOM`
    of its error; the lower edge stays at or below the median."""
    mid = np.where(predicted, np.minimum(a[1], ceiling + noise), a[1])
    hi = np.where(predicted, np.minimum(a[2], ceiling + CEILING_HEADROOM * (1.0 - ceiling)), a[2])
    a[0], a[1], a[2] = np.minimum(a[0], mid), mid, np.maximum(hi, mid)
