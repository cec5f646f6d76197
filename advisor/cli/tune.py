"""``advisor tune``, ``advisor worker`` and ``advisor studies``: multi-objective studies on Optuna."""

from __future__ import annotations

import importlib.util
import math
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from advisor.cli import app
from advisor.cli._common import err, fail, out, print_json, seconds_text, user_errors
from advisor.errors import InvalidParameterError
from advisor.records import FRAMEWORKS

if TYPE_CHECKING:
    from advisor.tuning import StudyProgress, StudySummary

DEFAULT_STORAGE = "sqlite:///advisor.db"  # the same as advisor.tuning.DEFAULT_STORAGE (no optuna here)
EXIT_INTERRUPTED = 130


class Target(str, Enum):
    cpu = "cpu"
    gpu = "gpu"


class SamplerName(str, Enum):
    auto = "auto"
    tpe = "tpe"
    nsga2 = "nsga2"
    gp = "gp"
    random = "random"


StorageOption = Annotated[str, typer.Option("--storage", envvar="ADVISOR_STORAGE",
                                            help="Storage URL: sqlite:///FILE or postgresql://user@host/db "
                                                 "(default: $ADVISOR_STORAGE, else sqlite:///advisor.db).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def _quiet_optuna(verbose: bool) -> None:
    import logging

    import optuna

    # Optuna logs every trial (and a traceback per failed trial) to stderr; the progress display
    # says the same in one line. --verbose brings them back.
    optuna.logging.set_verbosity(logging.INFO if verbose else logging.ERROR)


def _frameworks(text: str, target: str) -> list[str]:
    from advisor.space import list_spaces

    if text == "any":
        # Every framework installed here that has a built-in space for the target.
        names = [f for f in FRAMEWORKS if f"{f}-{target}" in list_spaces()
                 and importlib.util.find_spec(f) is not None]
        if len(names) < 1:
            fail(f"--framework any: no framework with a {target} search space is installed")
        return names
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in FRAMEWORKS]
    if not names or bad or len(set(names)) != len(names):
        raise InvalidParameterError(
            f"The '--framework' parameter of advisor tune must be one of {', '.join(FRAMEWORKS)}, a "
            f"comma-separated list of them, or 'any'. Got {text!r} instead.")
    return names


def _fmt(value: Any, spec: str = ".4g") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:{spec}}"


class _Display:
    """Live progress on stderr: the bar (trials finished of the budget), the front and its
    hypervolume, one row per running trial (its epoch, test accuracy so far and elapsed time),
    the best finished trial and an ETA. Rows come from the storage, so every worker's trials show."""

    def __init__(self, total: int, name: str, *, plain: bool | None = None) -> None:
        from rich.console import Group
        from rich.live import Live
        from rich.text import Text

        # Not a terminal (a log file, a pipe): a live display would show nothing until the end, so
        # a plain line is written as each trial finishes instead.
        self.plain = not err.is_terminal if plain is None else plain
        self.name = name
        self.finished = -1
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=err, transient=False,
        )
        self.task = self.progress.add_task(f"study {name}", total=total, status="starting")
        self.rows = Text("")
        self.last = ""  # the last finished trial, kept between the watcher's updates
        self.live = Live(Group(self.progress, self.rows), console=err, refresh_per_second=2, transient=False)

    def __enter__(self) -> "_Display":
        if self.plain:
            err.print(f"study {self.name}: starting", highlight=False, soft_wrap=True)
        else:
            self.live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.plain:
            self.live.stop()

    def __call__(self, p: "StudyProgress") -> None:
        c = p.counts
        if self.plain:
            if c.finished and c.finished != self.finished:  # a line per finished trial, with where the study stands
                self.finished = c.finished
                parts = [f"[{min(c.finished, p.n_trials)}/{p.n_trials}]", p.last or "", f"ok {c.complete}",
                         f"pruned {c.pruned}", f"failed {c.failed}", f"front {p.front_size}",
                         f"hypervolume {p.hypervolume:.4f}"]
                if p.best:
                    parts.append(f"best {p.best}")
                if p.eta_s is not None and c.finished < p.n_trials:
                    parts.append(f"ETA {seconds_text(p.eta_s)}")
                err.print(" · ".join(x for x in parts if x), highlight=False, soft_wrap=True)
            return
        status = (f"ok {c.complete} · pruned {c.pruned} · failed {c.failed} · front {p.front_size} · "
                  f"hypervolume {p.hypervolume:.4f}")
        self.progress.update(self.task, completed=min(c.finished, p.n_trials), total=p.n_trials, status=status)
        lines = []
        for r in p.running:
            epoch = f"epoch {r.epoch}/{r.epochs}" if r.epoch is not None else "starting"
            acc = f" · accuracy {r.accuracy:.4f}" if r.accuracy is not None else ""
            lines.append(f"  trial {r.number}: {epoch}{acc} · {r.elapsed_s:.0f} s")
        tail = []
        if p.best:
            tail.append(f"best {p.best}")
        if p.eta_s is not None and c.finished < p.n_trials:
            tail.append(f"ETA {seconds_text(p.eta_s)}")
        self.last = p.last or self.last
        if self.last:
            tail.append(self.last)
        if tail:
            lines.append("  " + " · ".join(tail))
        self.rows.plain = "\n".join(lines)


