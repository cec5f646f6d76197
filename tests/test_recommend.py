"""recommend: candidates -> predictions -> constraints -> Pareto -> ranking -> evidence; presets; verify."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import advisor.knowledge as kb
from advisor import presets
from advisor import recommend as rc
from advisor import space
from advisor import surrogate as sg
from advisor.errors import ConstraintError, InvalidParameterError, KnowledgeBaseError, UnknownNameError
from advisor.records import Config

from _knowledge_rows import CPU_PROFILE, fitted_table, make_result, rows

ROUNDS = 100


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TEST DATA: a CPU-only table of constructed trials (digits, mnist, cifar10) and its model."""
    return fitted_table(tmp_path_factory.mktemp("shipped"), 240, seed=5, rounds=ROUNDS)


def _rec(shipped: tuple[Path, Path], dataset: str = "mnist", **kwargs):  # type: ignore[no-untyped-def]
    table, model = shipped
    kwargs.setdefault("profile", CPU_PROFILE)
    kwargs.setdefault("candidates_per_framework", 150)
    return rc.recommend(dataset, table=table, model_dir=model, **kwargs)


def test_recommend_returns_ranked_configs_with_bands_and_evidence(shipped: tuple[Path, Path]) -> None:
    rec = _rec(shipped, "mnist", cores=2)
    assert len(rec.choices) == 3 and [c.rank for c in rec.choices] == [1, 2, 3]
    assert rec.n_candidates >= 4 * 150 and 0 < rec.n_front <= rec.n_feasible == rec.n_candidates
    assert not rec.extrapolation and rec.reasons == () and not rec.table_mismatch
    ids = set(kb.read(shipped[0])["trial_id"])
    for c in rec.choices:
        cfg = Config.from_dict(c.config)  # full, valid params
        assert cfg.framework == c.framework and cfg.threads <= 2 and cfg.device == "cpu"
        for band in (c.time_s, c.accuracy, c.memory_mb):
            assert band.lo <= band.mid <= band.hi
        assert 0 <= c.accuracy.lo and c.accuracy.hi <= 1 and c.time_s.lo > 0 and c.memory_mb.lo > 0
        assert 1 <= len(c.evidence) <= 3 and all(e.trial_id in ids for e in c.evidence)
        if c.basis == "measured":  # its own runs, not neighbours
            assert c.repeats >= 1 and all(e.distance == 0.0 for e in c.evidence)
            assert c.time_s.basis == c.accuracy.basis == c.memory_mb.basis == "measured"
        else:
            assert len(c.evidence) == 3 and c.repeats == 0 and c.accuracy.basis == "predicted"
        assert all(e.framework == c.framework for e in c.evidence)  # same framework preferred
        assert [e.distance for e in c.evidence] == sorted(e.distance for e in c.evidence)
    assert json.loads(json.dumps(rec.to_dict()))["choices"][0]["config"]["framework"] == rec.choices[0].framework


def test_choices_are_on_the_predicted_front(shipped: tuple[Path, Path]) -> None:
    rec = _rec(shipped, "mnist", top=5)
    # on the figures they were ranked on (a random draw's band's conservative side)
    pts = np.array([[_ranked(c, "time_s"), -_ranked(c, "accuracy"), _ranked(c, "memory_mb")]
                    for c in _ranked_choices(rec)])
    assert rc.pareto_mask(pts).all()  # no chosen point dominates another


def _ranked(c, objective: str) -> float:  # type: ignore[no-untyped-def]
    """The figure a choice is ranked on: the median when trusted, else the band's conservative side."""
    band = getattr(c, objective)
    if c.source in rc.TRUSTED_SOURCES:
        return band.mid
    return band.lo if objective == "accuracy" else band.hi


def _ranked_choices(rec):  # type: ignore[no-untyped-def]
    """The choices the preference ordered: without the obvious default when it was kept first
    because no alternative was likely enough to beat it."""
    kept = "obvious default kept first" in rec.ranking
    return rec.choices[1:] if kept else rec.choices


