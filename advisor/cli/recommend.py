"""``advisor recommend``: the best configurations for a workload, predicted by the surrogate.

Kept lean on purpose: this command must answer in about a second, so it imports no deep-learning
framework, Optuna, scikit-learn or matplotlib.
"""

from __future__ import annotations

import dataclasses
import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from advisor.cli import app
from advisor.cli._common import count_text, err, fail, narrow, out, print_json, seconds_text, user_errors
from advisor.errors import ConstraintError


class Preference(str, Enum):
    fast = "fast"
    accurate = "accurate"
    lean = "lean"
    balanced = "balanced"


_UNITS_MB = {"": 1.0, "m": 1.0, "mb": 1.0, "mib": 1.0, "g": 1024.0, "gb": 1024.0, "gib": 1024.0,
             "k": 1 / 1024, "kb": 1 / 1024, "kib": 1 / 1024, "t": 1024.0 ** 2, "tb": 1024.0 ** 2}
_UNITS_S = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_quantity(text: str, units: dict[str, float], option: str, example: str) -> float:
    """``2GB`` -> 2048 (MB), ``10m`` -> 600 (s): a positive number with an optional unit."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in units or float(match.group(1)) <= 0:
        fail(f"The {option!r} option must be a positive number with an optional unit "
             f"({', '.join(u for u in units if u)}), e.g. {example}. Got {text!r} instead.")
    return float(match.group(1)) * units[unit]


def parse_accuracy(text: str, option: str = "--min-accuracy") -> float:
    """``0.99`` or ``99%``."""
    try:
        value = float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        fail(f"The {option!r} option must be a fraction in [0, 1] or a percentage, e.g. 0.99 or 99%. "
             f"Got {text!r} instead.")
    return value


def _band(p: Any, fmt: str) -> str:
    return f"{format(p.mid, fmt)} [{format(p.lo, fmt)}-{format(p.hi, fmt)}]"


_FW_SHORT = {"onnxruntime": "ort", "tensorflow": "tf", "sklearn": "sklearn", "torch": "torch"}


def _num(v: float) -> str:
    return f"{v:.0f}" if v >= 10 else f"{v:.2g}"


def _compact_time(p: Any) -> str:
    return f"{_num(p.mid)} [{_num(p.lo)}-{_num(p.hi)}]"


def _compact_accuracy(p: Any) -> str:
    return f"{100 * p.mid:.1f} [{100 * p.lo:.0f}-{100 * p.hi:.0f}]"


def _time_band(p: Any) -> str:
    return f"{seconds_text(p.mid)} [{seconds_text(p.lo)}-{seconds_text(p.hi)}]"


#: The knobs a choice's line shows: every knob but the run's identity (framework, device, seed) and
#: the inter-op pool (the threads knob says what was granted); a numeric knob at zero is off and not shown.
_NOT_SHOWN = ("framework", "device", "seed", "inter_op_threads")


def _params(config: dict[str, Any]) -> str:
    from advisor.knobs import KNOBS

    parts = []
    for knob in KNOBS:
        key, value = knob.name, config.get(knob.name)
        if key in _NOT_SHOWN or value is None or (key in ("momentum", "nesterov") and config.get("optimizer") != "momentum"):
            continue
        if value is False or (knob.type in ("int", "float") and knob.default == 0 and not value):
            continue
        if key in ("mixed_precision", "cudnn_benchmark") and config.get("device") == "cpu":
            continue
        if isinstance(value, float):
            value = f"{value:.3g}"
        parts.append(f"{key}={value}")
    return " ".join(parts)


def _print(rec: Any) -> None:
    from rich.table import Table

    w = rec.workload
    shape = "x".join(map(str, w.input_shape))
    where = rec.target.device_kind.upper() + (f" ({rec.target.gpu_model})" if rec.target.gpu_model else "")
    out.print(f"Workload: {w.dataset} ({shape}, {w.num_classes} classes, {w.train_samples:,} training samples), "
              f"model {w.model}; target {where}, {rec.target.cores} core{'' if rec.target.cores == 1 else 's'}; "
              f"preference {rec.preference}.")
    sure = f" with at least {rec.confidence:.0%} probability" if rec.confidence is not None else ""
    out.print(f"{rec.n_candidates} candidates, {rec.n_feasible} meet the constraints{sure}, {rec.n_front} on the "
              f"front; ranked: {rec.ranking}. Figures are median [10%-90%]; 'meas' rows are this "
              f"configuration's own runs on this workload and machine, 'pred' rows come from the surrogate"
              + ("; P is the probability of meeting every constraint." if rec.confidence is not None else "."))
    if rec.extrapolation:
        out.print("[bold yellow]EXTRAPOLATION:[/] " + "; ".join(rec.reasons)
                  + ". The bands are widened; treat the ranking as a hint and verify it (--verify N).")
    if rec.new_workload:
        out.print(f"New workload: the surrogate was fitted on no trial of {w.dataset} at {w.train_samples:,} "
                  "training samples, so its bands use the wider offsets calibrated on held-out workloads "
                  "(widest for a dataset it never saw at any size).")
    rows = list(rec.choices) + ([rec.baseline] if rec.baseline is not None else [])
    if narrow():  # one line per choice: a table this wide would cut numbers
        for c in rows:
            basis = (f"MEASURED x{c.repeats}" if c.basis == "measured" else
                     f"accuracy MEASURED x{c.repeats}{_where_measured(c)}, time predicted" if c.accuracy.basis != c.basis
                     else "predicted")
            p = f", P {c.p_constraints:.0%}" if rec.confidence is not None else ""
            whole = f" (whole run {seconds_text(c.schedule_time_s.mid)})" if c.schedule_time_s is not None else ""
            out.print(f"#{c.rank or 'dflt'} {c.framework} {c.model} ({basis}{p}): time {_time_band(c.time_s)}{whole}, "
                      f"accuracy {_band(c.accuracy, '.4f')}, {c.memory_mb.mid:.0f} MiB", highlight=False)
    else:
        _print_table(rec, rows)
    _print_details(rec, rows)


def _present(dataset: str, data_dir: Path) -> int | None:
    """The training images in ``data_dir`` when it holds fewer than the dataset's full size (the
    answer is then for them, as --verify and --budget train on them), else None."""
    from advisor._datasets.download import SOURCES
    from advisor._datasets.registry import canonical_name, get_info
    from advisor._datasets.sources import train_images_present

    name = canonical_name(dataset)
    if name not in SOURCES:
        return None
    present, full = train_images_present(name, data_dir), get_info(name).train_size
    if present >= full:
        return None
    err.print(f"note: {data_dir} holds {present:,} of {name}'s {full:,} training images: the answer is for "
              f"{present:,}, as --verify and --budget train on them (--train-samples asks for another size).")
    return present


def _where_measured(c: Any) -> str:
    """Where a choice's measured accuracy (only) was measured: another device, another training size."""
    where = " on a CPU" if c.accuracy.basis == "measured on cpu" else ""
    return where + (f" at {c.measured_train_samples:,} training samples" if c.measured_train_samples else "") + (
        f" over {c.measured_epochs} epochs (as many samples seen)" if c.measured_epochs else "")


