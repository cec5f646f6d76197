"""The surrogate: features, fitting, text save/load, errors, cross-validation, model card."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import advisor.knowledge as kb
from advisor import surrogate as sg
from advisor.errors import SurrogateError
from advisor.records import Config, Workload
from advisor.surrogate import features as F
from advisor.surrogate.model import training_columns

from _knowledge_rows import CPU_PROFILE, make_result, rows

ROUNDS = 120


@pytest.fixture(scope="module")
def table_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kb") / "kb.csv.gz"
    kb.write(rows(240, seed=11), path)
    return path


@pytest.fixture(scope="module")
def fitted(table_path: Path) -> sg.Surrogate:
    return sg.fit_file(table_path, num_boost_round=ROUNDS)


# --------------------------------------------------------------------------------- features


def test_feature_values_are_the_derived_quantities() -> None:
    cfg = Config(framework="torch", batch_size=64, epochs=3, learning_rate=0.01, threads=2)
    row = kb.row_from_result(make_result(cfg, "mnist", train=1000), CPU_PROFILE)
    cols = {k: [v] for k, v in row.items()}
    values = F.feature_values(cols)
    fps = row["flops_per_sample"]
    assert values["steps_per_epoch"][0] == 16  # ceil(1000 / 64)
    assert values["total_steps"][0] == 48
    assert values["total_flops"][0] == pytest.approx(fps * 1000 * 3)
    assert values["pixels"][0] == 784
    m = row["cfg_momentum"] or 0.0
    effective = math.log10(0.01) - math.log10(1 - m)
    assert values["log10_effective_lr"][0] == pytest.approx(effective)
    assert values["log10_lr_x_steps"][0] == pytest.approx(effective + math.log10(48))
    assert values["log10_lr_per_sample"][0] == pytest.approx(effective - math.log10(64))
    assert values["samples_seen"][0] == 3000
    heavy = Config(framework="torch", optimizer="momentum", momentum=0.9, batch_size=64, epochs=3, learning_rate=0.01)
    heavy_row = kb.row_from_result(make_result(heavy, "mnist", train=1000), CPU_PROFILE)
    heavy_values = F.feature_values({k: [v] for k, v in heavy_row.items()})
    assert heavy_values["log10_effective_lr"][0] == pytest.approx(math.log10(0.01 / 0.1))  # momentum's 1 / (1 - m)
    assert values["log10_learning_rate"][0] == pytest.approx(-2.0)
    assert values["hw_gflops"][0] == 76.0  # calibrated at the trial's 2 threads
    assert values["naive_time_s"][0] == pytest.approx(fps * 3000 / 76e9)
    assert values["cores_granted"][0] == 2


def test_gflops_fall_back_to_the_best_calibrated_speed() -> None:
    row = kb.row_from_result(make_result(Config(framework="torch", threads=2), "digits"), CPU_PROFILE)
    row["hw_gemm_gflops_threads"] = None
    assert F.feature_values({k: [v] for k, v in row.items()})["hw_gflops"][0] == 76.0


def test_dataset_name_is_not_a_feature() -> None:
    """The name reaches the features only through the registry's measured landmark: renamed data
    with the same landmark has the same features; an unknown name has an unknown landmark."""
    assert not [f for f in F.FEATURES if "dataset" in f.name]
    row = kb.row_from_result(make_result(Config(framework="sklearn"), "mnist"), CPU_PROFILE)
    renamed = dict(row, dataset_name="something-else", dataset_fingerprint="0" * 64)
    schema = F.schema_from_columns({k: [v] for k, v in row.items()})
    a = F.encode({k: [v] for k, v in row.items()}, schema)
    b = F.encode({k: [v] for k, v in dict(renamed, landmark=0.947).items()}, schema)
    assert np.array_equal(a, b, equal_nan=True)
    unknown = F.encode({k: [v] for k, v in renamed.items()}, schema)
    at = schema.names.index("landmark")
    assert a[0, at] == 0.947 and np.isnan(unknown[0, at])
    assert np.array_equal(np.delete(a, at, axis=1), np.delete(unknown, at, axis=1), equal_nan=True)


def test_landmarks_come_from_the_column_else_the_registry() -> None:
    cols = {"framework": ["torch"] * 5, "dataset_name": ["digits", "cifar10", "x.npz", "synthetic:8x8x1", "mnist"],
            "landmark": [None, None, None, None, 0.5]}
    np.testing.assert_array_equal(F.landmarks(cols), [1.0, 0.481, np.nan, np.nan, 0.5])
    del cols["landmark"]
    np.testing.assert_array_equal(F.landmarks(cols), [1.0, 0.481, np.nan, np.nan, 0.947])


def test_accuracy_is_modelled_relative_to_the_landmark(fitted: sg.Surrogate, table_path: Path) -> None:
    target = fitted.meta["accuracy_target"]
    assert target["relative_to"] == "landmark" and 0 < target["landmark_fallback"] < 1
    cols = kb.read(table_path).columns
    # the cap is the most of the landmark's error that any finished trial removed
    picked, acc = training_columns(cols, "test_accuracy")
    marks = np.nan_to_num(F.landmarks(picked), nan=target["landmark_fallback"])
    share = (acc - marks) / np.maximum(1 - marks, 1e-3)
    assert target["headroom_cap"] == pytest.approx(float(np.clip(share.max(), 0, 1)))
    best = max((i for i, d in enumerate(cols["dataset_name"]) if d == "cifar10" and cols["test_accuracy"][i] is not None),
               key=lambda i: cols["test_accuracy"][i])  # the hardest dataset's best trial
    row = {k: [v[best]] for k, v in cols.items()}
    # Below every training landmark (CIFAR-10's 0.481 is the lowest) the trees are flat in it, so
    # the prediction moves with it 1:1.
    low = fitted.predict(dict(row, landmark=[0.2]))["test_accuracy"]
    lower = fitted.predict(dict(row, landmark=[0.15]))["test_accuracy"]
    assert 0 < lower.mid[0] < 1 and low.mid[0] - lower.mid[0] == pytest.approx(0.05)
    # a row with no landmark is shifted by the fallback; the transform round-trips
    from advisor.surrogate.model import from_model_space, to_model_space

    x = F.encode({k: [v[0]] * 2 for k, v in row.items()} | {"landmark": [0.6, None], "dataset_name": ["a.npz"] * 2},
                 fitted.schema)
    rel = to_model_space("test_accuracy", np.array([0.9, 0.9]), x, landmark_fallback=0.75)
    np.testing.assert_allclose(rel, [0.3, 0.15])
    np.testing.assert_allclose(to_model_space("test_accuracy", np.array([0.9, 0.9]), x), [0.9, 0.9])  # no target
    np.testing.assert_allclose(from_model_space("test_accuracy", np.array([[-0.2, 0.5, 1.3]]), x[:1]), [[0, 0.5, 1]])


def test_accuracy_takes_the_lower_of_the_relative_and_the_plain_model(fitted: sg.Surrogate, table_path: Path,
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Models fitted with the plain-accuracy companion (the shipped ones before the v2 table) still
    combine it, load and round-trip; a model fitted now has none and needs none to load."""
    import advisor.surrogate.model as M
    from advisor.surrogate.model import ACCURACY_COMPANION, QUANTILES

    assert ACCURACY_COMPANION not in fitted.boosters and fitted.meta["accuracy_target"]["combined_with"] is None
    plain_model = fitted
    monkeypatch.setattr(M, "COMBINE_WITH_PLAIN", True)
    fitted = sg.fit_file(table_path, num_boost_round=ROUNDS)
    # saving a model without the companion over one with it leaves no stale booster files
    sg.save(fitted, tmp_path / "plain")
    assert len(list((tmp_path / "plain").glob(f"{ACCURACY_COMPANION}.q*.txt"))) == 3
    sg.save(plain_model, tmp_path / "plain")
    assert not list((tmp_path / "plain").glob(f"{ACCURACY_COMPANION}.q*.txt"))
    assert ACCURACY_COMPANION not in sg.load(tmp_path / "plain").boosters
    cols = kb.read(table_path).columns
    x = F.encode(cols, fitted.schema)
    pred = fitted.predict_matrix(x)["test_accuracy"]
    plain = np.sort(np.stack([fitted.boosters[ACCURACY_COMPANION][a].predict(x) for a in QUANTILES], axis=1), axis=1)
    assert np.all(pred.mid <= np.clip(plain[:, 1], 0, 1) + 1e-12)
    relative_only = sg.Surrogate(fitted.schema, {k: v for k, v in fitted.boosters.items() if k != ACCURACY_COMPANION},
                                 fitted.meta).predict_matrix(x)["test_accuracy"]
    assert np.all(pred.mid <= relative_only.mid + 1e-12) and np.any(pred.mid < relative_only.mid)
    assert np.any(pred.mid < np.clip(plain[:, 1], 0, 1))  # both models decide somewhere
    sg.save(fitted, tmp_path / "m")
    np.testing.assert_array_equal(sg.load(tmp_path / "m").predict_matrix(x)["test_accuracy"].mid, pred.mid)
    files = json.loads((tmp_path / "m" / "meta.json").read_text())["files"]
    assert set(files) == {"train_time_s", "test_accuracy", "peak_memory_mb", ACCURACY_COMPANION}