def test_preferences_order_the_front(shipped: tuple[Path, Path]) -> None:
    fast = _ranked_choices(_rec(shipped, "mnist", prefer="fast", top=5))
    accurate = _ranked_choices(_rec(shipped, "mnist", prefer="accurate", top=5))
    lean = _rec(shipped, "mnist", prefer="lean", top=5).choices
    assert [_ranked(c, "time_s") for c in fast] == sorted(_ranked(c, "time_s") for c in fast)
    assert [_ranked(c, "accuracy") for c in accurate] == sorted((_ranked(c, "accuracy") for c in accurate), reverse=True)
    assert [_ranked(c, "memory_mb") for c in lean] == sorted(_ranked(c, "memory_mb") for c in lean)
    assert _ranked(fast[0], "time_s") < _ranked(accurate[0], "time_s")
    assert _ranked(accurate[0], "accuracy") > _ranked(fast[0], "accuracy")
    balanced = _ranked_choices(_rec(shipped, "mnist", prefer="balanced", top=3))[0]
    assert _ranked(fast[0], "time_s") <= _ranked(balanced, "time_s")
    assert _ranked(balanced, "accuracy") <= _ranked(accurate[0], "accuracy")


def test_constraints_hold_for_every_choice(shipped: tuple[Path, Path]) -> None:
    free = _rec(shipped, "mnist", prefer="accurate").choices[0]
    bound = rc.Constraints(max_time_s=free.time_s.mid / 2, max_memory_mb=400)
    rec = _rec(shipped, "mnist", constraints=bound, prefer="accurate")
    assert rec.n_feasible < rec.n_candidates
    assert all(c.time_s.mid <= bound.max_time_s and c.memory_mb.mid <= 400 for c in rec.choices)


def test_impossible_constraint_names_the_bound(shipped: tuple[Path, Path]) -> None:
    with pytest.raises(ConstraintError, match=r"--min-accuracy 0\.9999: the best predicted accuracy is 0\.\d+"):
        _rec(shipped, "mnist", constraints=rc.Constraints(min_accuracy=0.9999))
    with pytest.raises(ConstraintError, match=r"--max-time 0\.001s: the fastest predicted training time"):
        _rec(shipped, "mnist", constraints=rc.Constraints(max_time_s=0.001, min_accuracy=0.5))
    with pytest.raises(ConstraintError, match=r"--max-memory 1 MB.* among configurations that meet --max-time"):
        _rec(shipped, "mnist", constraints=rc.Constraints(max_time_s=1e6, max_memory_mb=1))


def test_a_workload_the_surrogate_was_not_fitted_on_is_flagged_and_gets_wider_bands(
        shipped: tuple[Path, Path]) -> None:
    seen = _rec(shipped, "mnist", cores=2)  # the full 60,000: the table holds it
    assert seen.new_workload is False and seen.to_dict()["new_workload"] is False
    other = _rec(shipped, "mnist", cores=2, train_samples=7000)  # no trial trained on 7,000
    assert other.new_workload is True
    meta = sg.load(shipped[1]).meta
    # (the constructed times are exactly the physical baseline, so time's offsets are both ~0)
    assert meta["band_offsets_new_workload"]["train_time_s"] >= meta["band_offsets"]["train_time_s"]
    assert meta["band_offsets_new_workload"]["test_accuracy"] > meta["band_offsets"]["test_accuracy"]
    # the same configs, predicted as a seen and as a new workload: the new one's bands are wider
    model = sg.load(shipped[1])
    from advisor.surrogate.features import encode
    x = encode(rc._columns(rc._candidates(other.workload, other.target, ["torch"], per_framework=20, seed=0),
                           other.workload, other.target), model.schema)
    as_new = model.predict_matrix(x)["test_accuracy"]
    seen_band = sg.Surrogate(model.schema, model.boosters, {**model.meta, "workloads": None}).predict_matrix(x)
    as_seen = seen_band["test_accuracy"]
    assert np.all(as_new.hi - as_new.lo >= as_seen.hi - as_seen.lo - 1e-12)
    assert np.any(as_new.hi - as_new.lo > as_seen.hi - as_seen.lo)