def _print_table(rec: Any, rows: list[Any]) -> None:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    columns = ["#", "framework", "model", "time s", "accuracy %", "MiB", "basis"]
    if rec.confidence is not None:
        columns.append("P")
    for column in columns:
        table.add_column(column, no_wrap=True)
    for c in rows:
        basis = (f"meas x{c.repeats}" if c.basis == "measured" else f"acc meas x{c.repeats}"
                 + (f" @{c.measured_train_samples:,}" if c.measured_train_samples else "")
                 + (f"x{c.measured_epochs}ep" if c.measured_epochs else "")
                 if c.accuracy.basis != c.basis else "pred")
        cells = [str(c.rank) if c.rank else "dflt", _FW_SHORT.get(c.framework, c.framework), c.model,
                 _compact_time(c.time_s), _compact_accuracy(c.accuracy), f"{c.memory_mb.mid:.0f}", basis]
        if rec.confidence is not None:
            cells.append(f"{c.p_constraints:.0%}")
        table.add_row(*cells)
    out.print(table)


def _print_details(rec: Any, rows: list[Any]) -> None:
    if rec.baseline is not None:
        b = rec.baseline
        length = (f"whole epochs while they fit in {b.config['time_budget_s']:g} s (at most {b.config.get('epochs')})"
                  if b.config.get("time_budget_s") else
                  count_text(int(b.config.get("epochs") or 0), "epoch"))
        out.print(f"dflt = the obvious default ({b.framework}, Adam 1e-3, batch 128, constant rate, {b.model}) at its best "
                  f"run length for this question: {length}.")
    for c in rows:
        out.print(f"#{c.rank or 'dflt'} {c.framework} {c.model}: {_params(c.config)}")
        out.print(f"    run it: {rec.command(c)}", highlight=False)
        if c.transfer:
            tr = c.transfer
            pairs = ", ".join(f"{d} {tr['accuracy'][d]:.3f} vs {tr['default_accuracy'][d]:.3f}" for d in tr["workloads"])
            out.print(f"    portfolio record, MEASURED under a {tr['budget_s']:g} s budget against the obvious default: "
                      f"won {tr['wins']}, tied {tr['ties']}, lost {tr['losses']} ({pairs}); "
                      f"{c.p_not_worse:.0%} likely to beat or tie it on a dataset outside that record", highlight=False)
        for e in c.evidence:
            measured = ", ".join(filter(None, (
                seconds_text(e.train_time_s) if e.train_time_s is not None else None,
                f"acc {e.test_accuracy:.3f}" if e.test_accuracy is not None else None,
                f"{e.peak_memory_mb:.0f} MiB" if e.peak_memory_mb is not None else None,
            )))
            label = "measured run" if c.basis == "measured" else f"measured nearby (distance {e.distance:.2g})"
            out.print(f"    {label}: trial {e.trial_id} ({e.framework}, {e.dataset_name}, "
                      f"n={e.train_samples}, {e.gpu_model or e.device_kind}, {e.status}) {measured or '-'}")
        if not c.evidence:
            out.print(f"    no measured trial on a {rec.target.device_kind.upper()} to cite: the figures are predicted only")