def test_categoricals_encode_as_level_index_and_unseen_as_missing() -> None:
    data = rows(8, frameworks=("torch", "sklearn"))
    cols = {k: [r[k] for r in data] for k in data[0]}
    schema = F.schema_from_columns(cols)
    assert schema.levels["framework"] == ("sklearn", "torch")
    j = schema.names.index("framework")
    x = F.encode(cols, schema)
    assert set(x[:, j]) == {0.0, 1.0}
    cols["framework"] = ["tensorflow"] * 8
    assert np.isnan(F.encode(cols, schema)[:, j]).all()


# ------------------------------------------------------------------------------------ model


def test_rows_for_each_model(table_path: Path) -> None:
    table = kb.read(table_path)
    data = table.rows
    _, t = training_columns(table.columns, "train_time_s")
    _, a = training_columns(table.columns, "test_accuracy")
    _, m = training_columns(table.columns, "peak_memory_mb")
    ok = [r for r in data if r["status"] == "ok"]
    assert len(t) == sum(1 for r in ok if not r["contended"]) < len(ok)
    assert len(a) == len(m) == len(ok) < len(data)


def test_synthetic_rows_train_time_but_not_accuracy() -> None:
    data = rows(10)
    for r in data[:4]:
        r["synthetic"] = True
    cols = {k: [r[k] for r in data] for k in data[0]}
    ok = [r for r in data if r["status"] == "ok"]
    assert len(training_columns(cols, "test_accuracy")[1]) == sum(1 for r in ok if not r["synthetic"])
    assert len(training_columns(cols, "peak_memory_mb")[1]) == len(ok)


def test_conformal_offset_widens_a_narrow_band_to_the_coverage() -> None:
    from advisor.surrogate.model import conformal_offset

    rng = np.random.default_rng(0)
    y = rng.normal(size=2000)
    lo, hi = np.full_like(y, -0.5), np.full_like(y, 0.5)  # covers about 38% of N(0, 1)
    q = conformal_offset(y, lo, hi, coverage=0.8)
    assert 0.7 < q < 0.85  # the 80% band of N(0, 1) is +-1.28
    inside = np.mean((lo - q <= y) & (y <= hi + q))
    assert 0.8 <= inside <= 0.81
    # a band that is too wide is narrowed (negative offset) to the same coverage
    q_wide = conformal_offset(y, lo - 3, hi + 3, coverage=0.8)
    assert q_wide < 0 and 0.8 <= np.mean((lo - 3 - q_wide <= y) & (y <= hi + 3 + q_wide)) <= 0.81
    assert conformal_offset(np.array([]), np.array([]), np.array([])) == 0.0


def _encoded_rows(n: int, *, seed: int) -> tuple[dict[str, list[Any]], F.FeatureSchema, np.ndarray]:
    """TEST DATA: ``n`` constructed rows as columns, their schema and their feature matrix."""
    data = rows(n, seed=seed)
    cols = {k: [r[k] for r in data] for k in data[0]}
    schema = F.schema_from_columns(cols)
    return cols, schema, F.encode(cols, schema)


def test_time_baseline_recovers_per_framework_costs_and_falls_back_to_the_pooled_fit() -> None:
    from advisor.surrogate.model import POOLED, TIME_BASIS, fit_time_baseline, time_baseline, with_time_baseline

    cols, schema, x = _encoded_rows(240, seed=5)
    assert np.isnan(x[:, schema.names.index(F.BASELINE_FEATURE)]).all()  # encode leaves it to the model
    fw = [str(v) for v in cols["framework"]]
    # times that follow the basis exactly, with other costs per framework
    truth = {"torch": [2e-3, 1e-3, 0.0, 0.5, 0.0], "sklearn": [5e-3, 0.0, 1e-5, 0.1, 0.02],
             "tensorflow": [1e-3, 3e-3, 0.0, 2.0, 0.01], "onnxruntime": [4e-3, 5e-4, 2e-6, 0.0, 0.03]}
    flops, steps = x[:, schema.names.index("total_flops")], x[:, schema.names.index("total_steps")]
    seen = x[:, schema.names.index("train_samples")] * x[:, schema.names.index("epochs")]
    traffic = seen * x[:, schema.names.index("activations_per_sample")] / 1e6
    assert np.all(traffic > 0)
    parts = np.stack([flops / 1e9, steps, seen, np.ones(len(x)), traffic], axis=1)
    seconds = np.array([parts[i] @ np.array(truth[f]) for i, f in enumerate(fw)])
    coef = fit_time_baseline(x, seconds, schema)
    assert set(coef) == set(fw) | {POOLED} and all(len(c) == len(TIME_BASIS) for c in coef.values())
    np.testing.assert_allclose(time_baseline(x, schema, coef), seconds, rtol=1e-6)
    assert all(c >= 0 for cs in coef.values() for c in cs)
    # a framework without coefficients of its own gets the pooled ones; without those, none
    torch_rows = np.array([f == "torch" for f in fw])
    pooled = parts[torch_rows] @ np.array(coef[POOLED])
    without_torch = {k: v for k, v in coef.items() if k != "torch"}
    np.testing.assert_allclose(time_baseline(x, schema, without_torch)[torch_rows], pooled, rtol=1e-9)
    filled = with_time_baseline(x, schema, {k: v for k, v in without_torch.items() if k != POOLED})
    col = filled[:, schema.names.index(F.BASELINE_FEATURE)]
    assert np.isnan(col[torch_rows]).all() and np.isfinite(col[~torch_rows]).all()
    np.testing.assert_allclose(col[~torch_rows], np.log(seconds[~torch_rows] / flops[~torch_rows]), rtol=1e-6)
    np.testing.assert_array_equal(np.delete(filled, schema.names.index(F.BASELINE_FEATURE), axis=1),
                                  np.delete(x, schema.names.index(F.BASELINE_FEATURE), axis=1))


