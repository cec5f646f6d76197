"""Tuning: the early-stopping rule, samplers, storage checks, and real studies on digits."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from advisor.cli import app
from advisor.errors import InvalidParameterError, MissingDependencyError, StorageError
from advisor.pareto import OBJECTIVES, dominates, parse_constraint
from advisor.records import Workload
from advisor.tuning import (
    EarlyStopping, StudySpec, load_trials, make_sampler, mask_url, optimistic_point, prune_decision,
    resolve_sampler, run_study, split_cores, validate_storage_url, validate_study_name,
)
from tests.conftest import requires

OBJ3 = ("time", "accuracy", "memory")
DIGITS = Workload(dataset="digits", model="mlp", train_samples=200, test_samples=100)


def tiny_space(path: Path, framework: str, *, epochs: int = 2, extra: str = "") -> Path:
    path.write_text(
        f"framework: {framework}\ntarget: cpu\nparams:\n"
        "  batch_size: {type: int, low: 16, high: 128, log: true}\n"
        "  learning_rate: {type: float, low: 1.0e-3, high: 0.1, log: true}\n"
        f"  epochs: {{type: int, low: 1, high: {epochs}}}\n"
        "  optimizer: {type: categorical, choices: [sgd, adam]}\n" + extra +
        "fixed:\n  threads: 1\n")
    return path


# ---------------------------------------------------------------------------- early stopping


def _point(accs: list[float], *, epochs_total: int = 10, peak: float | None = 200.0) -> dict[str, float]:
    n = len(accs)
    return optimistic_point(epochs_done=n, epochs_total=epochs_total, train_time_s=1.0 * n,
                            epoch_times=[1.2] + [1.0] * (n - 1), accuracies=accs, peak_memory_mb=peak,
                            settings=EarlyStopping())


def test_optimistic_point_bounds() -> None:
    p = _point([0.10, 0.12])
    # time: 2 s so far + 8 remaining epochs x fastest epoch (1 s) x (1 - 0.1)
    assert p["time"] == pytest.approx(2.0 + 8 * 1.0 * 0.9)
    # accuracy: best 0.12 + 8 x largest gain after epoch 1 (0.02)
    assert p["accuracy"] == pytest.approx(0.12 + 8 * 0.02)
    assert p["memory"] == 200.0
    assert _point([0.10])["accuracy"] == 1.0  # nothing known after one epoch
    assert _point([0.5, 0.5])["accuracy"] == pytest.approx(0.5 + 8 * 0.005)  # flat: min_gain
    assert _point([0.5, 0.9])["accuracy"] == 1.0  # capped
    assert _point([0.1, 0.2], peak=None)["memory"] == 0.0


def test_a_compiled_trial_pays_its_warm_up_in_the_time_objective_and_constraint() -> None:
    """torch.compile compiles before the timed epochs, so ``train_time_s`` leaves the warm-up out
    (XLA's falls in the first epoch); a study's time objective, and a time constraint, count it."""
    from advisor._tuning._study import _objective_values
    from advisor.records import Config
    from tests._knowledge_rows import make_result

    plain = make_result(Config(framework="torch", epochs=2), "digits")
    compiled = make_result(Config(framework="torch", epochs=2, compile=True), "digits")
    compiled.extra["compile_time_s"] = 21.5
    assert _objective_values(plain, ("time", "accuracy")) == [plain.train_time_s, plain.test_accuracy]
    time, accuracy = _objective_values(compiled, ("time", "accuracy"))  # type: ignore[misc]
    assert time == pytest.approx(compiled.train_time_s + 21.5) and accuracy == compiled.test_accuracy
    assert compiled.train_time_with_compile_s == pytest.approx(time)
    assert parse_constraint("time<=20").violation(time) > 0  # over the bound once the warm-up counts
    assert parse_constraint("time<=20").satisfied(plain.train_time_s)  # type: ignore[arg-type]


def test_prune_decision_on_synthetic_fronts() -> None:
    settings = EarlyStopping(min_completed=3)
    bad = _point([0.10, 0.12])  # time >= 9.2, accuracy <= 0.28, memory >= 200
    fast_good = {"time": 5.0, "accuracy": 0.9, "memory": 150.0}
    slow_good = {"time": 20.0, "accuracy": 0.9, "memory": 150.0}
    reason = prune_decision(bad, objectives=OBJ3, front=[slow_good, fast_good], n_completed=3, settings=settings)
    assert reason is not None and "dominated by a completed trial (time=5" in reason
    # a front that is slower than the trial's optimistic time does not dominate it
    assert prune_decision(bad, objectives=OBJ3, front=[slow_good], n_completed=3, settings=settings) is None
    # too few completed trials: no dominance pruning yet
    assert prune_decision(bad, objectives=OBJ3, front=[fast_good], n_completed=2, settings=settings) is None
    # memory not reported per epoch (bound 0): nothing dominates on memory
    unknown = _point([0.10, 0.12], peak=None)
    assert prune_decision(unknown, objectives=OBJ3, front=[fast_good], n_completed=3, settings=settings) is None
    assert prune_decision(unknown, objectives=("time", "accuracy"), front=[fast_good], n_completed=3,
                          settings=settings) is not None
    # after one epoch the accuracy bound is 1: a 0.9 front point cannot dominate it
    early = _point([0.10])
    assert prune_decision(early, objectives=OBJ3, front=[fast_good], n_completed=3, settings=settings) is None


def test_prune_decision_on_constraints() -> None:
    settings = EarlyStopping(min_completed=100)
    bad = _point([0.10, 0.12])
    acc = [parse_constraint("accuracy>=0.9")]
    assert "cannot satisfy accuracy>=0.9" in prune_decision(
        bad, objectives=OBJ3, front=[], n_completed=0, constraints=acc, settings=settings)
    assert prune_decision(bad, objectives=OBJ3, front=[], n_completed=0,
                          constraints=[parse_constraint("time<=5")], settings=settings) is not None
    assert prune_decision(bad, objectives=OBJ3, front=[], n_completed=0,
                          constraints=[parse_constraint("time<=60")], settings=settings) is None


def test_early_stopping_settings_are_validated() -> None:
    with pytest.raises(InvalidParameterError, match="'slack' parameter of EarlyStopping"):
        EarlyStopping(slack=1.5)
    with pytest.raises(InvalidParameterError, match="'min_completed'"):
        EarlyStopping(min_completed=0)


# ------------------------------------------------------------------- samplers, storage, cores


def test_sampler_resolution() -> None:
    import optuna

    assert resolve_sampler("auto", n_objectives=3, n_trials=500) == "nsga2"
    assert resolve_sampler("auto", n_objectives=3, n_trials=50) == "tpe"
    assert resolve_sampler("auto", n_objectives=2, n_trials=500) == "tpe"
    assert isinstance(make_sampler("nsga2", n_objectives=3, n_trials=100, seed=0, parallel=False),
                      optuna.samplers.NSGAIISampler)
    assert isinstance(make_sampler("random", n_objectives=1, n_trials=1, seed=0, parallel=False),
                      optuna.samplers.RandomSampler)
    try:
        gp = make_sampler("gp", n_objectives=2, n_trials=10, seed=0, parallel=False)
        assert isinstance(gp, optuna.samplers.GPSampler)
    except MissingDependencyError as exc:  # torch or scipy missing here
        assert "gp sampler needs" in str(exc)
    with pytest.raises(InvalidParameterError, match="'sampler' parameter"):
        resolve_sampler("cmaes", n_objectives=2, n_trials=10)


def test_storage_and_study_name_checks(tmp_path: Path) -> None:
    assert mask_url("postgresql://bob:s3cret@db:5432/x") == "postgresql://bob:***@db:5432/x"
    with pytest.raises(InvalidParameterError) as info:
        validate_storage_url("mysql://bob:s3cret@db/x")
    assert "s3cret" not in str(info.value) and "sqlite:///advisor.db" in str(info.value)
    with pytest.raises(InvalidParameterError):
        validate_storage_url("advisor.db")
    with pytest.raises(StorageError, match="does not exist"):
        validate_storage_url(f"sqlite:///{tmp_path}/missing/x.db")
    assert validate_study_name("a;b $(touch x) | 'q'") == "a;b $(touch x) | 'q'"
    for bad in ("", "x" * 129, "two\nlines", "tab\there"):
        with pytest.raises(InvalidParameterError, match="printable text of 1 to 128"):
            validate_study_name(bad)


def test_split_cores_is_disjoint_and_complete() -> None:
    chunks = split_cores([3, 0, 1, 2, 4], 2)
    assert chunks == [[0, 1, 2], [3, 4]]
    assert sorted(itertools.chain(*split_cores(list(range(7)), 3))) == list(range(7))
    with pytest.raises(InvalidParameterError, match="'workers' parameter"):
        split_cores([0, 1], 3)


def test_cli_rejects_bad_input_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    db = f"sqlite:///{tmp_path}/a.db"
    cases = [
        (["tune", "--constraint", "accuracy=>0.9", "--storage", db], "is not understood"),
        (["tune", "--objectives", "speed", "--storage", db], "'objectives' parameter"),
        (["tune", "--study", "x" * 200, "--storage", db], "printable text of 1 to 128"),
        (["tune", "--storage", "oracle://db"], "'storage' parameter"),
        (["tune", "--framework", "caffe", "--storage", db], "'--framework' parameter"),
        (["tune", "--memory-cap", "lots", "--storage", db], "a size such as 512MB"),
        # Read-only commands and workers never create the storage file they are pointed at.
        (["pareto", "--study", "nope", "--storage", db], "No storage at"),
        (["worker", "--study", "nope", "--storage", db], "No storage at"),
    ]
    for argv, fragment in cases:
        result = runner.invoke(app, argv)
        assert result.exit_code == 1, (argv, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], (argv, result.output)
    assert not (tmp_path / "a.db").exists()
    import optuna

    optuna.create_study(study_name="other", storage=db)  # an existing storage without the study
    for command in ("pareto", "worker"):
        result = runner.invoke(app, [command, "--study", "nope", "--storage", db])
        assert result.exit_code == 1 and "No study named 'nope'" in result.output, result.output


# ------------------------------------------------------------------------ real studies (digits)


def _advisor(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True,
                          timeout=timeout)


@requires("torch")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two workers need two CPUs")
def test_cli_tune_twelve_torch_trials_two_workers_then_export(tmp_path: Path) -> None:
    space = tiny_space(tmp_path / "torch-tiny.yaml", "torch")
    db = f"sqlite:///{tmp_path}/advisor.db"
    study = "digits;$(touch pwned) | torch"  # shell metacharacters travel only in argv lists
    run = _advisor("tune", "--framework", "torch", "--dataset", "digits", "--model", "mlp",
                   "--objectives", "time,accuracy,memory", "--trials", "12", "--sampler", "tpe",
                   "--storage", db, "--study", study, "--space", str(space), "--train-samples", "200",
                   "--test-samples", "100", "--workers", "2", "--seed", "1", "--json", timeout=400)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not Path("pwned").exists() and not (tmp_path / "pwned").exists()
    summary = json.loads(run.stdout)
    assert summary["counts"]["finished"] == 12 and summary["workers"] == 2

    spec, trials = load_trials(study, db)
    assert isinstance(spec, StudySpec) and spec.objectives == OBJ3
    assert len(trials) == 12  # the budget holds across workers: none extra
    workers = {t.user_attrs["advisor.worker"] for t in trials}
    assert workers == {"local-0", "local-1"}
    affinity = sorted(os.sched_getaffinity(0))
    chunks = dict(zip(["local-0", "local-1"], split_cores(affinity, 2)))
    for t in trials:
        result = t.user_attrs["advisor.result"]
        assert result["config"]["framework"] == "torch" and result["study"] == study
        # each worker's trials ran on that worker's own CPUs only
        assert set(result["cores_granted"]) <= set(chunks[t.user_attrs["advisor.worker"]])
        if t.state.name == "COMPLETE":
            assert list(t.values) == [result["train_time_s"], result["test_accuracy"], result["peak_memory_mb"]]

    run = _advisor("pareto", "--study", study, "--storage", db, "--format", "json")
    assert run.returncode == 0, run.stderr
    front = json.loads(run.stdout)
    points = [[p["values"][n] for n in OBJ3] for p in front["front"]]
    assert points and front["hypervolume"] > 0
    directions = [OBJECTIVES[n].direction for n in OBJ3]
    for a, b in itertools.permutations(points, 2):
        assert not dominates(a, b, directions)
    complete = [list(t.values) for t in trials if t.state.name == "COMPLETE"]
    for p in points:  # the front is non-dominated among all complete trials, not only itself
        assert not any(dominates(q, p, directions) for q in complete)

    runner = CliRunner()
    for fmt in ("csv", "html", "png"):
        target = tmp_path / f"front.{fmt}"
        result = runner.invoke(app, ["pareto", "--study", study, "--storage", db, "--format", fmt,
                                     "--out", str(target), "--ref", "time=600,accuracy=0,memory=4096"])
        assert result.exit_code == 0, result.output
        assert target.stat().st_size > 0
    assert (tmp_path / "front.csv").read_text().count("\n") == len(points) + 1
    # --json is --format json, as on every command that prints results
    result = runner.invoke(app, ["pareto", "--study", study, "--storage", db, "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == front
    result = runner.invoke(app, ["pareto", "--study", study, "--storage", db, "--json", "--format", "csv"])
    assert result.exit_code == 1 and "Give --json or --format csv, not both" in result.stderr
    result = runner.invoke(app, ["studies", "list", "--storage", db, "--json"])
    listed = json.loads(result.stdout)
    assert [(s["name"], s["counts"]["finished"], s["n_trials"]) for s in listed] == [(study, 12, 12)]


@requires("torch")
def test_framework_union_explores_two_frameworks(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/any.db"
    summary = run_study(study_name="any", workload=Workload(dataset="digits", model="mlp", train_samples=150,
                                                           test_samples=60),
                        storage=db, frameworks=["sklearn", "torch"], objectives="time,accuracy",
                        n_trials=4, seed=3, sampler="random")
    assert summary.counts.finished == 4
    _, trials = load_trials("any", db)
    frameworks = {t.params["framework"] for t in trials}
    assert frameworks == {"sklearn", "torch"}
    for t in trials:
        fw = t.params["framework"]
        assert all(k == "framework" or k.startswith(fw + ".") for k in t.params)
        assert t.user_attrs["advisor.result"]["config"]["framework"] == fw


def test_failed_trial_is_recorded_and_the_study_goes_on(tmp_path: Path) -> None:
    space = tiny_space(tmp_path / "sk.yaml", "sklearn", extra="").read_text()
    (tmp_path / "sk.yaml").write_text(space.replace("high: 0.1, log: true", "high: 10.0, log: true"))
    db = f"sqlite:///{tmp_path}/fail.db"
    diverge = {"batch_size": 16, "learning_rate": 10.0, "epochs": 2, "optimizer": "sgd"}
    fine = {"batch_size": 32, "learning_rate": 0.01, "epochs": 2, "optimizer": "adam"}
    summary = run_study(study_name="fails", workload=DIGITS, storage=db, space=str(tmp_path / "sk.yaml"),
                        objectives="time,accuracy", n_trials=3, warm_start_params=[diverge, fine],
                        constraints=["accuracy>=0.5"])
    assert summary.counts.finished == 3 and summary.counts.failed >= 1 and summary.counts.complete >= 1
    _, trials = load_trials("fails", db)
    first = trials[0]
    assert first.params == diverge and first.state.name == "FAIL"
    assert first.user_attrs["advisor.status"] == "diverged"
    assert first.user_attrs["advisor.result"]["status"] == "diverged"
    second = trials[1]
    assert second.state.name == "COMPLETE" and second.params == fine
    assert second.constraints == {"accuracy>=0.5": pytest.approx((0.5 - second.values[1]) / 0.5)}


def test_early_stopping_prunes_a_dominated_trial_and_keeps_its_curve(tmp_path: Path) -> None:
    tiny_space(tmp_path / "sk.yaml", "sklearn", epochs=10)
    good = {"batch_size": 32, "learning_rate": 0.01, "epochs": 2, "optimizer": "adam"}
    bad = {"batch_size": 16, "learning_rate": 0.001, "epochs": 10, "optimizer": "sgd"}
    db = f"sqlite:///{tmp_path}/prune.db"
    # One objective (accuracy) keeps the test free of timing: the bad trial's optimistic final
    # accuracy (about 0.2) is dominated by the good trial's (about 0.9).
    summary = run_study(study_name="prune", workload=DIGITS, storage=db, space=str(tmp_path / "sk.yaml"),
                        objectives="accuracy", n_trials=2, warm_start_params=[good, bad],
                        early_stopping=EarlyStopping(min_completed=1))
    assert (summary.counts.complete, summary.counts.pruned) == (1, 1)
    _, trials = load_trials("prune", db)
    pruned = trials[1]
    assert pruned.state.name == "PRUNED" and pruned.params == bad
    result = pruned.user_attrs["advisor.result"]
    assert result["status"] == "pruned"
    assert 2 <= len(result["accuracy_curve"]) < 10 == result["config"]["epochs"]
    assert "dominated by a completed trial" in pruned.user_attrs["advisor.pruned_because"]
    assert trials[0].values[0] > max(result["accuracy_curve"])


def test_sigterm_keeps_finished_trials_and_the_study_resumes(tmp_path: Path) -> None:
    import optuna

    # Trials long enough (tens of epochs) that a signal sent while the child trains lands in the
    # training, not in the few storage writes that follow it (where it is deferred until they end).
    space = tiny_space(tmp_path / "sk.yaml", "sklearn", epochs=60)
    space.write_text(space.read_text().replace("low: 1, high: 60", "low: 40, high: 60"))
    db = f"sqlite:///{tmp_path}/stop.db"
    base = ["tune", "--dataset", "digits", "--model", "mlp", "--space", str(space), "--objectives",
            "time,accuracy", "--storage", db, "--study", "stop", "--train-samples", "1400",
            "--test-samples", "300"]
    proc = subprocess.Popen([sys.executable, "-m", "advisor", *base, "--trials", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                trials = optuna.load_study(study_name="stop", storage=db).get_trials(deepcopy=False)
            except (KeyError, Exception):
                continue
            states = [t.state.name for t in trials]
            # the running trial's child has been spawned ("advisor.started"): it is training now
            if "COMPLETE" in states and states[-1] == "RUNNING" and "advisor.started" in trials[-1].user_attrs:
                break
        else:
            proc.kill()
            pytest.fail(f"no trial was seen training after a finished one within 120 s: {proc.communicate()}")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-2000:]
    assert "run the same command to resume" in stderr
    trials = optuna.load_study(study_name="stop", storage=db).get_trials(deepcopy=False)
    assert trials[-1].state.name == "FAIL" and "interrupted" in trials[-1].user_attrs["advisor.error"]
    assert trials[-1].user_attrs["advisor.status"] == "interrupted"
    assert all(t.state.name != "RUNNING" for t in trials)
    interrupted = sum(t.user_attrs.get("advisor.status") == "interrupted" for t in trials)
    kept = len(trials) - interrupted  # an interrupted trial is kept for the record but not counted
    assert kept >= 1 and sum(t.state.name == "COMPLETE" for t in trials) >= 1
    # resume: the same study counts what it has, and runs only the missing trials
    resumed = _advisor(*base, "--trials", str(kept + 1), "--json")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    counts = json.loads(resumed.stdout)["counts"]
    assert counts["finished"] == kept + 1 and counts["interrupted"] == interrupted
    assert len(optuna.load_study(study_name="stop", storage=db).trials) == kept + 1 + interrupted


def test_an_interrupt_during_a_storage_write_in_a_trial_is_raised_after_the_write() -> None:
    """Inside a trial's run an interrupt is raised at once, except while the trial's progress is
    written to the storage: there it waits for the write to finish (then it is raised)."""
    from advisor._tuning._study import _deferred_interrupts, _interruptible, _shielded

    steps: list[str] = []
    with _deferred_interrupts():
        with pytest.raises(KeyboardInterrupt, match="while the trial's progress was recorded"):
            with _interruptible():
                with _shielded():
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.05)  # the handler runs between bytecodes; give it the chance
                    steps.append("write finished")
                steps.append("not reached")
        assert steps == ["write finished"]
    with _deferred_interrupts():  # a fresh loop: nothing pending
        with pytest.raises(KeyboardInterrupt, match="signal"):  # outside a shield: at once
            with _interruptible():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
                steps.append("not reached")
    assert steps == ["write finished"]


def test_an_interrupt_that_lands_in_a_finaliser_is_delivered_again_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ^C that Python handles while it runs a finaliser (garbage collection, a weakref callback)
    cannot propagate there: it must neither be printed as "Exception ignored" nor be lost."""
    from advisor._tuning._study import _deferred_interrupts, _interruptible, sigterm_as_interrupt

    reported: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    ran: list[str] = []

    class Finalised:
        def __init__(self, signum: int) -> None:
            self.signum = signum

        def __del__(self) -> None:
            os.kill(os.getpid(), self.signum)
            end = time.monotonic() + 0.2
            while time.monotonic() < end:  # the handler runs here, inside the finaliser
                pass
            ran.append("finaliser not interrupted")

    with _deferred_interrupts():
        with pytest.raises(KeyboardInterrupt, match="signal"):
            with _interruptible():
                Finalised(signal.SIGINT)  # finalised at once: the interrupt raised inside __del__ is swallowed
                ran.append("after the finaliser")
                time.sleep(5)  # delivered again: raised here
                ran.append("not reached")
    assert ran == ["after the finaliser"]
    # a worker told to stop (SIGTERM) outside the trial loop: the same
    with sigterm_as_interrupt():
        with pytest.raises(KeyboardInterrupt, match="signal"):
            Finalised(signal.SIGTERM)
            ran.append("after the second finaliser")
            time.sleep(5)
            ran.append("not reached")
    assert ran == ["after the finaliser", "after the second finaliser"]
    assert reported == [], [r.exc_value for r in reported]


def test_an_interrupt_swallowed_inside_a_trial_still_stops_the_worker_loop() -> None:
    from advisor._tuning._study import _INTERRUPTS, _deferred_interrupts, _interruptible

    with _deferred_interrupts():
        with _interruptible():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises here
                raise AssertionError("the signal did not interrupt the trial")
            except KeyboardInterrupt:
                pass  # as a trial's code that catches everything would
        assert _INTERRUPTS.pending  # so the loop returns at its next safe point
