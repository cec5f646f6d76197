"""benchmarks/bench_recommend_quality.py: its pure helpers only (no trial, no surrogate fit)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_recommend_quality as rq  # noqa: E402

from advisor import knowledge  # noqa: E402
from advisor.surrogate import shipped_table  # noqa: E402


def test_heldout_drops_exactly_the_workloads_rows(tmp_path: Path) -> None:
    table = knowledge.read(shipped_table())
    pairs = list(zip(table["dataset_name"], table["train_samples"]))
    expected = sum(1 for p in pairs if p == ("digits", 500))
    assert expected > 0
    kept, dropped = rq.heldout(table, "digits", 500)
    assert dropped == expected and len(kept) == len(table) - expected
    assert ("digits", 500) not in set(zip(kept["dataset_name"], kept["train_samples"]))
    # every other workload keeps all its rows, and the held-out table round-trips through a file
    others = [p for p in pairs if p != ("digits", 500)]
    assert sorted(zip(kept["dataset_name"], kept["train_samples"]), key=str) == sorted(others, key=str)
    path = tmp_path / "heldout.csv.gz"
    assert knowledge.write(kept, path) == len(kept)
    assert knowledge.read(path)["trial_id"] == kept["trial_id"]


def test_hypervolume_matches_a_hand_computed_value() -> None:
    # (time, accuracy, memory), reference (4 s, 0, 2 MiB). Boxes: 3 x 0.5 x 1 = 1.5 and 2 x 0.8 x 1 = 1.6,
    # overlapping in 2 x 0.5 x 1 = 1.0: union 2.1, divided by the time and memory scales 4 x 2.
    assert rq.hv([(1.0, 0.5, 1.0), (2.0, 0.8, 1.0)], (4.0, 0.0, 2.0)) == pytest.approx(2.1 / 8)
    # a dominated third point adds nothing; no point gives 0
    assert rq.hv([(1.0, 0.5, 1.0), (2.0, 0.8, 1.0), (3.0, 0.4, 1.5)], (4.0, 0.0, 2.0)) == pytest.approx(2.1 / 8)
    assert rq.hv([], (4.0, 0.0, 2.0)) == 0.0
    assert rq.reference([(1.0, 0.5, 10.0), (2.0, 0.9, 5.0)]) == pytest.approx((2.2, 0.0, 11.0))


def test_plans_cap_epochs_and_map_presets_to_frameworks() -> None:
    defaults = dict(rq.default_configs("digits", 20))
    assert set(defaults) == {"tensorflow-mnist", "caffe-mnist", "torch-mnist", "theano-mnist"}
    assert {k: c.framework for k, c in defaults.items()} == {
        "tensorflow-mnist": "tensorflow", "caffe-mnist": "torch", "torch-mnist": "torch", "theano-mnist": "sklearn"}
    assert defaults["theano-mnist"].epochs == 20 and defaults["caffe-mnist"].epochs == 11
    randoms = rq.random_configs(rq.Job("mnist", "2000"), 8, 3)
    assert [c.framework for c in randoms[:4]] == ["torch", "tensorflow", "onnxruntime", "sklearn"]
    assert all(1 <= c.epochs <= 3 and c.threads == 1 for c in randoms)
    assert randoms == rq.random_configs(rq.Job("mnist", "2000"), 8, 3)  # deterministic, so resumable
    space = rq.tuned_space(2)
    assert all(p.high == 2 for p in space.params if p.name.endswith(".epochs"))
    assert rq.paths_for(True).report != rq.RESULTS / "recommend.md"


def test_target_a_needs_the_defaults_accuracy_in_a_third_of_its_time() -> None:
    import dataclasses

    from _knowledge_rows import make_result
    from advisor.records import Config

    base = make_result(Config(framework="torch"), "digits")
    default = dataclasses.replace(base, test_accuracy=0.95, train_time_s=9.0)
    run = lambda acc, s, status="ok": dataclasses.replace(base, test_accuracy=acc, train_time_s=s,  # noqa: E731
                                                           status=status)
    assert rq.meets_a(run(0.95, 3.0), default)  # equal accuracy, exactly a third
    assert not rq.meets_a(run(0.96, 3.1), default)  # too slow
    assert not rq.meets_a(run(0.949, 1.0), default)  # not accurate enough
    assert not rq.meets_a(run(0.99, 1.0, "diverged"), default) and not rq.meets_a(None, default)