def test_time_baseline_scales_compute_by_calibrated_speed_only_when_the_fit_had_a_reference() -> None:
    from advisor.surrogate.model import reference_gflops, time_baseline

    cols, schema, x = _encoded_rows(40, seed=3)
    speed = x[:, schema.names.index("hw_gflops")]
    assert set(np.unique(speed)) == {40.0, 76.0}  # the test profile's 1- and 2-thread GEMM speeds
    assert reference_gflops(x) == float(np.median(speed))
    compute_only = {fw: [1.0, 0.0, 0.0, 0.0, 0.0] for fw in schema.levels["framework"]}
    gflops = x[:, schema.names.index("total_flops")] / 1e9
    np.testing.assert_allclose(time_baseline(x, schema, compute_only), gflops)  # no reference: speed ignored
    np.testing.assert_allclose(time_baseline(x, schema, compute_only, reference=50.0), gflops * 50.0 / speed)
    uncalibrated = x.copy()
    uncalibrated[:, schema.names.index("hw_gflops")] = np.nan
    assert reference_gflops(uncalibrated) is None
    np.testing.assert_allclose(time_baseline(uncalibrated, schema, compute_only, reference=50.0), gflops)


def test_memory_baseline_recovers_per_framework_costs() -> None:
    from advisor.surrogate.model import MEMORY_BASIS, POOLED, fit_memory_baseline, memory_baseline, with_memory_baseline

    cols, schema, x = _encoded_rows(240, seed=6)
    col = lambda name: x[:, schema.names.index(name)]  # noqa: E731
    mib = 4 / 2**20
    data_mib = (col("train_samples") + col("test_samples")) * col("pixels") * col("input_c") * mib
    batch_mib = col("batch_size") * col("activations_per_sample") * mib
    truth = {"torch": [300.0, 1.0, 2.0], "sklearn": [120.0, 1.5, 0.0], "tensorflow": [550.0, 2.0, 3.0],
             "onnxruntime": [250.0, 1.0, 1.0]}
    fw = [str(v) for v in cols["framework"]]
    parts = np.stack([np.ones(len(x)), data_mib, batch_mib], axis=1)
    measured = np.array([parts[i] @ np.array(truth[f]) for i, f in enumerate(fw)])
    coef = fit_memory_baseline(x, measured, schema)
    assert set(coef) == set(fw) | {POOLED} and all(len(c) == len(MEMORY_BASIS) for c in coef.values())
    np.testing.assert_allclose(memory_baseline(x, schema, coef), measured, rtol=1e-6)
    filled = with_memory_baseline(x, schema, coef)
    np.testing.assert_allclose(filled[:, schema.names.index(F.MEMORY_BASELINE_FEATURE)], np.log(measured), rtol=1e-9)


def test_fitted_memory_model_predicts_relative_to_its_baseline(fitted: sg.Surrogate, table_path: Path) -> None:
    from advisor.surrogate.model import MEMORY_TARGET, memory_baseline, with_memory_baseline

    coef = fitted.meta["memory_baseline"]["coefficients"]
    assert fitted.meta["memory_target"] == MEMORY_TARGET
    x = F.encode(kb.read(table_path).columns, fitted.schema)
    xo = with_memory_baseline(x, fitted.schema, coef)
    middle = np.median([fitted.boosters["peak_memory_mb"][a].predict(xo) for a in sg.QUANTILES], axis=0)
    want = memory_baseline(x, fitted.schema, coef) * np.exp(middle)  # memory's median is the middle of three
    np.testing.assert_allclose(fitted.predict(kb.read(table_path).columns)["peak_memory_mb"].mid, want, rtol=1e-9)


def test_activations_per_sample_is_the_models_count_or_nan() -> None:
    from advisor import models

    assert F.activations_per_sample("lenet5", 28, 28, 1, 10) == models.activation_count(
        models.get_model("lenet5"), (28, 28, 1), 10) == 10_798  # counted by hand in test_models
    for bad in (("no-such-model", 28, 28, 1, 10), ("lenet5", float("nan"), 28, 1, 10), ("cifar_quick", 1, 1, 3, 10)):
        assert np.isnan(F.activations_per_sample(*bad))


def test_fitted_time_model_predicts_relative_to_its_baseline(fitted: sg.Surrogate, table_path: Path) -> None:
    from advisor.surrogate.model import POOLED, TIME_TARGET, time_baseline, with_time_baseline

    base = fitted.meta["time_baseline"]
    assert set(base["coefficients"]) == {"torch", "tensorflow", "onnxruntime", "sklearn", POOLED}
    assert fitted.meta["time_target"] == TIME_TARGET
    cols = kb.read(table_path).columns
    used = fitted.boosters["train_time_s"][0.5].feature_importance()[fitted.schema.names.index(F.BASELINE_FEATURE)]
    assert used > 0  # the boosters split on it
    # the median is the baseline times exp(the 0.5 booster's output)
    x = F.encode(cols, fitted.schema)
    assert base["reference_gflops"] in (40.0, 58.0, 76.0)  # the median calibrated speed of its rows
    xo = with_time_baseline(x, fitted.schema, base["coefficients"], reference=base["reference_gflops"])
    want = time_baseline(x, fitted.schema, base["coefficients"], reference=base["reference_gflops"]) * np.exp(
        fitted.boosters["train_time_s"][0.5].predict(xo))
    np.testing.assert_allclose(fitted.predict(cols)["train_time_s"].mid, want, rtol=1e-9)