def front_table(front: Any, *, title: str) -> Table:
    """A Rich table of a Pareto front's points."""
    from advisor.pareto import OBJECTIVES

    table = Table(title=title)
    table.add_column("trial", justify="right")
    table.add_column("framework")
    for n in front.objectives:
        unit = OBJECTIVES[n].unit
        table.add_column(f"{n} ({unit})" if unit else n, justify="right")
    table.add_column("params")
    for p in front.points:
        params = ", ".join(f"{k}={_fmt(v) if isinstance(v, float) else v}" for k, v in p.params.items())
        table.add_row(str(p.trial_number) + (" (chance)" if p.chance_level else ""), p.framework,
                      *(_fmt(p.values[n]) for n in front.objectives), params)
    return table


def print_front(front: Any, *, title: str) -> None:
    """A front as a table on a wide terminal, else one line per point (numbers never cut)."""
    from advisor.cli._common import narrow
    from advisor.pareto import OBJECTIVES

    if not narrow():
        out.print(front_table(front, title=title))
        return
    out.print(title, highlight=False)
    for p in front.points:
        values = ", ".join(f"{n} {_fmt(p.values[n])}" + (f" {OBJECTIVES[n].unit}" if OBJECTIVES[n].unit else "")
                           for n in front.objectives)
        params = " ".join(f"{k}={_fmt(v) if isinstance(v, float) else v}" for k, v in p.params.items())
        flag = " CHANCE LEVEL (learnt nothing)" if p.chance_level else ""
        out.print(f"trial {p.trial_number} ({p.framework}): {values}{flag}", highlight=False)
        out.print(f"    {params}", highlight=False)


def _report(summary: "StudySummary", as_json: bool) -> None:
    if as_json:
        print_json(summary.to_dict())
    else:
        c = summary.counts
        print_front(summary.front, title=(
            f"Pareto front of {summary.study}: {len(summary.front.points)} points, hypervolume "
            f"{summary.front.hypervolume:.4f}"))
        out.print(f"{c.finished}/{summary.n_trials} trials finished (ok {c.complete}, pruned {c.pruned}, "
                  f"failed {c.failed}, retried {c.retried}, interrupted {c.interrupted}) with {summary.sampler} in "
                  f"{summary.elapsed_s:.0f} s; "
                  f"storage {summary.storage}", highlight=False)
        import shlex

        out.print("next: " + shlex.join(["advisor", "pareto", "--study", summary.study, "--storage", summary.storage,
                                         "--format", "html", "--out", f"{summary.study}-front.html"]), highlight=False)
        out.print("      " + shlex.join(["optuna-dashboard", summary.storage]) + "   (browse the study)",
                  highlight=False)
    for note in summary.notes:
        err.print(f"warning: {note}", highlight=False)
    if summary.interrupted:
        err.print(f"interrupted: finished trials are kept; run the same command to resume study {summary.study!r}",
                  highlight=False)
        raise typer.Exit(code=EXIT_INTERRUPTED)


