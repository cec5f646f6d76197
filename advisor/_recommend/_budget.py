"""The closed loop: spend a stated budget measuring on the user's own data and hardware.

Successive halving over the recommendation's top recipes (its first choices, one run length of
each: :func:`loop_choices`) plus the obvious default:

1. rung 0 runs every candidate with its epochs cut so that the rung uses about half the budget
   (each candidate the same share; a cut run is shorter, its schedule laid over the shorter run).
   A short budget takes fewer candidates (each run must buy at least as much training as its
   start-up costs; the obvious default always stays: first on an accuracy target, whose soonest
   run wins, last on a time bound, the cost of its one-epoch run kept aside while the others run),
   and a run whose full length costs little more than its start-up is not cut;
2. the better half by measured accuracy (time breaks ties) goes on; each next rung runs the
   survivors longer, until one is left, every survivor has run its full length, or the budget is
   spent. A survivor already run in full is not run again: its run stands against the others'
   longer ones (a one-epoch configuration run in full would otherwise end the loop by beating
   longer ones cut to its length). So does a survivor whose next run would be no longer than its
   last, and one that stopped at the accuracy asked for (``--target-accuracy``): a longer schedule
   reaches it no sooner. On a target, a run that has not reached it, in less time than the
   soonest run that did, goes on too (for at most that time): a longer run of it may get there
   first;
3. the winner is the best of the last rung's runs and every run of a configuration in full,
   meeting the constraints when any run does.

On a time bound T with a budget of :data:`DEFAULT_IN_FULL` T or more, the obvious default runs once,
as the user would run it (filling T), and competes to the end. Cut to a few epochs it is the weakest
of references: Adam at a constant rate gains with every epoch, while a recipe with a one-cycle or
cosine schedule peaks at whatever length it is given, so the cut comparison favours the recipe
(the case that showed it: ``benchmarks/results/own-trials.md``, noisy Fashion-MNIST at 60 s).
On an accuracy target the same bias holds until some run reaches the target: until then a default
whose epochs cost less than the leading run's is not dropped by the halving (a longer run of it is
the cheaper bet) and runs first in each rung, its run as long as what is left of the budget pays
for once the other survivors' runs are (in full where that fits; it stops at the target). Each
rung restarts training, so a default cut again and again spends the budget on epochs run twice.
Ranked by accuracy after one epoch it lost to recipes whose epochs cost several times as much, and
the loop ended with budget unspent, while the default run at its length reaches the target (the
case: held-out Fashion-MNIST in ``benchmarks/results/own-trials.md``).

A trial starts only when its predicted time (the upper edge of its band, scaled to its epochs; once
the candidate has run, its measured time per epoch) fits what is left of the budget. Every finished trial is merged into the user's knowledge base at once,
and the loop's progress is kept in a state file next to it, keyed by the question: run the same
command again after an interruption and finished trials are not run again. The runs an interrupted
loop recorded are in the user's knowledge base by then, where the next answer would count them as
measured candidates and so rank other choices: the request the loop answers (:func:`request_key`)
is kept in its state, and asked again it is answered without them (:func:`interrupted_trials`), so
the loop resumes on the choices it started with.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from advisor._recommend._result import Choice, Recommendation
from advisor._recommend._verify import evaluation_s, wall_limit_s
from advisor.errors import ConstraintError
from advisor.records import Config, TrialResult

__all__ = ["LoopRun", "LoopResult", "check_budget", "closed_loop", "interrupted_trials", "loop_choices", "meets", "rank_runs",
           "request_key", "MIN_CANDIDATES", "LOOP_POOL"]

#: Choices taken into the loop besides the obvious default.
MIN_CANDIDATES = 4
#: Choices to ask the recommendation for when the loop runs: enough to find
#: :data:`MIN_CANDIDATES` distinct recipes among run lengths of the same one (:func:`loop_choices`).
LOOP_POOL = 4 * MIN_CANDIDATES
#: Seconds a trial costs beyond its training time (child start, data loading, evaluation) until
#: the loop has measured one: then each candidate's own start-up once it has run, and for one not
#: yet run the largest seen.
START_OVERHEAD_S = 8.0
#: On a time bound T, a budget of at least this many T runs the obvious default as the user would
#: run it, filling T, rather than cut: see :func:`closed_loop`.
DEFAULT_IN_FULL = 2.5


@dataclass
class LoopRun:
    """One measured run of the loop."""

    label: str
    rung: int
    epochs: int
    config: dict[str, Any]
    model: str
    status: str
    train_time_s: float | None
    test_accuracy: float | None
    wall_time_s: float
    trial_id: str | None
    predicted_time_s: float
    predicted_accuracy: float


@dataclass
class LoopResult:
    """What the loop measured and which run won."""

    budget_s: float
    spent_s: float
    runs: list[LoopRun] = field(default_factory=list)
    winner: LoopRun | None = None
    knowledge_path: str = ""
    state_path: str = ""
    resumed: int = 0

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _state_path(knowledge_path: Path, key: str) -> Path:
    return knowledge_path.parent / "loops" / f"{key}.json"


def request_key(request: dict[str, Any]) -> str:
    """A short digest of a request as the user asked it (dataset, bounds, budget, options): the
    loop's state remembers which request it answers, before its own runs change the answer."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()[:16]


