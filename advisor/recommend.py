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
(``_workload``, ``_candidates``, ``_baseline``, ``_portfolio``, ``_constraints``, ``_ranking``,
``_rules``, ``_filling``, ``_device``, ``_evidence``, ``_result``, ``_verify``, ``_budget``), and the public
names are re-exported here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

import numpy as np

from advisor import knowledge
from advisor._recommend._candidates import (
    DEFAULT_CANDIDATES, MODEL_MIN_TRIALS, Candidate, candidate_models, candidates, columns, encode_candidates,
    portfolio_candidates, space_names, too_small_for, unique, unseen_knobs,
)
from advisor._recommend._baseline import (
    EPOCH_GRID, MEASURED_ACCURACY_NOISE, accuracy_ceiling, measured_configs, measured_elsewhere, obvious_default,
    is_obvious_default, same_samples_seen, same_workload_rows, with_own_trials,
)
from advisor._recommend._constraints import CONFIDENCE, Constraints, check_constraints, probability
from advisor._recommend._filling import add_filling_runs, bounded_by_budget
from advisor._recommend._portfolio import _recipe, build_portfolio, load_portfolio, recipe_key, transfer_probability
from advisor._recommend._evidence import (
    EVIDENCE_K, TrialSpace, extrapolation, nearest_dataset, nearest_trials, own_evidence, widen,
)
from advisor._recommend._ranking import PREFERENCES, front_layers, pareto_mask, rank, spread
from advisor._recommend._device import CPU_VIEW
from advisor._recommend._device import device_figures as _device_figures
from advisor._recommend._rules import (
    ACCURACY_LEVEL_REASONS, BEST_SHOT_MAX_EPOCHS, BEST_SHOT_TIE, EXPLORATORY_CONFIDENCE, HARDWARE_REASONS, SWITCH_CONFIDENCE,
    OTHER_SIZE, OWN_RUN_FILLS, TRUSTED_SOURCES, UNSURE_FLOOR,
)
from advisor._recommend._rules import (  # noqa: I001 - the rules, private here
    beyond_measured as _beyond_measured, best_shots as _best_shots, ran_as_asked as _ran_as_asked, best_shot_order as _best_shot_order, best_shot_note as _best_shot_note, measure_note as _measure_note, cap_at_ceiling as _cap_at_ceiling,
    impossible as _impossible, order as _order, past_cap as _past_cap,
    monotone_over_epochs as _monotone_over_epochs, capped_by_measured as _capped_by_measured, p_better as _p_better, reachable as _reachable,
    robust_beside_default as _robust_beside_default, robust_first as _robust_first, unsure_eligible as _unsure_eligible,
)
from advisor._recommend._to_target import times_to_target
from advisor._recommend._result import Choice, Evidence, Prediction, Recommendation
from advisor._recommend._verify import Verification, verify
from advisor._recommend._workload import Target, WorkloadInfo, describe_workload, resolve_target
from advisor.errors import ConstraintError, KnowledgeBaseError, SurrogateError, invalid_parameter
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
    "TRUSTED_SOURCES",
]

# The private names these helpers had before the split; tests still reach them through this module.
_Candidate = Candidate
_candidates = candidates
_columns = columns
_rank = rank
_spread = spread