def test_gpu_on_a_cpu_only_table_is_an_extrapolation(shipped: tuple[Path, Path]) -> None:
    rec = _rec(shipped, "cifar10", device_kind="gpu", gpu_model="NVIDIA H200")
    assert rec.extrapolation and any("no measured GPU trials" in r for r in rec.reasons)
    assert {c.framework for c in rec.choices} <= {"torch", "tensorflow", "onnxruntime"}  # no sklearn GPU space
    assert all(c.config["device"] == "cuda" for c in rec.choices)
    # Time comes from the device model of the H200 (see test_devices.py); accuracy from the same run
    # on a CPU, its band widened by 0.1 on each side for the extrapolation.
    assert any("device model of the NVIDIA H200" in r for r in rec.reasons)
    # (a choice whose accuracy was measured on a CPU carries that measurement instead)
    c = next(c for c in _rec(shipped, "cifar10", device_kind="gpu", gpu_model="NVIDIA H200", top=50).choices
             if c.accuracy.basis == "predicted")
    surrogate = sg.load(shipped[1])
    cand = [rc._Candidate(Config.from_dict(c.config), c.source, None, model=c.model)]
    info = rc.describe_workload("cifar10", model=c.model)
    raw = surrogate.predict(rc._columns(cand, info, rc.Target("cpu", 1), overrides=rc.CPU_VIEW))
    assert c.accuracy.mid == pytest.approx(raw["test_accuracy"].mid[0])
    assert c.accuracy.hi == pytest.approx(min(1.0, raw["test_accuracy"].hi[0] + 0.1))


def test_a_cpu_recipe_answered_for_a_gpu_leaves_its_cpu_speed_settings(tmp_path: Path) -> None:
    """oneDNN and ONNX Runtime's graph optimisation level were chosen for a CPU's speed: a CPU run's
    accuracy is evidence for the same recipe on a GPU, its '--graph-optimization disable' is not."""
    from advisor._recommend._baseline import measured_elsewhere
    from advisor.knobs import KNOBS

    assert {k.name for k in KNOBS if k.cpu_speed} == {"onednn", "graph_optimization"}
    ort = Config(framework="onnxruntime", epochs=2, optimizer="adam", graph_optimization="disable",
                 execution_mode="sequential")
    torch = Config(framework="torch", epochs=2, onednn=False, channels_last=True)
    table = tmp_path / "cpu.csv.gz"
    kb.write([kb.row_from_result(make_result(c, "cifar10"), CPU_PROFILE) for c in (ort, torch)], table)
    got = measured_elsewhere(kb.read(table), rc.describe_workload("cifar10"), rc.Target("gpu", 2, "NVIDIA H200"),
                             models={"cifar_quick"}, frameworks={"onnxruntime", "torch"})
    by_fw = {cfg.framework: cfg for cfg, _ in got}
    assert set(by_fw) == {"onnxruntime", "torch"} and all(c.device == "cuda" for c in by_fw.values())
    assert by_fw["onnxruntime"].graph_optimization is None and by_fw["torch"].onednn is None
    # what the recipe learns with is kept
    assert by_fw["onnxruntime"].execution_mode == "sequential" and by_fw["torch"].channels_last
    # a portfolio recipe (collected on a CPU) the same way; on a CPU it keeps them
    from advisor._recommend._candidates import portfolio_candidates

    recipe = {**ort.to_dict(), "model": "cifar_quick"}
    for kind, level in (("gpu", None), ("cpu", "disable")):
        cands = portfolio_candidates([recipe], rc.describe_workload("cifar10"), rc.Target(kind, 1),
                                     ["onnxruntime"], ["cifar_quick"], False, set())
        assert cands and {c.config.graph_optimization for c in cands} == {level}