def interrupted_trials(request: str, knowledge_path: str | Path | None = None) -> frozenset[str]:
    """Trial ids recorded by loops of ``request`` that did not finish (none when there is none).

    Leave them out of the answer to ask the question as the interrupted loop asked it; that loop's
    state then matches and its finished runs are taken, not run again.
    """
    from advisor import knowledge

    path = Path(knowledge_path) if knowledge_path is not None else knowledge.user_knowledge_path()
    ids: set[str] = set()
    for state in sorted((path.parent / "loops").glob("*.json")):
        try:
            data = json.loads(state.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("request") == request and data.get("finished") is False:
            ids.update(str(r["trial_id"]) for r in (data.get("runs") or {}).values()
                       if isinstance(r, dict) and r.get("trial_id"))
    return frozenset(ids)


def _key(rec: Recommendation, budget_s: float, labels: list[tuple[str, dict[str, Any], str]]) -> str:
    text = json.dumps({"workload": rec.workload.dataset, "n": rec.workload.train_samples, "budget": budget_s,
                       "candidates": labels}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _label(choice: Choice) -> str:
    return "default" if choice.rank == 0 else f"#{choice.rank}"


def meets(run: LoopRun, rec: Recommendation) -> bool:
    """Whether a loop's run meets the recommendation's constraints (time bound and accuracy target)."""
    c = rec.constraints
    if run.status != "ok" or run.test_accuracy is None or run.train_time_s is None:
        return False
    return ((c.max_time_s is None or run.train_time_s <= c.max_time_s)
            and (c.min_accuracy is None or run.test_accuracy >= c.min_accuracy))


def rank_runs(runs: list[tuple[Choice, LoopRun]], rec: Recommendation) -> list[tuple[Choice, LoopRun]]:
    """One rung's runs, best first: those meeting the constraints, then the rest; each group the most
    accurate first (then the fastest). Runs that stop at a target accuracy (``--target-accuracy``)
    all end just past it, so among those reaching it the soonest there is best."""
    ranked = sorted(runs, key=lambda cr: (-(cr[1].test_accuracy or -1.0), cr[1].train_time_s or math.inf))
    meeting = [cr for cr in ranked if meets(cr[1], rec)]
    if any(run.config.get("stop_at_accuracy") for _, run in runs):
        meeting.sort(key=lambda cr: cr[1].train_time_s or math.inf)
    return meeting + [cr for cr in ranked if not meets(cr[1], rec)]


def _recipe(choice: Choice) -> str:
    """A choice without its run length: the loop sets how long each candidate runs."""
    return json.dumps({k: v for k, v in choice.config.items() if k not in ("epochs", "time_budget_s")},
                      sort_keys=True, default=str) + choice.model


def loop_choices(rec: Recommendation) -> list[Choice]:
    """The choices the loop measures besides the obvious default: the first :data:`MIN_CANDIDATES`
    distinct recipes in the recommendation's order, other than the default's (always measured). The
    same recipe at another run length (or filling the time bound) is the same candidate at another
    fidelity: successive halving gives it its length, so a second copy would only spend the budget
    twice on one recipe."""
    seen: set[str] = {_recipe(rec.baseline)} if rec.baseline is not None else set()
    out: list[Choice] = []
    for c in rec.choices:
        recipe = _recipe(c)
        if recipe not in seen:
            seen.add(recipe)
            out.append(c)
        if len(out) == MIN_CANDIDATES:
            break
    return out


def _candidates(rec: Recommendation) -> tuple[list[Choice], dict[str, float], dict[str, float]]:
    """The loop's candidates, each one's predicted training time per epoch (from the whole schedule's
    time, not a time to a target) and its predicted evaluation of the test set per epoch."""
    cands = loop_choices(rec) + ([rec.baseline] if rec.baseline is not None else [])  # the default's recipe is not among them
    per_epoch: dict[str, float] = {}
    evals: dict[str, float] = {}
    for c in cands:
        band = c.schedule_time_s or c.time_s
        per_epoch[_label(c)] = max(band.hi, band.mid) / max(1, int(c.config["epochs"]))
        evals[_label(c)] = evaluation_s(per_epoch[_label(c)], rec)
    return cands, per_epoch, evals


def _affordable(cands: list[Choice], budget_s: float, rec: Recommendation) -> list[Choice]:
    """The candidates rung 0 can pay for, in the order it runs them: each run must buy at least as
    much training as its start-up costs (about half the budget goes to rung 0), so a short budget
    measures fewer candidates, best ranked first, and always the obvious default. On an accuracy
    target the default runs first: the soonest run there wins, and the default's cheap epochs are
    the time to beat (a run behind the target goes on while it can still beat the soonest). On a
    time bound it runs last, the cost of its one-epoch run kept aside (:func:`closed_loop`), so that
    the alternatives are measured while the budget is whole."""
    n_max = max(2, int(0.5 * budget_s // (2 * START_OVERHEAD_S)))
    default = [c for c in cands if rec.baseline is not None and c is rec.baseline]
    others = [c for c in cands if not default or c is not default[0]][: n_max - len(default)]
    return default + others if any(c.config.get("stop_at_accuracy") for c in cands) else others + default


def check_budget(rec: Recommendation, budget_s: float) -> None:
    """Raise the one-line ConstraintError when ``budget_s`` cannot pay for one trial of the quickest candidate."""
    _, per_epoch, evals = _candidates(rec)
    quickest = min(v + evals[k] for k, v in per_epoch.items()) + START_OVERHEAD_S
    if quickest > budget_s:
        raise ConstraintError(f"A budget of {budget_s:g} s is too small for one trial: the quickest candidate needs "
                              f"about {quickest:.0f} s for one epoch (with start-up); give --budget "
                              f"{math.ceil(quickest * 1.5)}s or more.")


def _epoch_line(on_progress: Callable[[str], None], result: LoopResult, budget_s: float,
                t0: float, epochs: int) -> Callable[[Any], bool]:
    """The running trial's progress, at most once a second and at its last epoch: its epoch,
    test accuracy and elapsed time, the best measured so far and the budget left."""
    shown = [0.0]

    def hook(record: Any) -> bool:
        now = time.monotonic()
        if now - shown[0] >= 1.0 or record.epoch >= epochs:
            shown[0] = now
            measured = [r for r in result.runs if r.test_accuracy is not None and r.status == "ok"]
            best = max(measured, key=lambda r: r.test_accuracy or 0.0) if measured else None
            left = budget_s - result.spent_s - (now - t0)
            acc = "-" if record.test_accuracy is None else f"{record.test_accuracy:.4f}"
            on_progress(f"    epoch {record.epoch}/{epochs} · accuracy {acc} · {now - t0:.0f} s"
                        + (f" · best so far {best.test_accuracy:.4f} ({best.label})" if best else "")
                        + f" · {max(0.0, left):.0f} s of budget left")
        return True

    return hook


def closed_loop(rec: Recommendation, budget_s: float, *, data_dir: str | None = None,
                knowledge_path: str | Path | None = None, workdir: str | Path | None = None,
                on_progress: Callable[[str], None] | None = None,
                run: Callable[..., TrialResult] | None = None, request: str | None = None) -> LoopResult:
    """Successive halving within ``budget_s`` seconds of measuring (see the module docstring).

    ``request`` (:func:`request_key`) is kept in the loop's state, with whether the loop finished,
    for :func:`interrupted_trials`.

    Raises:
        ConstraintError: When the budget cannot pay for one trial of the quickest candidate.
    """
    from advisor import hardware, harness, knowledge
    from advisor.records import Workload

    path = Path(knowledge_path) if knowledge_path is not None else knowledge.user_knowledge_path()
    cands, per_epoch, evals = _candidates(rec)

    def cost(c: Choice) -> float:  # an epoch's training and evaluation
        return per_epoch[_label(c)] + evals[_label(c)]

    bound = rec.constraints.max_time_s
    stops_at_target = any(c.config.get("stop_at_accuracy") for c in cands)
    default_in_full = bound is not None and not stops_at_target and budget_s >= DEFAULT_IN_FULL * bound

    def train_s(c: Choice, epochs: int) -> float:  # a run's training time: one under a time budget stops there
        budget = float(c.config.get("time_budget_s") or 0.0)
        return min(per_epoch[_label(c)] * epochs, budget) if budget else per_epoch[_label(c)] * epochs

    def run_cost(c: Choice, epochs: int) -> float:  # its training and evaluation
        return train_s(c, epochs) + evals[_label(c)] * epochs
    check_budget(rec, budget_s)
    labels = [(_label(c), c.config, c.model) for c in cands]
    key = _key(rec, budget_s, labels)
    state_file = _state_path(path, key)
    done: dict[str, dict[str, Any]] = {}
    if state_file.exists():
        try:
            done = json.loads(state_file.read_text(encoding="utf-8")).get("runs", {})
        except (OSError, ValueError):
            done = {}
    result = LoopResult(budget_s=budget_s, spent_s=0.0, knowledge_path=str(path), state_path=str(state_file))
    runner = run or harness.run_trial
    seen_overheads: dict[str, float] = {}  # each candidate's start-up, as measured (the largest of its runs)

    def start_up(c: Choice) -> float:
        """A run's cost beyond training and evaluation: the candidate's own, once it has run (a
        compiled model starts several times slower than a small one); before, the largest seen."""
        return seen_overheads.get(_label(c), max(seen_overheads.values(), default=START_OVERHEAD_S))

    alive = _affordable(cands, budget_s, rec)
    complete: dict[str, LoopRun] = {}  # candidates measured at their full length: not run again
    chase: dict[str, float] = {}  # on a target: candidates behind it, and the time they must beat

    def nothing_reached() -> bool:  # on a target: no run has reached it yet
        return stops_at_target and not any(meets(r, rec) for r in result.runs)

    rung = 0
    rung_share = 0.5  # rung 0 spends about half the budget
    while alive:
        left = budget_s - result.spent_s
        share = left * rung_share / max(1, sum(_label(c) not in complete for c in alive))
        # on a target nothing has reached yet, the default's next run is as long as the budget pays for
        default_to_target = rung > 0 and nothing_reached()
        runs: list[tuple[Choice, LoopRun]] = []

        def planned(c: Choice) -> int:  # a run's epochs at this rung, before what it has run decides
            full = int(c.config["epochs"])
            epochs = max(1, min(full, int((share - start_up(c)) // cost(c))))
            if start_up(c) + full * cost(c) <= min(2 * share, left):
                epochs = full  # the whole run costs little more than its start-up, and fits: no reason to cut it
            if _label(c) in chase:  # no longer than a run that could still get there first
                epochs = max(1, min(epochs, int(chase[_label(c)] // per_epoch[_label(c)])))
            if default_in_full and c is rec.baseline:
                epochs = full  # as the user would run it: filling the bound
            return epochs

        def longest_default_run(c: Choice) -> int:
            """The most epochs the default's next run can have once the other survivors' runs at this
            rung are paid for: each rung's run starts from scratch, so on a target nothing has reached
            yet a run cut again and again spends its budget on epochs run twice."""
            rest = 0.0
            for d in alive:
                if d is c or _label(d) in complete:
                    continue
                ran = max((r.epochs for r in result.runs if r.label == _label(d)), default=0)
                epochs = planned(d)
                if epochs > ran:
                    rest += run_cost(d, epochs) + start_up(d)
            return min(int(c.config["epochs"]), int((left - rest - start_up(c)) // cost(c)))

        for c in alive:
            if _label(c) in complete:  # its full run stands against the others' longer runs
                runs.append((c, complete[_label(c)]))
                continue
            full = int(c.config["epochs"])
            epochs = planned(c)
            if default_to_target and c is rec.baseline:  # as the user would run it, to the target, where it fits
                epochs = max(epochs, longest_default_run(c))
            last = next((r for r in reversed(result.runs) if r.label == _label(c)), None)
            if last is not None and epochs <= last.epochs:  # no longer than it has run: that run stands
                complete[_label(c)] = last
                runs.append((c, last))
                continue
            run_key = f"{_label(c)}|{rung}|{epochs}"
            predicted = train_s(c, epochs)
            if run_key in done:
                r = LoopRun(**done[run_key])
                result.resumed += 1
            else:
                # the default's shortest run (one epoch), when it comes later, keeps its cost aside
                at = next(i for i, d in enumerate(alive) if d is c)
                later = [d for d in alive[at + 1:] if d is rec.baseline and rung == 0
                         and not any(r.label == _label(d) for r in result.runs)]
                reserve = sum(run_cost(d, planned(d) if default_in_full else 1) + start_up(d) for d in later)
                if run_cost(c, epochs) + start_up(c) + reserve > budget_s - result.spent_s:
                    continue
                cfg = Config.from_dict({**c.config, "epochs": epochs})
                workload = Workload(dataset=rec.workload.dataset, model=c.model, data_dir=data_dir,
                                    train_samples=rec.workload.train_samples if rec.workload.train_samples_given else None)
                if on_progress is not None:
                    on_progress(f"rung {rung}: {_label(c)} ({c.framework} {c.model}) for {epochs} of {full} epochs, "
                                f"predicted {predicted:.0f} s; {budget_s - result.spent_s:.0f} s of budget left")
                t0 = time.monotonic()
                trial = runner(workload, cfg, limits=harness.Limits(wall_time_s=max(60.0, wall_limit_s(predicted, rec))),
                               workdir=workdir,
                               on_epoch=None if on_progress is None else _epoch_line(on_progress, result, budget_s, t0, epochs))
                wall = time.monotonic() - t0
                r = LoopRun(_label(c), rung, epochs, cfg.to_dict(), c.model, trial.status, trial.train_time_s,
                            trial.test_accuracy, wall, trial.trial_id, predicted,
                            c.accuracy.mid if epochs == full else float("nan"))
                knowledge.append_to_user_knowledge([trial], hardware=hardware.load_cached(), path=path)
                done[run_key] = r.__dict__
                _save_state(state_file, done, request=request, finished=False)
                if trial.train_time_s:  # learnt from the runs: the largest start-up seen so far
                    seen = max(1.0, wall - trial.train_time_s - (trial.eval_time_s or 0.0))
                    seen_overheads[_label(c)] = max(seen, seen_overheads.get(_label(c), 0.0))
                if trial.status == "ok" and trial.eval_time_s is not None and trial.epochs_completed:
                    evals[_label(c)] = trial.eval_time_s / trial.epochs_completed  # measured here
            if r.status == "ok" and r.train_time_s and r.epochs:  # its epochs' time here, not the prediction's
                per_epoch[_label(c)] = r.train_time_s / r.epochs
            result.spent_s += r.wall_time_s
            result.runs.append(r)
            runs.append((c, r))
            if r.status == "ok" and (r.epochs >= full or (stops_at_target and meets(r, rec))):
                # run in full, or stopped at the accuracy asked for: a longer schedule gets there no sooner
                complete[_label(c)] = r
        if not any(r.rung == rung for _, r in runs):
            break
        # every configuration run in full competes to the end (it needs no longer run to be judged)
        ran_full = [(c, complete[_label(c)]) for c in cands if _label(c) in complete]
        ranked = rank_runs(runs + [(c, r) for c, r in ran_full if all(r is not q for _, q in runs)], rec)
        best = ranked[0][1]
        result.winner = best if best.status == "ok" else result.winner
        ranked = [(c, r) for c, r in ranked if any(r is q for _, q in runs)]  # the halving goes on among this rung's
        alive = [c for c, _ in ranked[: max(1, len(ranked) // 2)]]
        if stops_at_target:
            # A run that has not reached the target in less time than the soonest run that did may
            # get there sooner when it runs longer (the default cut to one epoch, say): it goes on,
            # for at most that time, where the halving would drop it.
            soonest = min((r.train_time_s for _, r in ranked if meets(r, rec) and r.train_time_s), default=None)
            if soonest is not None:
                behind = [c for c, r in ranked if c not in alive and _label(c) not in complete and r.status == "ok"
                          and not meets(r, rec) and (r.train_time_s or math.inf) < soonest]
                alive += behind
                chase.update({_label(c): soonest for c in behind})
        # A short configuration run in full is not better than a long one cut short for it: the
        # halving goes on while a survivor has more to show, and ends when every survivor has run in full.
        # No run has reached the target: the halving's accuracy after a few epochs is biased against
        # the default's constant rate (see the module docstring); where its epochs cost less than the
        # leader's, it goes on, first.
        default, leader = rec.baseline, (ranked[0][0] if ranked else None)
        default_goes_on = default is not None and _label(default) not in complete and nothing_reached() \
            and any(r.label == _label(default) for r in result.runs) \
            and (leader is None or leader is default or per_epoch[_label(default)] < per_epoch[_label(leader)])
        if default_goes_on and default is not None:
            dropped = all(c is not default for c in alive)
            alive = [default] + [c for c in alive if c is not default]
            if on_progress is not None and dropped and leader is not None:
                on_progress(f"the default goes on: no run has reached {default.config.get('stop_at_accuracy')} yet, "
                            f"and its epochs cost less than the leader's ({per_epoch[_label(default)]:.1f} s "
                            f"against {per_epoch[_label(leader)]:.1f} s): a constant rate gains with every "
                            f"epoch, so its longer run is the cheaper bet")
        if (len(ranked) == 1 and not default_goes_on) or all(_label(c) in complete for c in alive):
            break
        rung += 1
        rung_share = 1.0 if sum(_label(c) not in complete for c in alive) == 1 else 0.7
    if done:
        _save_state(state_file, done, request=request, finished=True)
    return result


def _save_state(path: Path, runs: dict[str, dict[str, Any]], *, request: str | None, finished: bool) -> None:
    from advisor._atomic import atomic_write
    from advisor._json import json_safe

    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"request": request, "finished": finished, "runs": runs}
    atomic_write(path, json.dumps(json_safe(state), indent=1) + "\n")