def _load(table: str | Path | None, model_dir: str | Path | None, seed: int,
          on_progress: Callable[[str], None] | None, device_kind: str = "cpu",
          ) -> tuple[knowledge.Table, Any, list[str], str, list[dict[str, Any]]]:
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
        return kb, model, [], "(fitted on the table)", build_portfolio(kb, model, device_kind=device_kind)
    directory = Path(model_dir) if model_dir is not None else sg.shipped_model_dir()
    model = sg.load(directory)
    warning = sg.table_warning(model, table_path)
    return kb, model, [warning] if warning else [], str(directory), load_portfolio(directory, device_kind)


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
    own_table: str | Path | None = None,
    leave_out_own: Collection[str] = (),
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
        own_table: The user's own knowledge base (the CLI passes
            :func:`advisor.knowledge.user_knowledge_path`): its trials of this workload and hardware
            are measured candidates too, and their runs are evidence lines; a missing file adds
            nothing, an unreadable one a warning.
        leave_out_own: Trial ids of ``own_table`` not to count (the CLI passes an interrupted
            loop's runs, :func:`advisor._recommend._budget.interrupted_trials`, so the loop resumes
            on the answer it started from).

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
    device = None
    if target.device_kind == "gpu":
        from advisor.devices import get_accelerator

        device = get_accelerator(target.gpu_model)  # an unknown name fails here, in one line
        target = dataclasses.replace(target, gpu_model=device.name)  # 'h200' and 'NVIDIA H200' are one GPU
    kb, surrogate, notes, model_where, portfolio = _load(table, model_dir, seed, on_progress, target.device_kind)
    mismatch = bool(notes)  # the loader's notes say the model was fitted on another table
    if not workload.synthetic and any(kb["synthetic"]):
        # Timing runs on random data trained the time and memory models; as evidence of a real
        # workload (the trials cited, the dataset nearest it, the models the table knows, its
        # measured accuracy) they would cite a random-label accuracy.
        from advisor.surrogate._targets import real_rows

        kb = kb.where(real_rows(kb.columns).tolist())
    # The user's own runs of this dataset join the table's as measured evidence (not as training rows).
    evidence_kb, own_ids, problem = with_own_trials(kb, own_table, workload, leave_out_own)
    if problem:
        notes.append(problem)
    physics = device  # the requested GPU's row: its roofline bounds every GPU answer
    if device is not None and sum(k == "gpu" and s == "ok" and g == device.name for k, s, g in zip(
            kb["device_kind"], kb["status"], kb["gpu_model"])) >= MIN_GPU_TRIALS:
        device = None  # enough measured trials of this GPU: the surrogate knows it (the device model is a feature)

    from advisor.datasets import refused_knobs
    from advisor.hardware import cpu_bf16_support

    exclude = unseen_knobs(surrogate.schema) | refused_knobs(workload.dataset)
    if "augment_flip" not in exclude and not workload.synthetic and workload.flip_preserves_label is None:
        # The user's own data: a mirror image may change its class (digits, letters), so an answer
        # that cannot be measured first does not assume it keeps it; the user can add the flip.
        exclude |= {"augment_flip"}
        notes.append(f"augment_flip is not offered on {workload.dataset}: whether a mirrored image keeps its class is "
                     f"not known. Add --augment-flip to a choice's command where it does (photos of objects, "
                     f"clothes), never for digits or letters.")
    if target.device_kind == "cpu" and cpu_bf16_support() is None:
        exclude |= {"bfloat16"}
    # torch.compile's warm-up runs before the timed epochs, so no time in the table includes it and
    # no prediction can price it: measured on the portfolio's compiled recipes it did not pay on a
    # CPU (benchmarks/results/compile.md: the warm-up, and every epoch slower), and on the H200 it
    # ran past the trials' 60 s limit for these small nets (gpu-model.md). A run measured on this
    # machine keeps its own configuration; a CPU run lent to a GPU answer leaves it off.
    exclude |= {"compile"}
    models = [workload.model] if model is not None else candidate_models(kb, workload)
    small = too_small_for(kb, workload) if model is None else {}
    if small:  # the table's best-measured architectures may be among them: say how to get them back
        side = max(small.values())
        notes.append(f"{', '.join(sorted(small))} do not build on a {'x'.join(map(str, workload.input_shape[:2]))} "
                     f"input (each 2x2 pooling halves it), so the answer is among {', '.join(models)}; padded "
                     f"with zeros to at least {side} pixels a side, the images would fit them all (whether "
                     f"that helps is not known here: --verify N on the padded data measures it).")
    usable = [fw for fw in fws if f"{fw}-{target.device_kind}" in space_names()]
    if not usable:
        raise SurrogateError(f"No framework among {', '.join(fws)} has a search space for the {device_kind} target.")
    cands = candidates(workload, target, fws, per_framework=candidates_per_framework, seed=seed,
                       exclude=exclude, models=models)
    default_fw = "torch" if "torch" in usable else usable[0]
    cands += [Candidate(obvious_default(default_fw, target, e), "default", None, model=workload.model)
              for e in EPOCH_GRID]
    cands += portfolio_candidates(portfolio, workload, target, usable, models, model is not None, exclude, constraints.max_time_s)
    # Measured evidence counts for any model the user did not rule out (a model too rare in the
    # table for the surrogate to predict is still measured).
    evidence_models = {workload.model} if model is not None else set(kb["model"])
    # An accuracy target (a minimum accuracy, preferring speed: --target-accuracy) is a
    # time-to-accuracy question: every run stops at the first epoch that reaches it (its schedule
    # still spans its epochs), so a longer schedule costs only where needed, and a measured run
    # counts with its time to the target. A minimum accuracy with another preference asks for
    # more than the minimum: those runs go on.
    accuracy_only = constraints.min_accuracy is not None and constraints.max_time_s is None
    to_target = constraints.min_accuracy if accuracy_only and prefer == "fast" else None
    measured = measured_configs(evidence_kb, same_workload_rows(evidence_kb, workload, target), models=evidence_models,
                                stop_at=to_target)
    # Where the workload's full size was never measured, runs of the largest measured size stand
    # in for it (same_workload_rows): their accuracy is evidence (more data rarely lowers it),
    # their time and memory are not (both grow with the samples), so those are predicted.
    other_size = {id(m) for m in measured if m.train_samples and m.train_samples != workload.train_samples}
    cands += [Candidate(m.config, "measured", None, model=m.model, measured=m) if id(m) not in other_size else
              Candidate(m.config, OTHER_SIZE, None, model=m.model, accuracy_of=m)
              for m in measured if m.config.framework in usable]
    # ... and, under a time bound, as the same training in samples seen: e epochs of n0 samples are
    # ceil(e n0 / n) epochs of the n asked for, about as long, so a bound the e-epoch run at n would
    # break still gets this evidence. Without a bound the e-epoch run at n stays as it was: both would
    # show the same measured accuracy, and the shorter would win on time though the longer learns more.
    elsewhere = measured_elsewhere(evidence_kb, workload, target, models=evidence_models, frameworks=set(usable),
                                   exclude=exclude)
    if constraints.max_time_s is not None and to_target is None:  # on a GPU too, for the CPU runs standing in
        cands += [Candidate(cfg, OTHER_SIZE, None, model=m.model, accuracy_of=m) for m in measured
                  if id(m) in other_size and m.config.framework in usable
                  and (cfg := same_samples_seen(m, workload.train_samples)) is not None]
        elsewhere += [(short, got) for cfg, got in elsewhere
                      if (short := same_samples_seen(got, workload.train_samples, cfg)) is not None]
    cands += [Candidate(cfg, "measured on cpu", None, model=got.model, accuracy_of=got) for cfg, got in elsewhere]
    cands = unique(cands)
    own_used = sorted({tid for c in cands for got in (c.measured, c.accuracy_of) if got is not None
                       for tid in got.trial_ids if tid in own_ids})
    own_measured = {tid for c in cands if c.measured is not None for tid in c.measured.trial_ids if tid in own_ids}
    if own_used:
        # a run lends all its measured values only to a candidate on its own hardware and size;
        # elsewhere (a GPU asked, another size) only its accuracy
        n, its, them = len(own_used), ("its" if len(own_used) == 1 else "their"), ("it" if len(own_used) == 1 else "them")
        what = (f"with {its} measured values" if len(own_measured) == n else
                f"with {its} measured accuracy ({its} time and memory, on other hardware or another size, are "
                "predicted)" if not own_measured else
                f"with their measured values ({n - len(own_measured)} of them with the accuracy only: their time and "
                "memory, on other hardware or another size, are predicted)")
        notes.append(f"{n} of your own runs of this workload (in {own_table}) "
                     f"{'is a candidate' if n == 1 else 'are candidates'} {what} (--no-own-trials leaves {them} out).")
    sizes = sorted({got.train_samples for c in cands for got in (c.measured, c.accuracy_of)
                    if got is not None and got.train_samples and got.train_samples != workload.train_samples})
    if sizes:
        size = ", ".join(f"{n:,}" for n in sizes)
        notes.append(f"{workload.dataset} was measured at {size} training samples, not at the {workload.train_samples:,} "
                     f"asked for: those runs' accuracy is shown as measured (more data rarely lowers it), their time "
                     f"and memory are predicted for {workload.train_samples:,} (--train-samples {sizes[-1]} asks about "
                     "the measured size).")

    x = encode_candidates(cands, workload, target, surrogate)
    # With the device model, time and memory come from physics and accuracy from the same runs on
    # a CPU (accuracy does not depend on the device at equal config): one prediction either way.
    view, view_overrides = (target, None) if device is None else (Target("cpu", 1, hardware_id="", gemm_gflops={}), CPU_VIEW)
    pred = surrogate.predict_matrix(x if device is None else encode_candidates(
        cands, workload, view, surrogate, overrides=view_overrides))
    t_band, a_band, m_band = pred["train_time_s"], pred["test_accuracy"], pred["peak_memory_mb"]
    reasons = extrapolation(kb, workload, target, own_runs=len(own_ids))
    level_unknown = any(k in r for r in reasons for k in ACCURACY_LEVEL_REASONS)  # data the table does not hold
    known = surrogate.meta.get("workloads")
    new_workload = None
    new_dataset = False
    if known is not None and len(x):
        from advisor.surrogate.model import seen_datasets, seen_workloads

        new_workload = not bool(seen_workloads(x[:1], known)[0])  # the workload's model decides the key
        new_dataset = not bool(seen_datasets(x[:1], known)[0])
    t = [t_band.lo.copy(), t_band.mid.copy(), t_band.hi.copy()]
    a = [a_band.lo.copy(), a_band.mid.copy(), a_band.hi.copy()]
    m = [m_band.lo.copy(), m_band.mid.copy(), m_band.hi.copy()]
    if reasons:
        # Accuracy is widened for any extrapolation. Time and memory follow FLOPs, parameters and
        # activations, which the features carry to new data; they are widened only for hardware the
        # table has not seen (another device kind or GPU model).
        a[0], a[2] = widen(a_band, False)
        if any(r.startswith(HARDWARE_REASONS) for r in reasons):
            (t[0], t[2]), (m[0], m[2]) = widen(t_band, True), widen(m_band, True)
    fits = np.ones(len(cands), dtype=bool)
    if device is not None:  # no trial of this GPU in the table: physics for time and memory, the CPU's accuracy model
        (t, m, fits), line = _device_figures(device, cands, workload)
        reasons.append(line)
    elif physics is not None:  # the surrogate's GPU times, kept within what the device allows
        (t_phys, _, fits), _ = _device_figures(physics, cands, workload)
        from advisor.devices import MAX_SLOWDOWN

        bound = MAX_SLOWDOWN * t_phys[0]
        t = [np.clip(band, t_phys[0], bound) for band in t]
    is_measured = np.array([c.measured is not None for c in cands])
    for i in np.flatnonzero(is_measured):
        got = cands[i].measured
        for band, values in ((t, got.time_s), (a, got.accuracy), (m, got.memory_mb)):
            band[0][i], band[1][i], band[2][i] = values
    _monotone_over_epochs(cands, a)
    _capped_by_measured(cands, a)
    acc_measured = np.array([c.accuracy_of is not None for c in cands])
    for i in np.flatnonzero(acc_measured):  # measured on another device: its accuracy, not its time
        a[0][i], a[1][i], a[2][i] = cands[i].accuracy_of.accuracy
    if constraints.max_time_s is not None:  # the default and the portfolio, also as runs that fill the bound
        cands, x, fits = add_filling_runs(cands, x, fits, t, a, m, constraints.max_time_s)
    is_measured = np.array([c.measured is not None for c in cands])
    acc_measured = np.array([c.accuracy_of is not None for c in cands])
    # Measured on this workload (any device) by the table: the user's own runs alone are candidates
    # with their measured values, but the rules for data the table does not hold still apply.
    own_only = np.array([(got := c.measured or c.accuracy_of) is not None and set(got.trial_ids) <= own_ids
                         for c in cands], dtype=bool)
    evidence_here = bool(((is_measured | acc_measured) & ~own_only).any())
    ceiling = accuracy_ceiling(kb, workload)
    if ceiling is not None:
        _cap_at_ceiling(a, ~is_measured & ~acc_measured, ceiling, MEASURED_ACCURACY_NOISE)
    whole: dict[int, tuple[float, float, float]] = {}  # the whole schedule's time, where a time is to the target
    if to_target is not None and not level_unknown:  # a predicted time to the first epoch reaching it, from the curve
        whole = times_to_target(cands, np.flatnonzero(~is_measured & ~acc_measured & (a[2] >= to_target)), t, a,
                                a_band, to_target, surrogate, lambda cs, read: encode_candidates(
                                    cs, workload, view, surrogate, overrides=view_overrides, reading=read))
    p = probability(constraints, tuple(t), tuple(a), tuple(m), time_bounded=None if constraints.max_time_s is None
                    else bounded_by_budget(cands, t[2], constraints.max_time_s))
    # Evidence first: where this workload was measured, a prediction outranks a measurement only
    # on its band's conservative side (the default and the portfolio included). The user's own runs
    # count so where one of them answers the question as asked: it meets the constraints and, under
    # a time bound, used most of it, under an accuracy target, reached it (a run of the closed loop
    # cut to a few epochs is evidence of a shorter run, not of the best within the bound nor of the
    # run that gets to the target). Others are candidates beside the trusted recipes, ranked on their
    # measurements as those are on their medians.
    filled = np.array([c.measured is not None
                       and (constraints.max_time_s is None
                            or c.measured.time_s[1] >= OWN_RUN_FILLS * constraints.max_time_s)
                       and (constraints.min_accuracy is None or c.measured.accuracy[1] >= constraints.min_accuracy)
                       for c in cands], dtype=bool)
    measured_first = (is_measured & ~own_only).any() or (is_measured & own_only & filled & (p >= CONFIDENCE)).any()
    trusted = is_measured if measured_first else np.array([c.source in TRUSTED_SOURCES for c in cands])
    # Rank on the band's conservative side, except for trusted candidates (measured here, the
    # obvious default, the portfolio, the seed presets): picking the best of thousands of noisy
    # predicted medians is the optimizer's curse. An accuracy measured on another device counts as
    # measured; that run's time does not.
    t_c = np.where(trusted, t[1], t[2])
    trusted = trusted | acc_measured
    a_c = np.where(trusted, a[1], a[0])
    m_c = np.where(trusted, m[1], m[2])
    has_bounds = any(v is not None for v in (constraints.max_time_s, constraints.min_accuracy,
                                              constraints.max_memory_mb))
    confidence = None
    unsure = best_shot = False
    if has_bounds:
        try:
            check_constraints(constraints, t[1], a[1], m[1])  # one line naming the binding bound when none can
            confidence = CONFIDENCE
            # A predicted-only candidate from a random draw must be surer than a trusted one: among
            # thousands of draws some are over-predicted by chance.
            eligible = p >= np.where(trusted, CONFIDENCE, EXPLORATORY_CONFIDENCE)
            if not eligible.any():
                eligible = _unsure_eligible(p, trusted)
                confidence, unsure, shown = UNSURE_FLOOR, True, int(eligible.sum())
                if not evidence_here:  # no evidence here: measured records elsewhere count
                    eligible = _robust_beside_default(eligible, cands, [transfer_probability(c.transfer) for c in cands])
                if eligible.any():  # else the request is refused, or answered with best shots (below)
                    notes.append(f"No configuration meets the constraints with {CONFIDENCE:.0%} confidence; the choices "
                                 f"below meet them with at least {UNSURE_FLOOR:.0%} (the best: {p.max():.0%})" + (
                                     "; the portfolio's robust recipes are shown beside the obvious default, as their "
                                     "measured records elsewhere say they do as well" if eligible.sum() > shown else "") + ".")
            if not eligible.any():
                raise ConstraintError(_impossible(constraints, t, a, p))
        except ConstraintError:
            reachable = _reachable(workload.landmark, surrogate)
            shots = _best_shots(constraints, level_unknown, t, a, m,
                                ceiling=1.0 - 1.0 / max(1, workload.test_samples), always=trusted,
                                reachable=reachable, measured=_ran_as_asked(cands))
            if shots is None:
                raise
            eligible, best_shot, unsure = shots, True, True
            notes.append(_best_shot_note(constraints, shots, a[2], reachable))
    else:
        eligible = np.ones(len(cands), dtype=bool)
    eligible &= fits
    if not eligible.any():
        raise ConstraintError(f"No configuration fits the {device.memory_gib:g} GiB of {device.name}."
                              if device is not None else "No configuration meets the constraints.")
    past = _past_cap(cands, np.array([whole[i][2] if i in whole else t[2][i] for i in range(len(cands))]))
    if best_shot:
        # The level is unknown but the ranking of configurations transfers: the highest predicted
        # accuracy first (a random draw on its band's low side); within a tie, evidence, then the
        # longer run (best_shot_order).
        idx = np.flatnonzero(eligible)
        within = ~past[idx]
        idx = idx[within] if within.any() else idx
        run = np.array([whole[int(i)][1] if int(i) in whole else t_c[i] for i in idx])  # the whole run, not to the target
        record = np.array([transfer_probability(cands[int(i)].transfer) or 0.0 for i in idx])
        order = _best_shot_order(idx, a_c[idx], run, record)
        how = (f"best shots: the highest predicted accuracy first; within {BEST_SHOT_TIE:g} of accuracy the "
               f"surer measured record against the obvious default first, then the longer run")
    elif unsure:  # nothing is likely enough: the surest first (a random draw counts as less sure)
        idx = np.flatnonzero(eligible)
        surest = p[idx] - np.where(trusted[idx], 0.0, EXPLORATORY_CONFIDENCE - CONFIDENCE)
        order, how = [int(i) for i in idx[np.lexsort((t_c[idx], -surest))]], "most likely to meet the constraints first"
    else:
        if physics is not None:  # memory is weighed as the share of the device a choice takes
            room: float | None = physics.memory_gib * 1024
        else:
            from advisor import hardware

            room = (profile or hardware.load_cached() or hardware.identity()).memory_gb * 1024 or None
        order, how = _order(np.flatnonzero(eligible), t_c, a_c, m_c, constraints, prefer, top, memory_room_mb=room)

    def paired(i: int, b: int, objective: str) -> float | None:
        """The calibrated spread of a predicted difference on a new dataset, when both figures are
        the surrogate's own predictions (not measured, not the device model's time)."""
        if not new_dataset or (objective != "test_accuracy" and device is not None):
            return None
        if any(cands[k].measured is not None or cands[k].accuracy_of is not None for k in (i, b)):
            return None
        value = (surrogate.meta.get("pair_offsets_new_dataset") or {}).get(objective)
        return None if value is None else float(value)

    # the obvious default, or a measured run of it as the question would run it (its row then shows
    # the measurement; under a time bound, a run that used most of it)
    baseline_idx = [i for i in order if cands[i].source == "default" or (
        filled[i] and cands[i].model == workload.model and is_obvious_default(cands[i].config, target))]
    # On a workload the table has not measured, a portfolio recipe that beat the obvious default on
    # the measured matrix's other datasets (likely enough to beat it here too) is the robust choice
    # in the default's place; where the workload was measured, its measurements decide (so does a
    # run of the recipe among the user's own at least as long as the copy offered: the recipe is no
    # longer a prior there; a rung of the loop cut shorter says less than its record elsewhere).
    beats = {i: transfer_probability(cands[i].transfer) for i in order}

    def recipe(c: Candidate) -> str:  # the portfolio's identity of a recipe: run length aside
        return recipe_key(_recipe(c.config.to_dict(), c.model or workload.model))

    ran_here: dict[str, int] = {}
    for c in cands:
        if c.measured is not None:
            ran_here[recipe(c)] = max(ran_here.get(recipe(c), 0), c.config.epochs)
    robust = [] if evidence_here else [i for i in order if (beats[i] or 0.0) >= SWITCH_CONFIDENCE
                                       and cands[i].config.epochs > ran_here.get(recipe(cands[i]), 0)]
    # Where no candidate is likely to reach an accuracy target, what counts is reaching it at all:
    # compare accuracy, and take the robust recipe's longest run (it stops at the target, see below).
    reach = accuracy_only and (unsure or best_shot)
    # the surest record first, then the one that won most; the ranking's order among equals
    robust = _robust_first(robust, cands, beats, longest=reach, past=past)
    reference = robust[:1] or baseline_idx[:1]
    if reference and order and cands[order[0]].source != "measured" and order[0] != reference[0] \
            and not (cands[order[0]].source == "default" and not robust) and prefer != "lean":
        # Never worse than the robust choice unless the evidence says so: an unmeasured pick
        # replaces it only when it is likely to be better on what the question asks.
        keep, first = int(reference[0]), int(order[0])
        by_time = (accuracy_only or prefer == "fast") and not reach  # reaching the target at all is in doubt: compare accuracy
        if robust and cands[first].source == "default":
            chance = 1.0 - float(beats[keep] or 0.0)  # measured: the default lost to it elsewhere
        else:
            chance = (_p_better(t, first, keep, log=True, lower=True, pair_width=paired(first, keep, "train_time_s"))
                      if by_time else
                      _p_better(a, first, keep, log=False, lower=False, pair_width=paired(first, keep, "test_accuracy")))
        beyond = None
        if chance >= SWITCH_CONFIDENCE and not by_time and not evidence_here \
                and constraints.max_time_s is not None and to_target is None:
            # On data the table does not hold, a run longer than any measured of its recipe gains
            # only by the curve prior's assumption (see _beyond_measured): it keeps the reference.
            beyond = _beyond_measured(cands[first], workload.train_samples, kb, workload.model)
            chance = 0.0 if beyond is not None else chance
        if chance < SWITCH_CONFIDENCE:
            order = [keep] + [j for j in order if j != keep]
            if beyond is not None:
                how += (f"; the {'robust recipe' if robust else 'obvious default'} kept first: the best alternative "
                        f"would see {beyond[0]:,} training samples, more than any measured run of its recipe "
                        f"({beyond[1]:,}), so its predicted gain from training longer is not evidence")
            elif not robust:
                how += (f"; the obvious default kept first: the best alternative is only {chance:.0%} likely to "
                        f"{'be faster' if by_time else 'be more accurate'} (needs {SWITCH_CONFIDENCE:.0%})")
    if robust and order and order[0] == robust[0]:
        rec_ = cands[robust[0]].transfer or {}
        how += (f"; first the portfolio's robust recipe: trained under a {rec_.get('budget_s', 0):g} s budget on "
                f"{len(rec_.get('workloads', []))} other datasets, it beat the obvious default on {rec_.get('wins')} "
                f"(tied {rec_.get('ties')}, lost {rec_.get('losses')}), measured, so it is {beats[robust[0]]:.0%} likely "
                f"to beat or tie it here (needs {SWITCH_CONFIDENCE:.0%})")
    if not baseline_idx:  # the default meets no constraint: show it where it comes closest
        defaults = np.array([c.source == "default" for c in cands])
        pool = np.flatnonzero(defaults)
        baseline_idx = [int(pool[np.argmax(p[pool] + 1e-3 * a[1][pool])])] if len(pool) else []
    space = TrialSpace(surrogate, evidence_kb)
    # Evidence comes from this dataset, or, when the table has none of it, from the measured one
    # nearest it by meta-features.
    evidence_dataset = workload.dataset
    if workload.dataset not in set(evidence_kb["dataset_name"]):
        near = nearest_dataset(kb, workload)
        evidence_dataset = near[0] if near is not None else workload.dataset

    stop_at = {"stop_at_accuracy": to_target} if to_target is not None else {}
    if stop_at:
        notes.append(f"Each run stops at the first epoch reaching test accuracy {to_target:g} (--stop-at-accuracy): "
                     f"a measured run's time is its time to the target, read from its curve; a predicted time is "
                     + ("the whole schedule's (on data the table does not hold the curve's level is not known)."
                        if level_unknown else "read from the predicted curve (the whole schedule's where the curve "
                                              "reaches it only at its end)."))

    def choice(i: int, rank_: int) -> Choice:
        cand = cands[i]
        basis = "measured" if cand.measured is not None else "predicted"
        acc_basis = basis if cand.accuracy_of is None else OTHER_SIZE if cand.source == OTHER_SIZE else "measured on cpu"
        got = cand.measured or cand.accuracy_of
        size = got.train_samples if got is not None and got.train_samples != workload.train_samples else None
        epochs = got.config.epochs if size and got.config.epochs != cand.config.epochs else None
        evidence = (own_evidence(evidence_kb, cand.measured) if cand.measured is not None else
                    nearest_trials(space, evidence_kb, x[i], cand.config.framework, EVIDENCE_K,
                                   device_kind=target.device_kind, dataset=evidence_dataset))
        return Choice(
            rank=rank_, framework=cand.config.framework, source=cand.source,
            config={**cand.config.to_dict(), **stop_at}, space_params=cand.space_params,
            time_s=Prediction(float(t[0][i]), float(t[1][i]), float(t[2][i]), basis),
            accuracy=Prediction(float(a[0][i]), float(a[1][i]), float(a[2][i]), acc_basis),
            memory_mb=Prediction(float(m[0][i]), float(m[1][i]), float(m[2][i]), basis),
            evidence=evidence, model=cand.model or workload.model, basis=basis,
            repeats=(cand.measured or cand.accuracy_of).repeats if (cand.measured or cand.accuracy_of) else 0,
            p_constraints=float(p[i]), transfer=cand.transfer, p_not_worse=transfer_probability(cand.transfer),
            schedule_time_s=Prediction(*whole[i], basis) if i in whole else None,
            measured_train_samples=size or None, measured_epochs=epochs,
        )

    choices = [choice(int(i), k + 1) for k, i in enumerate(_distinct_runs(order, cands, t[2], top))]
    baseline = choice(int(baseline_idx[0]), 0) if baseline_idx else None
    if reach and level_unknown and choices and not evidence_here:
        guess = choices[0].schedule_time_s or choices[0].time_s
        notes.append(_measure_note(guess.mid))
    compiled = [c.rank for c in (*choices, *([baseline] if baseline else [])) if c.config.get("compile")]
    if compiled:  # only a run measured here keeps compile (see exclude)
        notes.append(f"{', '.join(f'#{r}' if r else '#dflt' for r in compiled)}: measured with torch.compile, whose "
                     "warm-up ran before the timed epochs and is not in the time shown (benchmarks/results/compile.md "
                     "measured it, and slower epochs, on a CPU); the same command without --compile runs the same "
                     "arithmetic.")
    n_front = int(pareto_mask(np.column_stack([np.log(t_c[eligible]), -a_c[eligible], np.log(m_c[eligible])])).sum())
    return Recommendation(
        workload=workload, target=target, constraints=constraints, preference=prefer, choices=tuple(choices),
        n_candidates=len(cands), n_feasible=int(eligible.sum()), n_front=n_front,
        extrapolation=bool(reasons), reasons=tuple(reasons), warnings=tuple(notes),
        table=str(kb.path), model_dir=model_where, table_mismatch=mismatch, new_workload=new_workload,
        baseline=baseline, ranking=how, confidence=confidence,
        own_table=str(own_table) if own_table is not None and Path(own_table).exists() else None,
        own_trials=tuple(own_used),
    )