def test_models_that_do_not_build_on_a_small_input_are_named_with_the_size_that_fits(
        shipped: tuple[Path, Path], tmp_path: Path) -> None:
    """cifar_quick pools three times, so a 7x7 image leaves it out; the answer says so and how to
    get it back, rather than answering among the others in silence."""
    from advisor._recommend._candidates import candidate_models, too_small_for

    rng = np.random.default_rng(0)
    data = tmp_path / "tiny.npz"
    np.savez(data, x_train=rng.integers(0, 255, (300, 7, 7), dtype=np.uint8), y_train=rng.integers(0, 10, 300),
             x_test=rng.integers(0, 255, (100, 7, 7), dtype=np.uint8), y_test=rng.integers(0, 10, 100))
    table = kb.read(shipped[0])
    tiny = rc.describe_workload(str(data))
    assert too_small_for(table, tiny) == {"cifar_quick": 8}
    assert "cifar_quick" not in candidate_models(table, tiny)
    rec = _rec(shipped, str(data), cores=1)
    note = [w for w in rec.warnings if "do not build" in w]
    assert len(note) == 1 and "cifar_quick" in note[0] and "7x7" in note[0] and "8 pixels a side" in note[0]
    assert {c.model for c in rec.choices} <= {"lenet5", "mlp"}
    # on an input every model builds on there is nothing to say
    assert too_small_for(table, rc.describe_workload("mnist")) == {}
    assert not [w for w in _rec(shipped, "mnist", cores=1).warnings if "do not build" in w]


def test_unmeasured_kind_of_data_is_an_extrapolation(tmp_path: Path) -> None:
    table = tmp_path / "gray.csv.gz"
    kb.write(rows(60, seed=2, datasets=("digits", "mnist")), table)
    rec = rc.recommend("cifar10", table=table, profile=CPU_PROFILE, candidates_per_framework=40)
    assert rec.extrapolation and any("32x32x3" in r for r in rec.reasons)
    near = rc.recommend("fashion-mnist", table=table, profile=CPU_PROFILE, candidates_per_framework=40)
    # data of a measured kind but another dataset: only its accuracy level is extrapolated
    (reason,) = near.reasons
    assert reason.startswith("no measured trials on fashion-mnist itself: its accuracy level is predicted")
    # evidence from the measured dataset nearest by meta-features (MNIST's shape, not digits' 8x8)
    assert "evidence is cited from mnist, the nearest measured dataset" in reason
    cited = {e.dataset_name for c in near.choices for e in c.evidence}
    assert cited == {"mnist"}


def test_table_mismatch_is_flagged(shipped: tuple[Path, Path], tmp_path: Path) -> None:
    other = tmp_path / "other.csv.gz"
    kb.write(rows(40, seed=8), other)
    rec = rc.recommend("mnist", table=other, model_dir=shipped[1], profile=CPU_PROFILE, candidates_per_framework=30)
    assert rec.table_mismatch and "different table" in rec.warnings[0]


def test_bad_inputs(shipped: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match="Unknown dataset 'nope'"):
        _rec(shipped, "nope")
    with pytest.raises(InvalidParameterError, match="'prefer'"):
        _rec(shipped, prefer="cheap")
    with pytest.raises(InvalidParameterError, match="'train_samples'"):
        _rec(shipped, "digits", train_samples=10**7)
    failed_only = tmp_path / "failed.csv.gz"
    kb.write([kb.row_from_result(make_result(Config(framework="torch"), "mnist", status="oom"))], failed_only)
    with pytest.raises(KnowledgeBaseError, match="no trials with status 'ok'"):
        rc.recommend("mnist", table=failed_only, model_dir=shipped[1], profile=CPU_PROFILE)


def test_pareto_mask() -> None:
    pts = np.array([[1, 5], [2, 2], [5, 1], [3, 3], [2, 2], [6, 6]], dtype=float)
    assert rc.pareto_mask(pts).tolist() == [True, True, True, False, True, False]