def test_fit_calibrates_the_bands_and_predict_applies_the_offsets(fitted: sg.Surrogate, table_path: Path) -> None:
    offsets = fitted.meta["band_offsets"]
    assert set(offsets) == set(sg.OBJECTIVES)
    assert fitted.meta["band_calibration"]["folds"] >= 2
    table = kb.read(table_path)
    calibrated = fitted.predict(table.columns)
    raw = sg.Surrogate(fitted.schema, fitted.boosters, {**fitted.meta, "band_offsets": {}}).predict(table.columns)
    assert any(q != 0 for q in offsets.values())
    for obj, q in offsets.items():
        cal, unc = calibrated[obj], raw[obj]
        np.testing.assert_allclose(cal.mid, unc.mid)
        assert np.all(cal.lo <= cal.mid) and np.all(cal.mid <= cal.hi), obj  # never past the median
        wider, narrower = (cal.lo <= unc.lo) & (cal.hi >= unc.hi), (cal.lo >= unc.lo) & (cal.hi <= unc.hi)
        assert np.all(wider if q > 0 else narrower), obj
        if q != 0:
            assert np.any((cal.lo != unc.lo) | (cal.hi != unc.hi)), obj
    uncalibrated = sg.fit(table.columns, num_boost_round=20, calibration_folds=0)
    assert uncalibrated.meta["band_offsets"] == {}


def test_a_workload_the_model_never_saw_gets_the_wider_new_workload_band(fitted: sg.Surrogate,
                                                                         table_path: Path) -> None:
    from advisor.surrogate.model import seen_workloads

    seen_q, new_q = fitted.meta["band_offsets"], fitted.meta["band_offsets_new_workload"]
    assert set(new_q) == set(seen_q) and all(new_q[k] >= seen_q[k] for k in seen_q)
    assert any(new_q[k] > seen_q[k] for k in seen_q)  # held-out workloads are harder than held-out rows
    cols = kb.read(table_path).columns
    assert seen_workloads(F.encode(cols, fitted.schema), fitted.meta["workloads"]).all()
    other_size = {**cols, "train_samples": [v + 1 for v in cols["train_samples"]]}
    assert not seen_workloads(F.encode(other_size, fitted.schema), fitted.meta["workloads"]).any()
    # the same rows, with no workload known to the model: same medians, each band moved by the other offset
    known = fitted.predict(cols)
    unknown = sg.Surrogate(fitted.schema, fitted.boosters, {**fitted.meta, "workloads": []}).predict(cols)
    for obj in sg.OBJECTIVES:
        np.testing.assert_allclose(unknown[obj].mid, known[obj].mid)
        assert np.all(unknown[obj].lo <= known[obj].lo) and np.all(unknown[obj].hi >= known[obj].hi), obj
        if new_q[obj] > seen_q[obj]:
            assert np.any(unknown[obj].hi > known[obj].hi), obj


def test_predictions_are_monotone_bands_in_range(fitted: sg.Surrogate, table_path: Path) -> None:
    table = kb.read(table_path)
    pred = fitted.predict(table.columns)
    for name, band in pred.items():
        assert np.all(band.lo <= band.mid) and np.all(band.mid <= band.hi), name
    assert np.all((pred["test_accuracy"].lo >= 0) & (pred["test_accuracy"].hi <= 1))
    assert np.all(pred["train_time_s"].lo > 0) and np.all(pred["peak_memory_mb"].lo > 0)
    # in-sample, the median tracks the truth closely (a broken model would not)
    _, y = training_columns(table.columns, "train_time_s")
    picked, _ = training_columns(table.columns, "train_time_s")
    mid = fitted.predict(picked)["train_time_s"].mid
    assert np.median(np.abs(mid - y) / y) < 0.1


def test_fitting_is_deterministic(table_path: Path) -> None:
    a = sg.fit_file(table_path, num_boost_round=20)
    b = sg.fit_file(table_path, num_boost_round=20)
    for objective in sg.OBJECTIVES:
        for alpha in sg.QUANTILES:
            assert a.boosters[objective][alpha].model_to_string() == b.boosters[objective][alpha].model_to_string()


def test_too_few_rows_is_a_surrogate_error() -> None:
    data = rows(4)
    with pytest.raises(SurrogateError, match="at least 5"):
        sg.fit({k: [r[k] for r in data] for k in data[0]}, num_boost_round=5)
    failed = [kb.row_from_result(make_result(Config(framework="torch"), "digits", status="oom"))] * 3
    with pytest.raises(SurrogateError, match="no trials with status 'ok'"):
        sg.fit({k: [r[k] for r in failed] for k in failed[0]}, num_boost_round=5)


# ---------------------------------------------------------------------------------- save/load