def _warm_start(frameworks: list[str], space: Any, dataset: str, model: str | None, target: str,
                n: int, seed: int) -> list[dict[str, Any]]:
    if importlib.util.find_spec("advisor.recommend") is None:
        fail("warm start needs a trained surrogate")
    from advisor import recommend

    if not hasattr(recommend, "warm_start_params"):
        fail("warm start needs a trained surrogate")
    params: list[dict[str, Any]] = []
    combined = space.framework == "any"
    for fw in frameworks:
        for p in recommend.warm_start_params(fw, dataset, model, target, n, seed=seed):
            params.append({"framework": fw, **{f"{fw}.{k}": v for k, v in p.items()}} if combined else dict(p))
    return params


@app.command("tune")
@user_errors
def tune_command(
    framework: Annotated[Optional[str], typer.Option(help=f"Framework ({', '.join(FRAMEWORKS)}), a comma-separated list, or 'any' (every installed one): several make the framework a searched parameter. Default: torch, or the --space file's.")] = None,
    dataset: Annotated[str, typer.Option(help="Dataset: a registry name (mnist, digits, synthetic:28x28x1) or a .npz path.")] = "digits",
    model: Annotated[Optional[str], typer.Option(help="Model (mlp, lenet5, cifar_quick); default suits the dataset's input shape.")] = None,
    target: Annotated[Target, typer.Option(help="Hardware target: picks the <framework>-<target> search space.")] = Target.cpu,
    objectives: Annotated[str, typer.Option(help="Comma-separated subset of time, accuracy, memory.")] = "time,accuracy,memory",
    trials: Annotated[int, typer.Option("--trials", min=1, help="Finished trials the study should have (existing ones count).")] = 20,
    sampler: Annotated[SamplerName, typer.Option(help="Sampler; auto = nsga2 for 3 objectives and >= 200 trials, else tpe.")] = SamplerName.tpe,
    storage: StorageOption = DEFAULT_STORAGE,
    study: Annotated[Optional[str], typer.Option("--study", "--study-name", help="Study name; an existing study with the same settings is resumed. Default: <framework>-<dataset>-<model>-<target>.")] = None,
    space: Annotated[Optional[str], typer.Option("--space", help="A built-in space name or a YAML file instead of <framework>-<target>.")] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", min=0.001, help="Seconds after which no new trial starts.")] = None,
    trial_timeout: Annotated[Optional[float], typer.Option("--trial-timeout", min=0.001, help="Wall-time limit of one trial in seconds (status timeout).")] = None,
    memory_cap: Annotated[Optional[str], typer.Option("--memory-cap", help="Memory cap of one trial, e.g. 2GB (status oom).")] = None,
    train_samples: Annotated[Optional[int], typer.Option("--train-samples", min=1, help="Stratified subset of the training set.")] = None,
    test_samples: Annotated[Optional[int], typer.Option("--test-samples", min=1, help="Stratified subset of the test set.")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Folder holding the dataset's canonical files.")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Sampler seed and training seed.")] = 0,
    constraint: Annotated[Optional[list[str]], typer.Option("--constraint", help="A constraint such as accuracy>=0.98, memory<=2GB, time<=60 (repeatable).")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Local worker processes, each on its own CPUs.")] = 1,
    early_stopping: Annotated[bool, typer.Option("--early-stopping", help="Prune trials whose optimistic outcome is already dominated (docs/tuning.md).")] = False,
    warm_start: Annotated[bool, typer.Option("--warm-start", help="Enqueue the surrogate's predicted front first.")] = False,
    config_file: Annotated[Optional[Path], typer.Option("--config", help="Queue these configs as the study's first trials: a recommendation (every choice, best first), a choice, a trial result or a config JSON.")] = None,
    workdir: Annotated[Optional[Path], typer.Option("--workdir", help="Keep every trial's folder here.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Optuna's own log lines.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Tune a workload over a search space for time, accuracy and memory; show the Pareto front.

    Example: advisor tune --framework torch --dataset mnist --model lenet5 --target cpu --objectives time,accuracy,memory --trials 50 --sampler tpe --storage sqlite:///advisor.db --study mnist-torch

    Example: advisor recommend --dataset mnist --cpu --json > rec.json && advisor tune --framework torch --dataset mnist --config rec.json --trials 20
    """
    from advisor import datasets, models
    from advisor.pareto import parse_constraint, parse_objectives, parse_size_mb
    from advisor.records import Workload

    # Everything is validated before Optuna is imported or a process is spawned.
    if space is not None:
        from advisor.space import load_space

        space_fw = load_space(space).framework
        if framework is not None and framework != space_fw:
            fail(f"--framework {framework} does not match --space {space}, which is a {space_fw} space")
        framework = space_fw
    names = _frameworks(framework or "torch", target.value)
    parse_objectives(objectives)
    constraints = [parse_constraint(c).text for c in constraint or []]
    info = datasets.get_info(dataset)
    model_name = model or models.default_model_for(tuple(info.input_shape))
    models.param_count(models.get_model(model_name), tuple(info.input_shape), info.num_classes)
    workload = Workload(dataset=dataset, model=model_name, train_samples=train_samples, test_samples=test_samples,
                        data_dir=None if data_dir is None else str(data_dir), seed=seed)
    memory_mb = None if memory_cap is None else parse_size_mb(memory_cap, owner="advisor tune --memory-cap")
    study_name = study or f"{'any' if len(names) > 1 else names[0]}-{dataset}-{model_name}-{target.value}"
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)

    from advisor import tuning

    tuning.validate_study_name(study_name)
    tuning.validate_storage_url(storage)
    the_space = tuning.resolve_space(space=space, frameworks=names, target=target.value)
    warm = _warm_start(names, the_space, dataset, model, target.value, max(1, min(5, trials // 5)), seed) if warm_start else None
    if config_file is not None:  # queued first, before any warm-start point
        from advisor.cli._config_file import params_for_space, read_config_file

        queued = []
        entries = read_config_file(config_file)
        for entry in entries:
            try:
                params, notes = params_for_space(entry.config, the_space)
            except InvalidParameterError as exc:
                if len(entries) == 1:
                    raise
                err.print(f"warning: --config {entry.label} not queued: {exc}", highlight=False)
                continue
            queued.append(params)
            for note in notes:
                err.print(f"warning: --config {entry.label}: {note}", highlight=False)
            if entry.dataset not in (None, dataset) or entry.model not in (None, model_name):
                err.print(f"warning: --config {entry.label} was for {entry.model or model_name} on "
                          f"{entry.dataset or dataset}; this study trains {model_name} on {dataset}", highlight=False)
        if not queued:
            raise InvalidParameterError(f"--config {config_file}: no config in it fits space {the_space.name}")
        warm = queued + (warm or [])
    _quiet_optuna(verbose)
    with _Display(trials, study_name) as display:
        summary = tuning.run_study(
            study_name=study_name, workload=workload, storage=storage, space=the_space, target=target.value,
            objectives=objectives, n_trials=trials, timeout=timeout, sampler=sampler.value, seed=seed,
            constraints=constraints, wall_time_s=trial_timeout, memory_mb=memory_mb, workers=workers,
            early_stopping=early_stopping, warm_start_params=warm, workdir=workdir, progress=display)
        display(tuning.StudyProgress(study=summary.study, n_trials=summary.n_trials, counts=summary.counts,
                                     front_size=len(summary.front.points), hypervolume=summary.front.hypervolume))
    _report(summary, as_json)


@app.command("worker")
@user_errors
def worker_command(
    study: Annotated[str, typer.Option("--study", "--study-name", help="The study to join (created by advisor tune).")],
    storage: StorageOption = DEFAULT_STORAGE,
    cores: Annotated[Optional[str], typer.Option("--cores", help="CPUs for this worker, e.g. 0-3 or 0,2,4; default: all allowed.")] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", min=0.001, help="Seconds after which no new trial starts.")] = None,
    workdir: Annotated[Optional[Path], typer.Option("--workdir", help="Keep every trial's folder here.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Optuna's own log lines.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Join an existing study from this machine and run trials until its budget is reached.

    Example: advisor worker --study mnist-torch --storage postgresql://advisor@db-host/advisor
    """
    from advisor import tuning

    tuning.validate_study_name(study)
    tuning.require_existing(storage)  # a worker joins a study: it must not create an empty storage
    cpu_list = _parse_cores(cores) if cores is not None else None
    _quiet_optuna(verbose)
    progress: Callable[[Any], None] = lambda p: err.print(  # noqa: E731
        f"{p.last} · {p.counts.finished}/{p.n_trials} finished · front {p.front_size} · HV {p.hypervolume:.4f}",
        highlight=False)
    summary = tuning.run_worker(study_name=study, storage=storage, cores=cpu_list, timeout=timeout,
                                workdir=workdir, progress=progress)
    _report(summary, as_json)


def _parse_cores(text: str) -> list[int]:
    cpus: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            cpus.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        cpus = []
    if not cpus or any(c < 0 for c in cpus) or len(set(cpus)) != len(cpus):
        raise InvalidParameterError(f"The '--cores' parameter of advisor worker must be CPU numbers such as "
                                    f"0-3 or 0,2,4. Got {text!r} instead.")
    return cpus


studies_app = typer.Typer(help="List the studies of a storage.\n\nExample: advisor studies list --storage sqlite:///advisor.db",
                          no_args_is_help=True)
app.add_typer(studies_app, name="studies")


@studies_app.command("list")
@user_errors
def studies_list_command(storage: StorageOption = DEFAULT_STORAGE, as_json: JsonOption = False) -> None:
    """List the studies in a storage with their trial counts.

    Example: advisor studies list --storage postgresql://advisor@db-host/advisor --json
    """
    from advisor import tuning

    infos = tuning.list_studies(tuning.require_existing(storage))
    if as_json:
        print_json([i.to_dict() for i in infos])
        return
    from advisor.cli._common import narrow

    if narrow():
        out.print(f"Studies in {tuning.mask_url(storage)}", highlight=False)
        for i in infos:
            c = i.counts
            budget = f"{c.finished}/{i.n_trials}" if i.n_trials else str(c.finished)
            what = f"{i.model} on {i.dataset}, space {i.space}" if i.advisor else "not an advisor study"
            out.print(f"{i.name}: {what}; objectives {','.join(i.objectives)}", highlight=False)
            out.print(f"    finished {budget} (ok {c.complete}, pruned {c.pruned}, failed {c.failed}), running "
                      f"{c.running}; created {i.created}", highlight=False)
        return
    table = Table(title=f"Studies in {tuning.mask_url(storage)}")
    for column in ("study", "workload", "space", "objectives", "finished", "ok", "pruned", "failed", "running", "created"):
        table.add_column(column, justify="right" if column in ("finished", "ok", "pruned", "failed", "running") else "left")
    for i in infos:
        c = i.counts
        budget = f"{c.finished}/{i.n_trials}" if i.n_trials else str(c.finished)
        table.add_row(i.name, f"{i.model} on {i.dataset}" if i.advisor else "(not an advisor study)", i.space,
                      ",".join(i.objectives), budget, str(c.complete), str(c.pruned), str(c.failed), str(c.running),
                      i.created)
    out.print(table)