def _distinct_runs(order: list[int], cands: list[Candidate], t_hi: np.ndarray, limit: int) -> list[int]:
    """The first ``limit`` of ``order`` less the runs shown twice: a recipe filling a time bound whose
    epoch cap is predicted (the upper edge of the fixed run's band, ``t_hi``) to fit within the bound
    is the same run as the recipe at that many epochs; the one ranked first stays."""
    def key(c: Candidate) -> tuple[Any, ...]:
        config = c.config.to_dict()
        config["time_budget_s"] = 0.0
        return (str(c.model), *sorted(config.items()))

    shown: list[int] = []
    first: dict[tuple[Any, ...], int] = {}  # each run shown, by its recipe and epochs
    for i in order:
        k = key(cands[i])
        e = first.setdefault(k, i)
        if e != i:
            budgets = (float(cands[i].config.time_budget_s or 0.0), float(cands[e].config.time_budget_s or 0.0))
            if (budgets[0] == 0.0) != (budgets[1] == 0.0):
                fixed = i if budgets[0] == 0.0 else e
                if float(t_hi[fixed]) <= max(budgets):
                    continue
        shown.append(i)
        if len(shown) == limit:
            break
    return shown


#: Measured trials of the requested GPU the table must hold before the surrogate's trees, rather
#: than the device model (whose constants those trials fit), answer for its time and memory: a
#: few dozen small-workload runs teach the trees less than the physics does.
MIN_GPU_TRIALS = 200


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