def test_pareto_mask_matches_brute_force_with_ties() -> None:
    rng = np.random.default_rng(7)
    for _ in range(100):
        pts = rng.integers(0, 4, size=(int(rng.integers(0, 40)), 3)).astype(float)  # many ties
        brute = [not np.any(np.all(pts <= p, axis=1) & np.any(pts < p, axis=1)) for p in pts]
        assert rc.pareto_mask(pts).tolist() == brute


def test_warm_start_params_fit_the_search_space(shipped: tuple[Path, Path]) -> None:
    import os

    cores = min(2, len(os.sched_getaffinity(0)))  # a CPU answer is for this machine: at most its cores
    params = rc.warm_start_params("torch", "mnist", None, "cpu", 3, table=shipped[0], model_dir=shipped[1], cores=cores)
    assert len(params) == 3
    sp = space.load_space("torch-cpu", cores=cores)
    names = {p.name for p in sp.params}
    for p in params:
        assert set(p) <= names and sp.to_config(p).framework == "torch"


# ---------------------------------------------------------------------------------- presets


def test_presets_follow_the_seed_study() -> None:
    caffe = presets.get_preset("caffe-mnist")
    assert caffe.framework == "onnxruntime" and not caffe.supports("onnxruntime")
    cfg = caffe.to_config(framework="torch", threads=2)
    assert (cfg.framework, cfg.threads) == ("torch", 2)
    assert (cfg.optimizer, cfg.momentum, cfg.learning_rate, cfg.batch_size, cfg.weight_decay, cfg.epochs) == (
        "momentum", 0.9, 0.01, 64, 5e-4, 11)  # 10,000 iterations x 64 / 60,000 = 10.7 -> 11
    assert presets.get_preset("tensorflow-mnist").epochs() == 17  # 16.7 rounded up
    assert presets.get_preset("tensorflow-cifar10").epochs(scale_epochs=0.01) == 26  # 25.6
    assert presets.get_preset("torch-cifar10").params()["batch_size"] == 1
    assert {p.name for p in presets.presets_for("mnist")} == {
        "tensorflow-mnist", "caffe-mnist", "torch-mnist", "theano-mnist"}
    assert "caffe-mnist" not in {p.name for p in presets.presets_for("mnist", framework="onnxruntime")}
    with pytest.raises(InvalidParameterError, match="no momentum"):
        presets.get_preset("caffe-mnist").to_config()  # its lineage, ONNX Runtime, has no momentum SGD
    with pytest.raises(UnknownNameError):
        presets.get_preset("mxnet-mnist")
    with pytest.raises(InvalidParameterError, match="scale_epochs"):
        presets.get_preset("torch-mnist").epochs(scale_epochs=0)


def test_presets_are_candidates(shipped: tuple[Path, Path]) -> None:
    wl = rc.describe_workload("mnist")
    target = rc.resolve_target("cpu", cores=2, profile=CPU_PROFILE)
    cands = rc._candidates(wl, target, ["torch", "onnxruntime"], per_framework=5, seed=0)
    sources = [c.source for c in cands]
    assert sources.count("space:torch-cpu") == 5
    assert "preset:caffe-mnist" in sources
    caffe = [c for c in cands if c.source == "preset:caffe-mnist"]
    assert [c.config.framework for c in caffe] == ["torch"]  # onnxruntime cannot run momentum SGD


# ------------------------------------------------------------------------------------ verify


def test_verify_explains_what_it_cannot_run(shipped: tuple[Path, Path], tmp_path: Path) -> None:
    from advisor import hardware

    if hardware.identity().gpus:
        pytest.skip("this machine has a GPU: the no-GPU explanation does not apply")
    rec = _rec(shipped, "mnist", device_kind="gpu", top=2)
    results, stats = rc.verify(rec, 2, knowledge_path=tmp_path / "kb.csv.gz")
    # The two, and the obvious default unless it is one of them.
    among = any(c.config == rec.baseline.config and c.model == rec.baseline.model for c in rec.choices[:2])
    assert [v.rank for v in results] == ([1, 2] if among else [1, 2, 0])
    assert all(v.status == "skipped" for v in results) and stats is None
    assert all("no GPU" in (v.note or "") for v in results)
    assert not (tmp_path / "kb.csv.gz").exists()