def _print_verification(results: list[Any], stats: Any) -> None:
    from rich.table import Table

    table = Table(title="Predicted against measured", title_justify="left")
    for column in ("#", "framework", "status", "time predicted", "time measured", "accuracy predicted",
                   "accuracy measured", "memory predicted", "memory measured"):
        table.add_column(column)
    for v in results:
        if v.status == "skipped":
            out.print(f"not run: {v.note}")
            continue
        m = v.measured

        def show(key: str, fmt: str) -> str:
            value = m.get(key)
            if value is None:
                return "-"
            flag = " (outside band)" if v.within_band.get(key) is False else ""
            return (seconds_text(value) if key == "train_time_s" else format(value, fmt)) + flag

        table.add_row(str(v.rank) if v.rank else "dflt", v.framework, v.status + (f": {v.note}" if v.note else ""),
                      _time_band(v.predicted["train_time_s"]), show("train_time_s", ""),
                      _band(v.predicted["test_accuracy"], ".3f"), show("test_accuracy", ".3f"),
                      _band(v.predicted["peak_memory_mb"], ".0f"), show("peak_memory_mb", ".0f"))
    if table.row_count:
        out.print(table)
    if stats is not None:
        from advisor.knowledge import user_knowledge_path

        ran = sum(1 for v in results if v.status != "skipped")
        err.print(f"Merged {ran} measured trials into your knowledge base {user_knowledge_path()} "
                  f"(now {stats.rows_out} trials).")