def test_a_model_names_the_shipped_table_by_its_repository_path_not_this_machines(
        fitted: sg.Surrogate, table_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import advisor.surrogate.io as sio

    meta = json.loads(sg.save(fitted, tmp_path / "a", table_path=table_path).read_text())
    assert meta["table"] == str(table_path)  # any other table keeps its path
    monkeypatch.setattr(sio, "shipped_table", lambda: table_path)
    meta = json.loads(sg.save(fitted, tmp_path / "b", table_path=table_path).read_text())
    assert meta["table"] == sio.SHIPPED_TABLE_LABEL == "surrogate/knowledge.csv.gz"
    assert meta["table_sha256"] == sg.file_sha256(table_path)


def test_save_load_round_trip_gives_identical_predictions(fitted: sg.Surrogate, table_path: Path,
                                                           tmp_path: Path) -> None:
    meta_path = sg.save(fitted, tmp_path / "model", table_path=table_path)
    meta = json.loads(meta_path.read_text())
    assert meta["table_sha256"] == sg.file_sha256(table_path)
    assert meta["row_counts"] == fitted.meta["row_counts"] and meta["lightgbm_version"]
    assert sorted(p.name for p in (tmp_path / "model").glob("*.txt"))[:3] == [
        "peak_memory_mb.q10.txt", "peak_memory_mb.q50.txt", "peak_memory_mb.q90.txt"]
    loaded = sg.load(tmp_path / "model")
    cols = kb.read(table_path).columns
    a, b = fitted.predict(cols), loaded.predict(cols)
    for name in sg.OBJECTIVES:
        assert np.array_equal(a[name].mid, b[name].mid) and np.array_equal(a[name].hi, b[name].hi)


def test_corrupt_model_file_is_named(fitted: sg.Surrogate, tmp_path: Path) -> None:
    sg.save(fitted, tmp_path / "m")
    bad = tmp_path / "m" / "test_accuracy.q50.txt"
    bad.write_text("tree\nversion=v4\nthis is not a model\n")
    with pytest.raises(SurrogateError, match=r"test_accuracy\.q50\.txt is corrupt"):
        sg.load(tmp_path / "m")
    bad.unlink()
    with pytest.raises(SurrogateError, match=r"test_accuracy\.q50\.txt is missing"):
        sg.load(tmp_path / "m")


def test_corrupt_or_missing_meta(fitted: sg.Surrogate, tmp_path: Path) -> None:
    with pytest.raises(SurrogateError, match="meta.json is missing"):
        sg.load(tmp_path / "nowhere")
    sg.save(fitted, tmp_path / "m")
    (tmp_path / "m" / "meta.json").write_text("{not json")
    with pytest.raises(SurrogateError, match=r"meta\.json is corrupt"):
        sg.load(tmp_path / "m")


_CORRUPT_META = [("time_baseline", bad) for bad in (
    None, "x", {"coefficients": {}}, {"coefficients": {"torch": [1.0, 2.0]}},
    {"coefficients": {"torch": [1.0, -1.0, 0.0, 0.0, 0.0]}},
    {"coefficients": {"torch": [1.0, float("nan"), 0.0, 0.0, 0.0]}},
    {"coefficients": {"torch": [1.0, 0.0, 0.0, 0.0, 0.0]}, "reference_gflops": 0.0})] + [
    ("memory_baseline", bad) for bad in (None, {"coefficients": {}}, {"coefficients": {"torch": [1.0, 2.0]}},
                                         {"coefficients": {"torch": [300.0, -1.0, 1.0]}})] + [
    ("band_offsets_new_workload", bad) for bad in ("x", {"train_time_s": "wide"}, {"train_time_s": float("inf")})] + [
    ("workloads", bad) for bad in ("x", [[1.0, 2.0]], [["a"] * 6])] + [
    ("accuracy_target", bad) for bad in (
        "x", {"landmark_fallback": 2.0}, {"landmark_fallback": None}, {})]


def _saved_with_meta(fitted: sg.Surrogate, folder: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """Save ``fitted`` to ``folder``, let ``edit`` change its meta in place, write it back."""
    meta_path = sg.save(fitted, folder)
    meta = json.loads(meta_path.read_text())
    edit(meta)
    meta_path.write_text(json.dumps(meta))
    return folder


@pytest.mark.parametrize(("key", "bad"), _CORRUPT_META)
def test_corrupt_meta_entries_are_refused_in_one_line(fitted: sg.Surrogate, tmp_path: Path, key: str,
                                                      bad: object) -> None:
    folder = _saved_with_meta(fitted, tmp_path / "m", lambda meta: meta.update({key: bad}))
    with pytest.raises(SurrogateError, match=rf"meta\.json is corrupt: '{key}'"):
        sg.load(folder)


def test_model_with_another_time_target_is_refused(fitted: sg.Surrogate, tmp_path: Path) -> None:
    # what earlier versions fitted: time per FLOP, and memory as is (no memory target written)
    folder = _saved_with_meta(fitted, tmp_path / "t", lambda meta: meta.update(
        time_target="log(train_time_s / total_flops)"))
    with pytest.raises(SurrogateError, match=r"models time as 'log\(train_time_s / total_flops\)'.*refit"):
        sg.load(folder)
    folder = _saved_with_meta(fitted, tmp_path / "m", lambda meta: meta.pop("memory_target"))
    with pytest.raises(SurrogateError, match=r"models memory as None.*refit"):
        sg.load(folder)


def test_mismatched_feature_schema_is_refused(fitted: sg.Surrogate, tmp_path: Path) -> None:
    def rename(meta: dict[str, Any]) -> None:
        meta["feature_schema"]["features"][3][0] = "dataset_name"

    with pytest.raises(SurrogateError, match="feature schema does not match.*feature 3 is 'dataset_name'"):
        sg.load(_saved_with_meta(fitted, tmp_path / "m", rename))


def test_model_file_with_other_features_is_refused(fitted: sg.Surrogate, tmp_path: Path) -> None:
    sg.save(fitted, tmp_path / "m")
    path = tmp_path / "m" / "train_time_s.q10.txt"
    path.write_text(path.read_text().replace("feature_names=framework", "feature_names=dataset", 1))
    with pytest.raises(SurrogateError, match=r"train_time_s\.q10\.txt has \d+ features that do not match"):
        sg.load(tmp_path / "m")


def test_table_hash_mismatch_is_reported(fitted: sg.Surrogate, table_path: Path, tmp_path: Path) -> None:
    sg.save(fitted, tmp_path / "m", table_path=table_path)
    loaded = sg.load(tmp_path / "m")
    assert sg.table_warning(loaded, table_path) is None
    other = tmp_path / "other.csv.gz"
    kb.write(rows(6, seed=99), other)
    warning = sg.table_warning(loaded, other)
    assert warning is not None and "different table" in warning and str(other) in warning


def test_lean_import_skips_scikit_learn() -> None:
    code = ("import sys; from advisor.surrogate._compat import import_lightgbm; lgb = import_lightgbm(lean=True); "
            "assert 'sklearn' not in sys.modules, 'sklearn loaded'; lgb.Booster; "
            "import sklearn; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# ---------------------------------------------------------------------------------- evaluate


def test_spearman() -> None:
    assert sg.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert sg.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert sg.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)
    assert sg.spearman([1, 1, 1], [1, 2, 3]) is None


def test_grouped_cross_validation_on_a_learnable_table(table_path: Path) -> None:
    table = kb.read(table_path)
    result = sg.evaluate(table.columns, table=str(table_path), num_boost_round=ROUNDS,
                         schemes=("leave-one-dataset-out", "random-5-fold", "leave-one-hardware-out"))
    time_lodo = result.get("train_time_s", "leave-one-dataset-out")
    time_rand = result.get("train_time_s", "random-5-fold")
    assert time_lodo is not None and time_rand is not None
    assert time_lodo.n_folds == 3 and time_rand.n_folds == 5
    # time is a deterministic function of FLOPs at the calibrated speed and of steps here, which the
    # baseline spans: it must transfer across datasets almost exactly
    assert time_rand.mape is not None and time_rand.mape < 0.05
    assert time_lodo.mape is not None and time_lodo.mape < 0.05
    assert time_rand.spearman is not None and time_rand.spearman > 0.98
    acc = result.get("test_accuracy", "random-5-fold")
    assert acc is not None and acc.mae is not None and acc.mae < 0.05 and acc.mape is None
    for f in result.figures:
        assert f.coverage is not None and 0.0 <= f.coverage <= 1.0
        assert f.spearman is None or -1.0 <= f.spearman <= 1.0
    # each held-out dataset alone: its rows add up to the pooled figure's, and their error averages to it
    groups = time_lodo.by_group
    assert set(groups) == set(table.columns["dataset_name"]) and time_rand.by_group == {}
    assert sum(g["n_rows"] for g in groups.values()) == time_lodo.n_rows
    pooled = sum(g["mape"] * g["n_rows"] for g in groups.values()) / time_lodo.n_rows
    assert pooled == pytest.approx(time_lodo.mape)
    # where the error comes from: the kinds of run partition the rows, and their shares of the summed error add up
    for f in (time_lodo, result.get("test_accuracy", "leave-one-dataset-out")):
        assert f is not None and f.by_kind and sum(k["n_rows"] for k in f.by_kind.values()) == f.n_rows
        assert sum(k["share"] for k in f.by_kind.values()) == pytest.approx(1.0)
        key = "mape" if f.objective == "train_time_s" else "mae"
        pooled = sum(k[key] * k["n_rows"] for k in f.by_kind.values()) / f.n_rows
        assert pooled == pytest.approx(getattr(f, key))
    # one CPU profile only: no hardware-held-out scheme
    assert result.get("train_time_s", "leave-one-hardware-out") is None
    assert any("leave-one-hardware-out" in s for s in result.skipped)


def test_cross_validation_exposes_an_unlearnable_target(table_path: Path) -> None:
    # The same table with times shuffled: the figures must get much worse, or they prove nothing.
    table = kb.read(table_path)
    cols = {k: list(v) for k, v in table.columns.items()}
    rng = np.random.default_rng(0)
    cols["train_time_s"] = list(rng.permutation(np.array(cols["train_time_s"], dtype=object)))
    result = sg.evaluate(cols, num_boost_round=ROUNDS, schemes=("random-5-fold",), objectives=("train_time_s",))
    f = result.get("train_time_s", "random-5-fold")
    assert f is not None and f.mape is not None and f.mape > 0.5


def test_model_card(fitted: sg.Surrogate, table_path: Path, tmp_path: Path) -> None:
    table = kb.read(table_path)
    result = sg.evaluate(table.columns, num_boost_round=30, schemes=("random-5-fold", "leave-one-dataset-out"),
                         objectives=("train_time_s",))
    path = sg.model_card(result, meta={**fitted.meta, "advisor_version": "0.1.0"},
                         summary=kb.summarize(table), path=tmp_path / "MODEL_CARD.md")
    text = path.read_text()
    assert "| train_time_s | random-5-fold | 5 |" in text
    for name in set(table.columns["dataset_name"]):  # each held-out dataset's own row
        assert f"| train_time_s | leave-one-dataset-out | {name} |" in text
    assert fitted.meta["table_sha256"] in text
    assert "Where not to trust it" in text and "digits" in text
    assert "landmark" in text and "time_baseline" in text
    assert "| train_time_s | runs under 1 s |" in text or "| train_time_s | runs of 1 s or more |" in text


def test_error_composition_splits_short_runs_and_runs_that_did_not_learn() -> None:
    from advisor.surrogate.evaluate import error_composition

    y = np.array([0.5, 2.0, 10.0, 20.0])
    got = error_composition("train_time_s", y, y * np.array([3.0, 1.5, 1.1, 1.0]), np.full(4, 10.0))
    short, rest = got["runs under 1 s"], got["runs of 1 s or more"]
    assert short == {"n_rows": 1, "mape": pytest.approx(2.0), "share": pytest.approx(2.0 / 2.6)}
    assert rest["n_rows"] == 3 and rest["mape"] == pytest.approx(0.6 / 3)
    # chance is 1 / classes: 0.15 of 10 classes and 0.55 of 2 (chance 0.5, 0.6 not reached) did not learn
    acc = np.array([0.15, 0.9, 0.55, 0.95])
    got = error_composition("test_accuracy", acc, acc + np.array([0.4, 0.0, 0.2, 0.02]), np.array([10, 10, 2, 2]))
    failed, learned = got["runs that did not learn (within 0.1 of chance)"], got["runs that learned"]
    assert failed["n_rows"] == 2 and failed["mae"] == pytest.approx(0.3) and learned["mae"] == pytest.approx(0.01)
    assert error_composition("peak_memory_mb", y, y, np.full(4, 10.0)) == {}


def test_model_card_names_held_out_groups_whose_band_covers_too_little() -> None:
    from advisor.surrogate._card import _narrow_groups
    from advisor.surrogate.evaluate import Evaluation, Figures

    groups = {"cifar10": {"n_rows": 40, "spearman": 0.9, "mape": 0.2, "mae": None, "coverage": 0.41},
              "mnist": {"n_rows": 60, "spearman": 0.9, "mape": 0.1, "mae": None, "coverage": 0.98}}
    pooled = Figures("peak_memory_mb", "leave-one-dataset-out", 100, 2, 0.9, 0.14, None, 0.75, by_group=groups)
    lines = _narrow_groups(Evaluation(table="t", n_rows=100, figures=(pooled,), skipped=()))
    assert len(lines) == 1 and "peak_memory_mb with cifar10 held out (41.0%)" in lines[0] and "mnist" not in lines[0]
    covered = Figures("peak_memory_mb", "leave-one-dataset-out", 60, 1, 0.9, 0.1, None, 0.98,
                      by_group={"mnist": groups["mnist"]})
    assert _narrow_groups(Evaluation(table="t", n_rows=60, figures=(covered,), skipped=())) == []


def test_repeat_noise_is_the_spread_of_one_config_over_seeds() -> None:
    from advisor.surrogate.evaluate import repeat_noise

    data = rows(40, seed=3)
    ok = [r for r in data if r["status"] == "ok" and not r["contended"]][:2]
    repeats = []
    for r, (acc, secs) in zip(ok, ((0.9, 10.0), (0.5, 4.0))):
        for k, (a, t) in enumerate(((acc, secs), (acc - 0.1, secs * 1.5))):
            repeats.append(dict(r, trial_id=f"{r['trial_id']}-r{k}", cfg_seed=100 + k, test_accuracy=a, train_time_s=t))
    cols = {k: [row[k] for row in repeats] for k in repeats[0]}
    noise = repeat_noise(cols)
    # pairs: each row is half the pair's gap from its median
    assert noise["test_accuracy"] == {"groups": 2, "rows": 4, "mae": pytest.approx(0.05),
                                      "loo_mae": pytest.approx(0.1)}  # each run from the other: the whole gap
    assert noise["train_time_s"]["groups"] == 2 and noise["train_time_s"]["mape"] == pytest.approx(0.2)
    # 15 s predicted as 10 s is 1/3 off, 10 s predicted as 15 s is 1/2 off
    assert noise["train_time_s"]["loo_mape"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert repeat_noise({k: [r[k] for r in data] for k in data[0]}) == {}  # no repeats


# ------------------------------------------------------------------------- real trials, end to end


@pytest.mark.slow
def test_table_from_real_harness_trials(tmp_path: Path) -> None:
    """Five real 1-2 epoch scikit-learn trials on digits -> Optuna study -> export -> features -> fit."""
    pytest.importorskip("sklearn")
    import optuna
    from optuna.trial import TrialState, create_trial

    from advisor.harness import Limits, run_trial

    configs = [
        Config(framework="sklearn", batch_size=b, epochs=e, learning_rate=lr, optimizer=o)
        for b, e, lr, o in ((32, 1, 0.01, "adam"), (64, 2, 0.003, "adam"), (128, 1, 0.05, "sgd"),
                            (256, 2, 0.1, "sgd"), (48, 1, 0.002, "adam"))
    ]
    results = [run_trial(Workload(dataset="digits", model="mlp"), c, limits=Limits(wall_time_s=300),
                         workdir=tmp_path / "trials") for c in configs]
    assert [r.status for r in results] == ["ok"] * 5, [r.error for r in results]

    url = f"sqlite:///{tmp_path / 'real.db'}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="real", storage=url, directions=["minimize", "maximize", "minimize"])
    for r in results:
        study.add_trial(create_trial(state=TrialState.COMPLETE,
                                     values=[r.train_time_s, r.test_accuracy, r.peak_memory_mb],
                                     user_attrs={kb.RESULT_ATTR: r.to_dict()}))
    out = tmp_path / "real.csv.gz"
    assert int(kb.export(url, out=out)) == 5
    table = kb.read(out)
    assert set(table["trial_id"]) == {r.trial_id for r in results}
    assert set(table["dataset_name"]) == {"digits"} and set(table["framework"]) == {"sklearn"}
    assert all(t > 0 for t in table["train_time_s"]) and all(0.3 < a <= 1.0 for a in table["test_accuracy"])
    assert all(m > 10 for m in table["peak_memory_mb"])
    values = F.feature_values(table.columns)
    assert list(values["steps_per_epoch"]) == [math.ceil(1437 / c.batch_size) for c in configs]
    assert list(values["total_flops"]) == pytest.approx([r.flops_per_sample * 1437 * r.config.epochs for r in results])
    # contended timings (this machine is shared) never train the time model
    _, times = training_columns(table.columns, "train_time_s")
    assert len(times) == sum(1 for r in results if not r.contended)
    model = sg.fit(table.columns, objectives=("test_accuracy", "peak_memory_mb"), num_boost_round=20)
    pred = model.predict(table.columns)
    assert np.all((pred["test_accuracy"].mid >= 0) & (pred["test_accuracy"].mid <= 1))
    assert np.all(np.isfinite(pred["peak_memory_mb"].mid))


def test_the_device_model_is_a_feature_of_gpu_rows_only() -> None:
    """GPU rows of a known GPU model carry the device model's expected training time; CPU rows and
    unknown GPUs are NaN (the boosters learn nothing from it until the table holds GPU trials)."""
    from advisor import devices
    from advisor.records import Config
    from advisor.surrogate.features import DEVICE_FEATURE, feature_values

    cfg = Config(framework="torch", batch_size=128, epochs=2, optimizer="adam", learning_rate=1e-3)
    gpu = make_result(Config(**{**cfg.to_dict(), "device": "cuda"}), "cifar10", device_kind="gpu")
    gpu = gpu.replace(gpu_model="NVIDIA A100-SXM4-80GB")
    unknown = gpu.replace(gpu_model="Some Future GPU")
    cpu = make_result(cfg, "cifar10")
    cols = {k: [kb.row_from_result(r)[k] for r in (gpu, unknown, cpu)] for k in kb.COLUMNS}
    got = feature_values(cols)[DEVICE_FEATURE]
    step = devices.estimate_model_step(devices.get_accelerator("A100"), gpu.config, gpu.workload.model,
                                       tuple(gpu.input_shape), gpu.num_classes)
    steps = -(-gpu.train_samples // 128) * 2
    assert got[0] == pytest.approx(devices.run_seconds(step, steps, "torch")[1]) and got[0] > step.expected_s * steps and np.isnan(got[1]) and np.isnan(got[2])


def test_a_dataset_the_model_never_saw_gets_the_widest_band(fitted: sg.Surrogate, table_path: Path) -> None:
    """Three calibrated offsets, each at least the one before: a seen workload, a new size of a seen
    dataset, a dataset never seen (folds that hold out whole datasets set it)."""
    from advisor.surrogate.model import seen_datasets

    seen, new, data = (fitted.meta[k] for k in ("band_offsets", "band_offsets_new_workload", "band_offsets_new_dataset"))
    assert set(data) == set(new) and all(data[k] >= new[k] >= seen[k] for k in data)
    cols = kb.read(table_path).columns
    row = {k: [v[0]] for k, v in cols.items()}
    other = dict(row, input_h=[48], input_w=[48], input_c=[3], num_classes=[7], dataset_name=["other.npz"],
                 landmark=[0.5])
    x_seen, x_new = F.encode(row, fitted.schema), F.encode(other, fitted.schema)
    assert seen_datasets(x_seen, fitted.meta["workloads"])[0] and not seen_datasets(x_new, fitted.meta["workloads"])[0]
    # the new dataset's offset is the one applied to it, and only to it (time: log space, no clipping)
    wider = sg.Surrogate(fitted.schema, fitted.boosters,
                         {**fitted.meta, "band_offsets_new_dataset": {**data, "train_time_s": data["train_time_s"] + 0.2}})
    for x, moved in ((x_new, True), (x_seen, False)):
        a, b = fitted.predict_matrix(x)["train_time_s"], wider.predict_matrix(x)["train_time_s"]
        ratio = (b.hi[0] / b.lo[0]) / (a.hi[0] / a.lo[0])
        assert ratio == pytest.approx(np.exp(0.4) if moved else 1.0, rel=1e-6)


def test_device_holdout_scores_the_device_model_on_real_gpu_trials() -> None:
    # The H200 trials run for the device model (benchmarks/gpu/device_run.sh), beside CPU rows: held
    # out, their time is the device model's answer and their accuracy the CPU-fitted models'.
    gpu_table = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "raw" / "gpu-h200" / "gpu-trials.csv.gz"
    gpu_rows = kb.read(gpu_table).rows
    table = kb.Table.from_rows(rows(60) + gpu_rows)
    held = sg.device_holdout(table.columns, num_boost_round=30)
    n_ok = sum(1 for r in gpu_rows if r["status"] == "ok")
    assert held["time"]["rows"] == n_ok and held["time"]["gpu_models"] == ["NVIDIA H200"]
    # physics within a factor of two of every measured run, in the median (warm-up included)
    assert 0.5 < held["time"]["median_ratio"] < 2.0 and held["time"]["median_error"] < 0.6
    assert held["accuracy"]["rows"] == n_ok and 0.0 <= held["accuracy"]["coverage"] <= 1.0
    # no GPU row: nothing to report
    assert sg.device_holdout(kb.Table.from_rows(rows(30)).columns, num_boost_round=30) == {}


def test_a_run_under_a_time_budget_teaches_the_epochs_it_ran() -> None:
    from advisor.surrogate._curves import curve_epochs, epochs_run, expand_curves

    cols = {"trial_id": ["a", "b", "c", "d"], "status": ["ok", "ok", "pruned", "ok"], "synthetic": [False] * 4,
            "cfg_epochs": [60, 5, 10, 60], "epochs_completed": [8, 5, 3, 60],
            "cfg_time_budget_s": [60.0, 0.0, 0.0, 0.0], "train_time_s": [56.0, 30.0, 9.0, 70.0],
            "test_accuracy": [0.9, 0.8, 0.5, 0.95],
            "accuracy_curve": [[0.5 + 0.05 * k for k in range(8)], [0.8] * 5, None, [0.95] * 60],
            "epoch_times": [[7.0] * 8, [6.0] * 5, None, [70 / 60] * 60]}
    assert epochs_run(cols) == [8, 5, 3, 60]
    assert epochs_run({k: v for k, v in cols.items() if k != "cfg_time_budget_s"}) == [60, 5, 3, 60]  # an older table
    expanded = expand_curves(cols)
    budgeted = [k for k, tid in enumerate(expanded["trial_id"]) if tid == "a"]
    assert sorted(expanded["cfg_epochs"][k] for k in budgeted) == sorted(curve_epochs(8) + [8])
    assert all(expanded["schedule_epochs"][k] == 8 for k in budgeted)  # its schedule spanned the 8 epochs it ran


def test_a_run_stopped_at_its_target_teaches_the_epochs_it_ran_of_the_schedule_it_had() -> None:
    from advisor.surrogate._curves import epochs_run, expand_curves

    cols = {"trial_id": ["a", "b"], "status": ["ok", "ok"], "synthetic": [False] * 2,
            "cfg_epochs": [30, 5], "epochs_completed": [6, 5], "cfg_stop_at_accuracy": [0.9, 0.0],
            "train_time_s": [42.0, 30.0], "test_accuracy": [0.91, 0.8],
            "accuracy_curve": [[0.5, 0.6, 0.7, 0.8, 0.85, 0.91], [0.8] * 5], "epoch_times": [[7.0] * 6, [6.0] * 5]}
    assert epochs_run(cols) == [6, 5]
    expanded = expand_curves(cols)
    stopped = [k for k, tid in enumerate(expanded["trial_id"]) if tid == "a"]
    assert sorted(expanded["cfg_epochs"][k] for k in stopped)[-1] == 6
    # read at epoch 6 of a 30-epoch schedule, not as a 6-epoch result
    assert all(expanded["schedule_epochs"][k] == 30 for k in stopped)
    assert [expanded["schedule_epochs"][k] for k, tid in enumerate(expanded["trial_id"]) if tid == "b"][0] == 5


def test_a_shared_level_error_cancels_in_the_calibrated_difference() -> None:
    from advisor.surrogate._calibration import pair_offset

    rng = np.random.default_rng(0)
    workloads = np.repeat([0, 1, 2], 200)
    y = rng.uniform(0.5, 0.9, len(workloads))
    level = np.array([0.2, -0.15, 0.1])[workloads]  # each held-out dataset's level is off, by a lot
    mid = y + level + rng.normal(0.0, 0.01, len(y))  # but the differences within one are nearly right
    width = pair_offset(y, mid, workloads, upper_half=False, seed=0)
    assert width is not None and 0.01 < width < 0.03  # about 1.28 * sqrt(2) * 0.01, not the 0.1-0.2 level error
    assert pair_offset(y[:1], mid[:1], workloads[:1], upper_half=False, seed=0) is None  # no pair at all
    upper = pair_offset(y, mid, workloads, upper_half=True, seed=0)
    assert upper is not None and 0.01 < upper < 0.03


def test_the_shipped_kind_of_fit_records_the_pair_offsets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from _knowledge_rows import fitted_table

    from advisor import surrogate as sg

    _, model_dir = fitted_table(tmp_path, 240, seed=3, rounds=40)
    pairs = sg.load(model_dir).meta.get("pair_offsets_new_dataset")
    assert set(pairs) <= {"train_time_s", "test_accuracy", "peak_memory_mb"} and "test_accuracy" in pairs
    assert all(v > 0 for v in pairs.values())


def test_timing_rows_on_random_data_train_every_fold_and_are_scored_in_none(table_path: Path) -> None:
    """Synthetic rows (timing runs on random data) join every fold's training but are never held
    out or scored: the figures stay about the real datasets, whatever timing runs the table holds."""
    table = kb.read(table_path)
    fake = [{**r, "trial_id": f"synthetic-{i}", "dataset_name": "synthetic:12x12x3", "synthetic": True,
             "input_h": 12, "input_w": 12, "input_c": 3} for i, r in enumerate(table.rows[:40])]
    both = kb.Table.from_rows(table.rows + fake)
    plain = sg.evaluate(table.columns, num_boost_round=30, schemes=("leave-one-dataset-out", "random-5-fold"),
                        objectives=("train_time_s",))
    mixed = sg.evaluate(both.columns, num_boost_round=30, schemes=("leave-one-dataset-out", "random-5-fold"),
                        objectives=("train_time_s",))
    for scheme in ("leave-one-dataset-out", "random-5-fold"):
        a, b = plain.get("train_time_s", scheme), mixed.get("train_time_s", scheme)
        assert a is not None and b is not None and a.n_rows == b.n_rows and a.n_folds == b.n_folds
    lodo = mixed.get("train_time_s", "leave-one-dataset-out")
    assert lodo is not None and set(lodo.by_group) == set(table.columns["dataset_name"])


def test_timing_rows_on_random_data_calibrate_no_band(table_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Synthetic rows train the time model, but no band is calibrated on them: held out as a 'new
    dataset', a shape of random data says nothing of how far a real dataset's time may lie from its
    prediction. Every calibration scores real rows only, and the difference-of-two-predictions
    offset pairs real rows only."""
    import advisor.surrogate.model as model_module
    from advisor.surrogate._targets import _INDEX

    table = kb.read(table_path)
    fake = [{**r, "trial_id": f"synthetic-{i}", "dataset_name": "synthetic:12x12x3", "synthetic": True,
             "input_h": 12, "input_w": 12, "input_c": 3} for i, r in enumerate(table.rows[:60])]
    calls, pairs = [], []
    real_calibrate, real_pairs = model_module._calibrate, model_module.pair_offset

    def calibrate(lgb, x, members, y, schema, **kw):  # type: ignore[no-untyped-def]
        calls.append((x[:, _INDEX["input_h"]] == 12, kw["score_rows"]))
        return real_calibrate(lgb, x, members, y, schema, **kw)

    def pair_offset(units, mid, groups, **kw):  # type: ignore[no-untyped-def]
        pairs.append(len(units))
        return real_pairs(units, mid, groups, **kw)

    monkeypatch.setattr(model_module, "_calibrate", calibrate)
    monkeypatch.setattr(model_module, "pair_offset", pair_offset)
    model = sg.fit(kb.Table.from_rows(table.rows + fake).columns, num_boost_round=30, objectives=("train_time_s",))
    assert len(calls) == 3 and model.meta["band_offsets_new_dataset"]
    for synthetic, scored in calls:
        assert synthetic.any() and not scored[synthetic].any() and scored[~synthetic].any()
    real_rows = sum(1 for r in table.rows if r["status"] in ("ok", "pruned") and not r["contended"] and r["train_time_s"])
    assert pairs == [real_rows]