@pytest.mark.slow
def test_verify_runs_the_top_choice_and_remembers_it(shipped: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    rec = _rec(shipped, "digits", frameworks=["sklearn"], top=1, cores=1, prefer="fast")
    results, stats = rc.verify(rec, 1, workdir=tmp_path / "trials", knowledge_path=tmp_path / "mine.csv.gz")
    v = results[0]  # the choice, then the obvious default (always a measured comparison) unless it is the choice
    assert v.status == "ok", v.note
    if rec.choices[0].source == "default":
        assert len(results) == 1
    else:
        assert len(results) == 2 and results[1].rank == 0 and results[1].status == "ok", results[1].note
    assert v.measured["train_time_s"] > 0 and 0 < v.measured["test_accuracy"] <= 1
    assert set(v.within_band) == {"train_time_s", "test_accuracy", "peak_memory_mb"}
    assert stats is not None and stats.rows_out == len(results)
    assert kb.read(tmp_path / "mine.csv.gz")["trial_id"] == [r.trial_id for r in results]


def test_verify_does_not_score_a_run_stopped_at_its_target_against_the_whole_schedules_band(
        shipped: tuple[Path, Path], tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    import dataclasses

    rec = _rec(shipped, "digits", frameworks=["sklearn"], top=1, cores=1, prefer="fast")
    first = rec.choices[0]
    long_run = dataclasses.replace(first, basis="predicted", schedule_time_s=None,
                                   config={**first.config, "epochs": 20, "stop_at_accuracy": 0.3})
    # the same run where the predicted time was read from the predicted curve: a time to the target
    to_target = dataclasses.replace(long_run, schedule_time_s=first.time_s)
    results, _ = rc.verify(dataclasses.replace(rec, choices=(long_run, to_target), baseline=None), 2,
                           workdir=tmp_path / "trials", knowledge_path=tmp_path / "mine.csv.gz")
    v, w = results
    assert v.status == "ok" and v.measured["test_accuracy"] >= 0.3
    assert v.within_band["train_time_s"] is None and v.within_band["test_accuracy"] is None
    assert v.note is not None and "stopped there" in v.note and "of 20" in v.note
    assert w.status == "ok" and w.within_band["train_time_s"] is not None and w.within_band["test_accuracy"] is None


# ------------------------------------------------------------------------------ import hygiene


def test_import_recommend_loads_no_framework_or_optuna() -> None:
    code = ("import advisor.recommend, advisor.presets, advisor.knowledge, advisor.surrogate, sys, json; "
            "print(json.dumps(sorted(m for m in ('torch', 'tensorflow', 'onnxruntime', 'optuna', 'lightgbm', "
            "'sklearn', 'matplotlib') if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


def test_a_recommendation_loads_no_framework_optuna_or_sklearn(shipped: tuple[Path, Path]) -> None:
    table, model = shipped
    code = (
        "import sys, json\n"
        "from advisor import recommend as rc\n"
        "from advisor.records import HardwareProfile\n"
        f"rec = rc.recommend('cifar10', device_kind='gpu', table={str(table)!r}, model_dir={str(model)!r}, "
        "candidates_per_framework=50)\n"
        "assert rec.choices\n"
        "print(json.dumps(sorted(m for m in ('torch', 'tensorflow', 'onnxruntime', 'optuna', 'sklearn', "
        "'matplotlib', 'plotly') if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []



def test_balanced_prefers_the_fastest_near_best_accuracy_over_a_useless_fast_point() -> None:
    # costs: log time, -accuracy, log memory
    costs = np.array([[np.log(0.05), -0.72, 5.0],   # trains in no time to a useless accuracy
                      [np.log(10.0), -0.950, 6.0],
                      [np.log(5.0), -0.945, 6.0],   # within 0.01 of the best, and the fastest there
                      [np.log(50.0), -0.951, 6.0]])
    order = rc._rank(costs, "balanced").tolist()
    assert order[0] == 2 and order[-1] == 0 and sorted(order) == [0, 1, 2, 3]
    # within the near-best set, time decides and memory breaks ties: a 5x slower but leaner config
    # does not win, and of two equally fast ones the leaner does
    costs = np.array([[np.log(5.0), -0.950, np.log(800.0)],
                      [np.log(25.0), -0.952, np.log(150.0)],
                      [np.log(5.0), -0.948, np.log(300.0)]])
    assert rc._rank(costs, "balanced").tolist() == [2, 0, 1]


def test_balanced_top_k_shows_the_trade_offs_instead_of_near_copies() -> None:
    # (time s, accuracy, MiB): three near-copies of the pick, a much faster point and a much leaner one
    pts = np.array([[10.0, 0.950, 300.0], [11.0, 0.951, 300.0], [10.5, 0.949, 310.0],
                    [1.0, 0.900, 300.0], [12.0, 0.940, 60.0]])
    order = np.arange(5)
    spread = rc._spread(order, pts[:, 0], pts[:, 1], pts[:, 2], 3).tolist()
    assert spread[0] == 0  # the preference's pick stays first
    assert set(spread[:3]) == {0, 3, 4} and spread[3:] == [1, 2]  # the rest keep their order
    assert rc._spread(order, pts[:, 0], pts[:, 1], pts[:, 2], 1).tolist() == [0, 1, 2, 3, 4]
    # on a device with 24 GiB, saving 240 MiB is no trade-off worth a place: the next fastest is
    room = 24 * 1024.0
    pts = np.vstack([pts, [[5.0, 0.930, 300.0]]])
    order = np.arange(6)
    roomy = rc._spread(order, pts[:, 0], pts[:, 1], pts[:, 2], 3, memory_room_mb=room).tolist()
    assert roomy[:3] == [0, 3, 5] and 4 not in roomy[:3]
    # ... while a choice that leaves most of the device free, where the others fill it, still is
    full = pts.copy()
    full[[0, 1, 2, 3, 5], 2] = 22 * 1024.0
    full[4, 2] = 2 * 1024.0
    assert 4 in rc._spread(order, full[:, 0], full[:, 1], full[:, 2], 3, memory_room_mb=room).tolist()[:3]


def test_a_feature_constant_in_the_table_has_no_spread() -> None:
    """Rows that all hold one value (one machine's GEMM speed, in log10) have a computed spread of
    rounding error: it must count as none, or a query with another value gets distances of 1e14."""
    from advisor._recommend._evidence import feature_spread

    x = np.column_stack([np.full(500, np.log10(183.0)) + np.array([0.0, 4e-16] * 250), np.arange(500.0),
                         np.full(500, np.nan)])
    assert 0 < np.nanstd(x[:, 0]) < 1e-9  # the rounding the rule is for
    spread = feature_spread(x)
    assert spread[0] == 1.0 and spread[1] == pytest.approx(np.std(np.arange(500.0))) and spread[2] == 1.0


@pytest.fixture(scope="module")
def with_gpu(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Constructed CPU rows plus the real H200 trials run for the device model (benchmarks/gpu)."""
    import advisor.knowledge as kb

    folder = tmp_path_factory.mktemp("gpu")
    gpu = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "raw" / "gpu-h200" / "gpu-trials.csv.gz"
    table = folder / "knowledge.csv.gz"
    kb.write(rows(240, seed=5) + kb.read(gpu).rows, table)
    model = sg.fit_file(table, num_boost_round=60)
    sg.save(model, folder / "model", table_path=table)
    return table, folder / "model"


def _roofline_bounds(rec, c):  # type: ignore[no-untyped-def]
    import math

    from advisor import devices

    info = rc.describe_workload(rec.workload.dataset, model=c.model)
    cfg = Config.from_dict(c.config)
    step = devices.estimate_model_step(devices.get_accelerator(rec.target.gpu_model), cfg, c.model,
                                       info.input_shape, info.num_classes)
    roofline, _ = devices.run_seconds(step, math.ceil(info.train_samples / cfg.batch_size) * cfg.epochs, "torch")
    return roofline, devices.MAX_SLOWDOWN * roofline


def test_gpu_answers_cite_gpu_trials_by_model_and_stay_within_the_roofline(
        with_gpu: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _rec(with_gpu, "cifar10", device_kind="gpu", gpu_model="h200")
    assert rec.target.gpu_model == "NVIDIA H200"  # 'h200' is the table's 'NVIDIA H200'
    assert not any("no measured trials on GPU model" in r for r in rec.reasons)
    # a few dozen trials of this GPU: the device model (fitted on them) still answers for time
    assert any("device model of the NVIDIA H200" in r for r in rec.reasons)
    cited = [e for c in rec.choices for e in c.evidence]
    assert cited and all(e.device_kind == "gpu" and e.gpu_model == "NVIDIA H200" for e in cited)
    other = _rec(with_gpu, "cifar10", device_kind="gpu", gpu_model="A100")
    assert any("no measured trials on GPU model 'NVIDIA A100' (measured: NVIDIA H200)" in r for r in other.reasons)
    assert all(e.device_kind == "gpu" for c in other.choices for e in c.evidence)
    # Once the trees answer (enough trials of the GPU), their times are still held within physics.
    monkeypatch.setattr(rc, "MIN_GPU_TRIALS", 1)
    learnt = _rec(with_gpu, "cifar10", device_kind="gpu", gpu_model="h200")
    assert not any("device model of" in r for r in learnt.reasons)
    for c in learnt.choices:
        lo, hi = _roofline_bounds(learnt, c)
        for v in (c.time_s.lo, c.time_s.mid, c.time_s.hi):
            assert lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)


def test_verify_scores_a_run_that_stopped_short_of_its_target_for_another_reason(
        shipped: tuple[Path, Path], tmp_path: Path) -> None:
    """A run under a time budget that ended before reaching its target did not stop at it: it is
    scored against its band as any run."""
    pytest.importorskip("sklearn")
    import dataclasses

    rec = _rec(shipped, "digits", frameworks=["sklearn"], top=1, cores=1, prefer="fast")
    first = rec.choices[0]
    short = dataclasses.replace(first, config={**first.config, "epochs": 20, "stop_at_accuracy": 0.9999,
                                               "time_budget_s": 1e-6})
    results, _ = rc.verify(dataclasses.replace(rec, choices=(short,), baseline=None), 1,
                           workdir=tmp_path / "trials", knowledge_path=tmp_path / "mine.csv.gz")
    v = results[0]
    assert v.status == "ok" and v.measured["test_accuracy"] < 0.9999
    assert v.within_band["test_accuracy"] is not None and not (v.note or "").endswith("stopped there")


def test_the_nearest_measured_dataset_weighs_the_training_samples(tmp_path: Path) -> None:
    """14x14 images lie nearer digits' 8x8 than MNIST's 28x28 in pixels; with 60,000 of them MNIST
    (measured up to 60,000) is the nearer dataset, and its trials the evidence that says something of
    the run's time; with 1,000 of them digits is."""
    import dataclasses

    from advisor._recommend._evidence import nearest_dataset

    kb.write(rows(60, seed=2, datasets=("digits", "mnist")), tmp_path / "t.csv.gz")
    table = kb.read(tmp_path / "t.csv.gz")
    shape = rc.describe_workload("synthetic:14x14x1")
    many, few = (dataclasses.replace(shape, train_samples=n) for n in (60000, 1000))
    assert nearest_dataset(table, many)[0] == "mnist"
    assert nearest_dataset(table, few)[0] == "digits"