def _print_loop(loop: Any, rec: Any, data_dir: str | None = None) -> None:
    from rich.table import Table

    table = Table(title="Measured in the loop (this machine, your data)", title_justify="left", box=None)
    for column in ("run", "rung", "epochs", "status", "time s", "accuracy", "predicted time s"):
        table.add_column(column, no_wrap=True)
    for r in loop.runs:
        table.add_row(r.label, str(r.rung), str(r.epochs), r.status,
                      "-" if r.train_time_s is None else f"{r.train_time_s:.1f}",
                      "-" if r.test_accuracy is None else f"{r.test_accuracy:.4f}", f"{r.predicted_time_s:.0f}")
    out.print(table)
    if loop.winner is None:
        out.print("No run finished within the budget: nothing measured to recommend.")
    else:
        from advisor._recommend._budget import meets

        w, bounds, met = loop.winner, rec.constraints, meets(loop.winner, rec)
        if not met:  # the best of what ran, not an answer to the question
            asked = " and ".join(part for part in (
                None if bounds.min_accuracy is None else f"reached accuracy {bounds.min_accuracy:g}",
                None if bounds.max_time_s is None else f"trained within {bounds.max_time_s:g} s") if part)
            out.print(f"No run {asked} within the budget; the most accurate of the loop's runs is shown, "
                      "not an answer to the question: the answer asked again (without --budget) counts these runs.")
        out.print(f"Measured {'winner' if met else 'best run'}: {w.label} ({w.config['framework']} {w.model}, "
                  f"{count_text(w.epochs, 'epoch')}): accuracy {w.test_accuracy:.4f} in {w.train_time_s:.1f} s "
                  f"(MEASURED, trial {w.trial_id}).")
        source = rec.baseline if w.label == "default" else next((c for c in rec.choices if f"#{c.rank}" == w.label), None)
        if source is not None:
            import dataclasses

            out.print(f"    run it as measured: {rec.command(dataclasses.replace(source, config=w.config), data_dir=data_dir)}",
                      highlight=False)
            if w.epochs < int(source.config["epochs"]):
                out.print(f"    (the loop cut it to {count_text(w.epochs, 'epoch')} of {source.config['epochs']}; "
                          f"{w.label}'s command above runs it in full, which the loop did not measure)", highlight=False)
    resumed = f"; {count_text(loop.resumed, 'run')} taken from an interrupted loop" if loop.resumed else ""
    err.print(f"Spent {loop.spent_s:.0f} s of {loop.budget_s:.0f} s{resumed}. Trials added to {loop.knowledge_path}; "
              f"loop state in {loop.state_path}.")


