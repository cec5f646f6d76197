"""The measurement-study scripts (benchmarks/study): plans, resumable runs into a storage, report.

The runs are real harness trials on tiny settings (scikit-learn MLP, 300 digits, 1 epoch): three in
all, shared by the tests through one module-scoped storage.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks" / "study"))

import defaults  # noqa: E402
import joint  # noqa: E402
import knobs  # noqa: E402
import profiles  # noqa: E402
import report  # noqa: E402
import targets  # noqa: E402

from advisor.records import Config, EpochRecord, TrialResult, Workload  # noqa: E402

TINY = ["--dataset", "digits", "--model", "mlp", "--train-samples", "300", "--test-samples", "0", "--epochs", "1",
        "--cores", "0", "--trial-timeout", "300"]


def test_defaults_plan_covers_every_preset_and_marks_onnxruntime_momentum_not_applicable() -> None:
    cells = defaults.plan(repeats=3, allow_slow=True)
    assert len(cells) == 8 * 4
    by_name = {c.study: c for c in cells}
    assert "defaults-tensorflow-cifar10-torch" in by_name
    na = sorted(c.study for c in cells if c.not_applicable)
    assert na == ["defaults-caffe-cifar10-onnxruntime", "defaults-caffe-mnist-onnxruntime",
                  "defaults-theano-cifar10-onnxruntime"]
    assert all(not c.configs and "momentum" in c.not_applicable for c in cells if c.not_applicable)
    ok = by_name["defaults-torch-mnist-onnxruntime"]
    assert [c.seed for c in ok.configs] == [0, 1, 2] and {c.batch_size for c in ok.configs} == {10}
    # 2,560 stock epochs are capped; a scale shortens them first
    assert by_name["defaults-tensorflow-cifar10-torch"].configs[0].epochs == 20
    scaled = defaults.plan(presets=["caffe-mnist"], frameworks=["torch"], epochs_scale=0.5, max_epochs=100)
    assert scaled[0].configs[0].epochs == 6  # ceil(10.67 x 0.5)
    # scikit-learn's numpy conv engine is skipped (with the reason) on the full datasets by default
    skipped = defaults.plan(presets=["torch-mnist"], frameworks=["sklearn"])[0]
    assert skipped.not_applicable.startswith("skipped:") and not skipped.configs


def test_knob_plan_varies_one_knob_from_the_base() -> None:
    cells = knobs.plan(frameworks=["torch", "onnxruntime"], datasets=["mnist"], repeats=3, cores=2)
    names = [c.study for c in cells]
    assert "knob-torch-mnist-onednn" in names and "knob-onnxruntime-mnist-graph_optimization" in names
    assert "knob-onnxruntime-mnist-onednn" not in names
    classic = ("batch_size", "learning_rate", "epochs", "threads", "onednn")
    assert sum(len(c.configs) for c in cells
               if c.study.startswith("knob-torch") and c.attrs["study.knob"] in classic) == (6 + 6 + 5 + 2 + 2) * 3
    batch = next(c for c in cells if c.study == "knob-torch-mnist-batch_size")
    base = knobs.base_config("torch", "mnist", cores=2)
    assert batch.workload.train_samples == 5000 and batch.workload.test_samples == 2000
    for cfg in batch.configs:  # only batch size and seed differ from the base
        assert cfg.to_dict() | {"batch_size": 64, "seed": 0} == base.to_dict()
    assert [c.seed for c in batch.configs[:7]] == [0] * 6 + [1]  # repeats outermost
    par = knobs.vary(knobs.base_config("onnxruntime", "mnist", cores=4), "execution_mode", "parallel", cores=4)
    assert par.inter_op_threads == 2


def test_knob_plan_sweeps_the_recipe_knobs_where_they_apply() -> None:
    from advisor.knobs import get_knob

    cells = {c.study: c for c in knobs.plan(frameworks=["torch", "onnxruntime"], datasets=["mnist", "cifar10"],
                                             repeats=1, cores=1)}
    for knob in ("schedule", "label_smoothing", "augment_translate", "channels_last", "bfloat16", "optimizer",
                 "weight_decay"):
        assert f"knob-torch-cifar10-{knob}" in cells
    # flipping digits changes their labels: refused on MNIST, swept on CIFAR-10
    assert "knob-torch-mnist-augment_flip" not in cells and "knob-torch-cifar10-augment_flip" in cells
    # a knob the framework's runtime does not honour is not swept there
    assert get_knob("label_smoothing").frameworks is not None and "onnxruntime" not in get_knob("label_smoothing").frameworks
    assert "knob-onnxruntime-cifar10-label_smoothing" not in cells
    schedules = [c.schedule for c in cells["knob-torch-cifar10-schedule"].configs]
    assert schedules == ["constant", "step", "cosine", "onecycle"]
    momentum = [c for c in cells["knob-torch-cifar10-optimizer"].configs if c.optimizer == "momentum"]
    assert momentum and all(c.momentum == 0.9 for c in momentum)
    # every swept value is one the framework's Config accepts
    for cell in cells.values():
        assert len({getattr(c, cell.attrs["study.knob"]) for c in cell.configs}) >= 2


def test_a_preset_on_another_dataset_is_its_own_study() -> None:
    cells = defaults.plan(presets=["caffe-mnist"], frameworks=["torch"], dataset="fashion-mnist")
    assert [c.study for c in cells] == ["defaults-caffe-mnist-on-fashion-mnist-torch"]
    assert cells[0].workload.dataset == "fashion-mnist" and cells[0].attrs["study.dataset"] == "fashion-mnist"
    assert defaults.plan(presets=["caffe-mnist"], frameworks=["torch"])[0].study == "defaults-caffe-mnist-torch"


def test_profile_plan() -> None:
    cells = profiles.plan(frameworks=["torch", "sklearn"], datasets=["mnist", "cifar10"], cores=2)
    assert [c.study for c in cells] == ["profile-torch-mnist", "profile-sklearn-mnist", "profile-torch-cifar10",
                                        "profile-sklearn-cifar10"]
    assert [c.batch_size for c in cells[0].configs] == list(profiles.BATCH_SIZES)


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("study") / "study.db"
    return f"sqlite:///{path}"


def _trials(storage: str, name: str) -> list:
    return defaults.open_study(storage, name).get_trials(deepcopy=False)


def test_defaults_runs_resume_without_duplicates(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--storage", storage, "--presets", "torch-mnist", "--frameworks", "sklearn", "--repeats", "2", *TINY]
    assert defaults.main([*args, "--max-trials", "1"]) == 0
    first = _trials(storage, "defaults-torch-mnist-on-digits-sklearn")
    assert len(first) == 1
    assert defaults.main([*args, "--max-trials", "2"]) == 0  # the plan holds 2: only one is left
    trials = _trials(storage, "defaults-torch-mnist-on-digits-sklearn")
    assert len(trials) == 2
    results = [TrialResult.from_dict(t.user_attrs["advisor.result"]) for t in trials]
    assert sorted(r.config.seed for r in results) == [0, 1]
    assert len({t.user_attrs[defaults.KEY_ATTR] for t in trials}) == 2
    assert all(r.status == "ok" and r.config.batch_size == 10 and r.config.learning_rate == 0.05 for r in results)
    assert all(r.workload.dataset == "digits" and r.train_samples == 300 for r in results)
    # the knobs are Optuna parameters: optuna-dashboard shows and slices the study by them
    assert all(t.params["batch_size"] == 10 and t.params["learning_rate"] == 0.05 and t.params["epochs"] == 1
               and t.params["optimizer"] == r.config.optimizer for t, r in zip(trials, results))
    assert defaults.main([*args, "--dry-run"]) == 0
    assert "2 trials (0 to run)" in capsys.readouterr().out
    # a not-applicable cell is recorded as such, with no trial
    assert defaults.main(["--storage", storage, "--presets", "caffe-mnist", "--frameworks", "onnxruntime", *TINY]) == 0
    study = defaults.open_study(storage, "defaults-caffe-mnist-on-digits-onnxruntime")
    assert "momentum" in study.user_attrs[defaults.NOT_APPLICABLE_ATTR] and not study.get_trials()


def test_knobs_run_and_resume_count(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--storage", storage, "--frameworks", "sklearn", "--knobs", "epochs", "--repeats", "1", *TINY]
    assert knobs.main([*args, "--max-trials", "1"]) == 0
    trials = _trials(storage, "knob-sklearn-digits-epochs")
    assert len(trials) == 1
    result = TrialResult.from_dict(trials[0].user_attrs["advisor.result"])
    assert result.config.epochs == 1 and result.config.optimizer == "adam" and result.epochs_completed == 1
    assert knobs.main([*args, "--dry-run"]) == 0
    assert "knob-sklearn-digits-epochs: 2 trials (1 to run)" in capsys.readouterr().out


def test_report_renders_from_the_storage(storage: str, tmp_path: Path) -> None:
    out = tmp_path / "study.md"
    assert report.main(["--storage", storage, "--knowledge", "", "--out", str(out)]) == 0
    text = out.read_text()
    for heading in ("## 1. Do framework defaults transfer?", "## 2. One knob at a time",
                    "## 3. Joint tuning against the best single-knob change", "## 4. Resource profiles",
                    "## 5. Against the seed study", "## 6. Targets", "## 7. Knowledge base"):
        assert heading in text
    defaults_part = text.split("## 1.")[1].split("## 2.")[0]
    assert "| torch-mnist on digits | sklearn |" in defaults_part and "2 ok" in defaults_part
    assert "| caffe-mnist on digits | onnxruntime | n/a |" in defaults_part
    profiles_part = text.split("## 4.")[1].split("## 5.")[0]
    assert "not yet measured" in profiles_part
    seed_part = text.split("## 5.")[1].split("## 6.")[0]
    assert seed_part.count("not yet measured") == 16  # digits trials say nothing about MNIST or CIFAR-10
    assert (tmp_path / "study" / "defaults.png").stat().st_size > 1000
    assert (tmp_path / "study" / "knobs-sklearn-digits.png").exists()


def _result(i: int, config: Config, curve: list[tuple[float, float]]) -> TrialResult:
    epochs = tuple(EpochRecord(epoch=k + 1, train_time_s=t, epoch_time_s=t, loss=0.1, test_accuracy=a, eval_time_s=0.0)
                   for k, (t, a) in enumerate(curve))
    return TrialResult(trial_id=f"t{i}", status="ok", workload=Workload(dataset="mnist", model="lenet5"),
                       config=config, epochs=epochs, train_time_s=curve[-1][0], test_accuracy=curve[-1][1],
                       peak_memory_mb=100.0)


def test_compare_finds_the_fastest_single_knob_change_and_joint_trial() -> None:
    base = knobs.base_config("torch", "mnist", cores=1)
    big = dataclasses.replace(base, batch_size=256)
    knob_study = defaults.StudyData(
        "knob-torch-mnist-batch_size",
        {"study.kind": "knob", "study.framework": "torch", "study.dataset": "mnist", "study.knob": "batch_size",
         "study.base": base.to_dict()},
        [_result(0, base, [(10, 0.95), (20, 0.97)]), _result(1, base, [(12, 0.96), (24, 0.97)]),
         _result(2, big, [(4, 0.97), (8, 0.975)]), _result(3, big, [(5, 0.96), (10, 0.975)])], [{}] * 4)
    joint_study = defaults.StudyData("joint-torch-mnist", {}, [_result(4, base, [(3, 0.98)]),
                                                               _result(5, base, [(1, 0.5)])], [{}] * 2)
    c = joint.compare({s.name: s for s in (knob_study, joint_study)}, "torch", "mnist")
    assert c.base_accuracy == 0.97
    assert c.best_knob_to_base.label == "batch_size=256"
    assert c.best_knob_to_base.median_time_to(0.97) == 4.0  # lower median of 4 and 10 (its second run got there at 10)
    assert c.base.median_time_to(0.975) == math.inf  # neither base run reached it
    assert joint.joint_winner(c).trial_id == "t4"
    assert c.hypervolume_joint > 0 and c.hypervolume_knobs > 0


def test_targets_pick_the_candidate_fastest_to_the_target_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["torch-adam-b64-lr2e-3", "torch-adam-b128-lr3e-3", "tensorflow-adam-b128-lr2e-3"]
    cfg = {n: dataclasses.replace(targets.CANDIDATES["mnist"][n][0], seed=0) for n in names}
    results = [_result(0, cfg[names[0]], [(7, 0.98), (14, 0.991)]),
               _result(1, cfg[names[1]], [(6, 0.985), (12, 0.989), (18, 0.992)])]
    assert targets.pick_best("mnist", names, results) is None  # the TensorFlow candidate is not screened yet
    results.append(_result(2, cfg[names[2]], [(8, 0.99)]))
    assert targets.pick_best("mnist", names, results) == "tensorflow-adam-b128-lr2e-3"  # 8 s beats 14 s
    # nobody reached 0.99: the most accurate
    missed = [_result(i, cfg[n], [(5, 0.97 + i / 1000)]) for i, n in enumerate(names)]
    assert targets.pick_best("mnist", names, missed) == names[2]
    assert targets.main(["--dry-run", "--storage", "sqlite:////nonexistent/x.db", "--cores", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "target-mnist: 7 trials (7 to run), epochs [5]" in out and "target-cifar10: then 2 more repeats" in out
    assert targets.main(["--dry-run", "--datasets", "digits"]) == 2
    assert targets.main(["--dry-run", "--candidates", "torch-adam-b64-lr9"]) == 2  # a typo is an error
    with pytest.raises(SystemExit):
        targets.main(["--dry-run", "--epochs", "3"])  # overrides that would be ignored are refused
    capsys.readouterr()
    assert targets.main(["--dry-run", "--storage", "sqlite:////nonexistent/x.db", "--candidates", "torch-adam-b64",
                         "--cores", "0,1"]) == 0  # the candidate runs 2 threads: not the default cores of a 1-core lease
    out = capsys.readouterr().out
    assert "target-cifar10: 1 trials" in out and "target-mnist" not in out


def test_retry_contended_counts_a_disturbed_trial_as_missing() -> None:
    from types import SimpleNamespace

    def trial(key: str, contended: bool) -> SimpleNamespace:
        return SimpleNamespace(user_attrs={defaults.KEY_ATTR: key, defaults.RESULT_ATTR: {"contended": contended}})

    study = SimpleNamespace(get_trials=lambda deepcopy=False: [trial("a", False), trial("b", True),
                                                                SimpleNamespace(user_attrs={})])
    assert defaults.held_keys(study) == {"a": 1, "b": 1}
    assert defaults.held_keys(study, retry_contended=True) == {"a": 1}


def test_collector_records_its_knobs_as_optuna_parameters(tmp_path: Path) -> None:
    """The knowledge-base collectors add trials with ``study.add_trial``: each keeps its knobs as
    parameters (bounds from the knob declarations, widened to the value), so the studies slice."""
    import optuna

    import collect

    sys.path.insert(0, str(REPO / "tests"))
    from _knowledge_rows import make_result

    study = optuna.create_study(study_name="c", storage=f"sqlite:///{tmp_path}/c.db",
                                directions=["minimize", "maximize", "minimize"])
    for cfg in (Config(framework="torch", batch_size=64, learning_rate=0.1, epochs=3, optimizer="momentum",
                       momentum=0.9, schedule="onecycle", onednn=True),
                Config(framework="onnxruntime", batch_size=2000, epochs=40, optimizer="adam",
                       execution_mode="sequential")):
        collect._record(study, {"drawn": True}, make_result(cfg, "mnist"))
    a, b = study.get_trials()
    assert a.params["schedule"] == "onecycle" and a.params["onednn"] is True and a.params["momentum"] == 0.9
    assert b.params["execution_mode"] == "sequential" and b.params["epochs"] == 40 and "onednn" not in b.params
    assert "seed" not in a.params and a.user_attrs["advisor.params"] == {"drawn": True}


def test_timing_collector_draws_runs_of_synthetic_shapes_the_four_datasets_do_not_have(tmp_path: Path) -> None:
    """``collect_timing.py`` measures time on input shapes the table lacks: every draw is a
    synthetic workload with its training size stated (synthetic data without one has 2,000
    samples), of a shape none of the four datasets has, 1 to TIMING_EPOCHS epochs, one thread;
    the next cell is the one with the fewest finished runs, and each cell is its own study."""
    from types import SimpleNamespace

    import collect_timing as ct

    from advisor.datasets import get_info

    real = {tuple(get_info(n).input_shape) for n in ("digits", "mnist", "fashion-mnist", "cifar10")}
    assert not real & {tuple(s) for s in ct.SHAPES}
    args = SimpleNamespace(core=0, seed=0, storage=f"sqlite:///{tmp_path}/t.db", base_table="", frameworks=["torch", "sklearn"],
                           datasets=list(ct.TimingCollector.plans), side_share=0.0, time_scale=1.0, data_dir="",
                           strategy="uniform", max_full=None)
    collector = ct.TimingCollector(args)
    first = ("synthetic:12x12x1", ct.SIZES[0])
    done = [{"workload": {"dataset": ds, "train_samples": size}, "status": "ok"}
            for ds, p in collector.plans.items() for size in p.subsets if (ds, size) != first]
    assert collector.choose_dataset(done) == first
    names = {collector.study_name(ds, s) for ds, p in collector.plans.items() for s in p.subsets}
    assert len(names) == len(ct.SHAPES) * len(ct.SIZES) and "kb3-timing-12x12x1-2000" in names
    for _ in range(12):
        dataset, size = collector.choose_dataset([])
        draw = collector.draw([], dataset, size)
        assert draw.workload.dataset == dataset and dataset.startswith("synthetic:")
        assert draw.workload.train_samples == size and size in ct.SIZES
        assert 1 <= draw.config.epochs <= ct.TIMING_EPOCHS and draw.config.threads == 1
        assert draw.config.framework in ("torch", "sklearn") and draw.workload.model in ct.MODELS
        assert draw.config.framework != "sklearn" or draw.workload.model == "mlp"