@app.command("recommend")
@user_errors
def recommend_command(
    dataset: Annotated[str, typer.Option("--dataset", help="Registry name (mnist, cifar10...), synthetic:HxWxC "
                                          "or an .npz path; only its meta-features are read.")],
    model: Annotated[Optional[str], typer.Option("--model", help="Model (default: chosen from the input shape).")] = None,
    train_samples: Annotated[Optional[int], typer.Option("--train-samples", min=1,
                                                         help="Training samples (default: all).")] = None,
    gpu: Annotated[bool, typer.Option("--gpu/--cpu", help="Recommend for a GPU or for this machine's CPU.")] = False,
    gpu_model: Annotated[Optional[str], typer.Option("--gpu-model", help="GPU name for a --gpu target.")] = None,
    cores: Annotated[Optional[int], typer.Option("--cores", min=1, help="CPU cores to use (default: all allowed).")] = None,
    max_time: Annotated[Optional[str], typer.Option("--max-time", help="Bound on training time: 90, 90s, 10m, 2h.")] = None,
    min_accuracy: Annotated[Optional[str], typer.Option("--min-accuracy", help="Bound on test accuracy: 0.99 or 99%.")] = None,
    target_accuracy: Annotated[Optional[str], typer.Option(
        "--target-accuracy", help="Fastest way to reach this accuracy (0.99 or 99%): --min-accuracy ranked fastest first, "
        "run length chosen from the learning-curve model.")] = None,
    budget: Annotated[Optional[str], typer.Option(
        "--budget", help="Closed loop: spend this long (120s, 10m) measuring the top choices and the obvious default "
        "on your data (successive halving); the measured winner is reported and the trials are added to your "
        "knowledge base. Resumes if interrupted.")] = None,
    max_memory: Annotated[Optional[str], typer.Option("--max-memory", help="Bound on peak memory: 2GB, 512MB.")] = None,
    prefer: Annotated[Preference, typer.Option("--prefer", help="Ranking of the Pareto front: fast, accurate, lean, or balanced (the fastest within 0.01 of the best predicted accuracy, then the trade-offs that add the most to the front).")] = Preference.balanced,
    frameworks: Annotated[Optional[str], typer.Option("--frameworks", help="Comma-separated, e.g. torch,tensorflow.")] = None,
    top: Annotated[int, typer.Option("--top", min=1, max=100, help="How many configurations to show.")] = 3,
    table: Annotated[Optional[Path], typer.Option("--table", help="Knowledge base (default: the shipped one); "
                                                  "without --model-dir a surrogate is fitted on it.")] = None,
    model_dir: Annotated[Optional[Path], typer.Option("--model-dir", help="Surrogate model folder (default: shipped).")] = None,
    own_trials: Annotated[bool, typer.Option(
        "--own-trials/--no-own-trials", help="Count the runs of this workload in your knowledge base (what --verify "
        "and --budget measured; 'advisor knowledge info' shows it) as measured candidates.")] = True,
    verify: Annotated[int, typer.Option("--verify", min=0, help="Run the top N for real and compare.")] = 0,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Dataset files for --verify and --budget; the answer is for the training images they hold.")] = None,
    candidates: Annotated[int, typer.Option("--candidates", min=10, max=20000,
                                            help="Random candidates per framework.")] = 500,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the candidate draw.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Recommend framework and configuration for a workload: predicted time, accuracy and memory.

    Example: advisor recommend --dataset cifar10 --gpu --min-accuracy 0.7 --prefer fast

    Example: advisor recommend --dataset mnist --cpu --target-accuracy 99% --budget 120s --data-dir data/mnist
    """
    from advisor import knowledge
    from advisor import recommend as rc

    if target_accuracy and min_accuracy:
        fail("Give --target-accuracy or --min-accuracy, not both: --target-accuracy is --min-accuracy ranked fastest first.")
    accuracy_text = target_accuracy or min_accuracy
    budget_s = parse_quantity(budget, _UNITS_S, "--budget", "120s or 10m") if budget else None
    if budget_s is not None and verify:
        fail("Give --budget or --verify, not both: the closed loop measures the top choices itself.")
    if target_accuracy:
        prefer = Preference.fast
    constraints = rc.Constraints(
        max_time_s=parse_quantity(max_time, _UNITS_S, "--max-time", "90s or 10m") if max_time else None,
        min_accuracy=parse_accuracy(accuracy_text, "--target-accuracy" if target_accuracy else "--min-accuracy")
        if accuracy_text else None,
        max_memory_mb=parse_quantity(max_memory, _UNITS_MB, "--max-memory", "2GB or 512MB") if max_memory else None,
    )
    names = [f.strip() for f in frameworks.split(",") if f.strip()] if frameworks else None
    pool = top
    if budget_s is not None:  # the loop takes its recipes from more choices than are shown
        from advisor._recommend._budget import LOOP_POOL

        pool = max(top, LOOP_POOL)
    if data_dir is not None and train_samples is None:
        train_samples = _present(dataset, data_dir)
    request: str | None = None
    held: frozenset[str] = frozenset()
    if budget_s is not None:  # a loop interrupted on this request resumes on the answer it started from
        from advisor._recommend._budget import interrupted_trials, request_key

        asked = str(Path(dataset).resolve()) if Path(dataset).is_file() else dataset
        request = request_key({
            "dataset": asked, "model": model, "train_samples": train_samples, "gpu": gpu, "gpu_model": gpu_model,
            "cores": cores, "constraints": dataclasses.asdict(constraints), "prefer": prefer.value,
            "frameworks": names, "pool": pool, "table": table, "model_dir": model_dir, "own_trials": own_trials,
            "data_dir": data_dir, "candidates": candidates, "seed": seed, "budget_s": budget_s})
        held = interrupted_trials(request) if own_trials else frozenset()
    try:
        rec = rc.recommend(
            dataset, model=model, train_samples=train_samples, device_kind="gpu" if gpu else "cpu", gpu_model=gpu_model,
            cores=cores, constraints=constraints, prefer=prefer.value, frameworks=names, top=pool, table=table,
            model_dir=model_dir, candidates_per_framework=candidates, seed=seed, on_progress=lambda m: err.print(m + " ..."),
            own_table=knowledge.user_knowledge_path() if own_trials else None, leave_out_own=held,
        )
    except ConstraintError as exc:
        if not target_accuracy:
            raise
        # the constraint the user gave is --target-accuracy (--min-accuracy ranked fastest first)
        raise ConstraintError(str(exc).replace("--min-accuracy", "--target-accuracy")) from None
    if (verify or budget_s is not None) and data_dir is not None:
        from advisor.cli._common import check_data_dir

        check_data_dir(rec.workload.dataset, data_dir)  # before anything runs
    if budget_s is not None:
        from advisor._recommend._budget import check_budget

        check_budget(rec, budget_s)  # before anything is printed or run: a refusal is one line
    for warning in rec.warnings:
        err.print(f"warning: {warning}")
    verified: list[Any] = []
    stats = None
    if budget_s is not None:
        from advisor._recommend._budget import closed_loop, loop_choices, meets

        measured = dataclasses.replace(rec, choices=tuple(loop_choices(rec)))  # what the loop measures, as ranked
        if not as_json:
            _print(measured)
        if held:
            err.print(f"Resuming the loop interrupted on this request: {count_text(len(held), 'finished run')} of it "
                      f"{'is' if len(held) == 1 else 'are'} not run again (nor counted as your own runs until it ends).")
        err.print(f"Closed loop: measuring the top recipes and the obvious default within {budget_s:.0f} s ...")
        try:
            loop = closed_loop(rec, budget_s, data_dir=str(data_dir) if data_dir else None,
                               on_progress=lambda m: err.print("  " + m), request=request)
        except KeyboardInterrupt:
            kept = len(interrupted_trials(request)) if request is not None else 0
            fail(f"interrupted: {count_text(kept, 'finished run')} of the loop {'is' if kept == 1 else 'are'} kept in "
                 f"{knowledge.user_knowledge_path()}; run the same command again to resume" if kept else
                 "interrupted before a run of the loop finished; run the same command again to start it", code=130)
        if as_json:
            data = measured.to_dict()
            data["loop"] = loop.to_dict()
            # whether the winner answers the question (a target reached, a time bound kept), or is
            # only the best of what ran
            data["loop"]["winner_meets_constraints"] = None if loop.winner is None else meets(loop.winner, measured)
            print_json(data)
        else:
            _print_loop(loop, measured, str(data_dir) if data_dir else None)
        return
    if verify:
        if not as_json:
            _print(rec)
        err.print(f"Verifying the top {min(verify, len(rec.choices))} configurations for real ...")
        verified, stats = rc.verify(rec, verify, data_dir=str(data_dir) if data_dir else None)
        if as_json:
            data = rec.to_dict()
            data["verification"] = [vars(v) | {"predicted": {k: vars(p) for k, p in v.predicted.items()}}
                                    for v in verified]
            print_json(data)
        else:
            _print_verification(verified, stats)
        return
    if as_json:
        print_json(rec.to_dict())
    else:
        _print(rec)
