"""The knowledge base: rows from results, strict reading, idempotent merges, export from Optuna."""

from __future__ import annotations

import csv
import gzip
import io
import math
from pathlib import Path

import pytest

import advisor.knowledge as kb
from advisor.errors import KnowledgeBaseError, StorageError
from advisor.records import Config, HardwareProfile

from _knowledge_rows import CPU_PROFILE, make_result, make_results, rows


def _rewrite(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    """Rewrite a table file's raw CSV records through ``edit(records)`` (to plant defects)."""
    records = list(csv.reader(io.StringIO(gzip.decompress(path.read_bytes()).decode())))
    edit(records)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(records)
    path.write_bytes(gzip.compress(buf.getvalue().encode()))


@pytest.fixture
def table_file(tmp_path: Path) -> Path:
    path = tmp_path / "kb.csv.gz"
    kb.write(rows(12, seed=3), path)
    return path


# ------------------------------------------------------------------------------------ rows


def test_row_from_result_flattens_every_column() -> None:
    cfg = Config(framework="torch", batch_size=32, learning_rate=0.02, epochs=3, optimizer="momentum",
                 momentum=0.9, threads=2, onednn=False)
    result = make_result(cfg, "mnist", train=6000)
    row = kb.row_from_result(result, CPU_PROFILE)
    assert list(row) == list(kb.COLUMNS)
    assert row["schema_version"] == kb.SCHEMA_VERSION
    assert (row["input_h"], row["input_w"], row["input_c"], row["num_classes"]) == (28, 28, 1, 10)
    assert row["cfg_batch_size"] == 32 and row["cfg_optimizer"] == "momentum" and row["cfg_onednn"] is False
    assert row["cfg_xla"] is None and row["cfg_execution_mode"] == ""
    assert row["cores_granted"] == 2 and row["threadpools"] == "openblas=2"
    assert row["train_samples"] == 6000 and row["status"] == "ok"
    assert row["epoch_times"] == pytest.approx(result.epoch_times, rel=1e-6)
    # hardware joined from the matching profile: GEMM at the trial's 2 threads, 1 thread, best
    assert (row["hw_gemm_gflops_1"], row["hw_gemm_gflops_threads"], row["hw_gemm_gflops_max"]) == (40.0, 76.0, 76.0)
    assert (row["hw_cores"], row["hw_memory_gb"]) == (2, 8.0)
    assert kb.config_from_row(row) == cfg


def test_hardware_of_another_machine_is_not_joined() -> None:
    other = HardwareProfile(profile_id="someoneelse", cpu_model="x", physical_cores=64, logical_cores=128,
                            affinity=(0,), memory_gb=512.0, gemm_gflops={"1": 1.0})
    row = kb.row_from_result(make_result(Config(framework="sklearn"), "digits"), other)
    assert row["hw_gemm_gflops_1"] is None and row["hw_cores"] is None


def test_gflops_at_uses_largest_calibrated_count_below() -> None:
    gemm = {"1": 10.0, "4": 35.0}
    assert kb.gflops_at(gemm, 1) == 10.0
    assert kb.gflops_at(gemm, 3) == 10.0
    assert kb.gflops_at(gemm, 8) == 35.0


def test_docstring_documents_every_column() -> None:
    doc = kb.__doc__ or ""
    # The cfg_ columns are documented once, by their knob declarations.
    assert [c for c in kb.COLUMNS if not c.startswith("cfg_") and c not in doc] == []
    assert "cfg_<knob>" in doc
    from advisor.knobs import KNOB_NAMES, get_knob

    assert [c[4:] for c in kb.COLUMNS if c.startswith("cfg_")] == list(KNOB_NAMES)
    assert all(get_knob(name).help for name in KNOB_NAMES)


# ----------------------------------------------------------------------------- write / read


def test_write_read_round_trip_keeps_values(tmp_path: Path) -> None:
    original = rows(30, seed=1)
    failed = kb.row_from_result(make_result(Config(framework="torch"), "digits", status="oom"), CPU_PROFILE)
    original.append(failed)
    path = tmp_path / "t.csv.gz"
    assert kb.write(original, path) == 31
    table = kb.read(path)
    assert len(table) == 31
    assert table.rows == original
    back = table.rows[-1]
    assert back["status"] == "oom" and back["train_time_s"] is None and back["error"] == "constructed failure"


def test_writes_are_deterministic(tmp_path: Path) -> None:
    data = rows(5)
    kb.write(data, tmp_path / "a.csv.gz")
    kb.write(data, tmp_path / "b.csv.gz")
    assert (tmp_path / "a.csv.gz").read_bytes() == (tmp_path / "b.csv.gz").read_bytes()


def test_non_finite_floats_are_stored_as_unknown(tmp_path: Path) -> None:
    row = rows(1)[0]
    row["final_loss"] = math.nan
    kb.write([row], tmp_path / "t.csv.gz")
    assert kb.read(tmp_path / "t.csv.gz").rows[0]["final_loss"] is None


def test_missing_column_is_named(table_file: Path) -> None:
    def drop(records: list[list[str]]) -> None:
        i = records[0].index("test_accuracy")
        for r in records:
            del r[i]

    _rewrite(table_file, drop)
    with pytest.raises(KnowledgeBaseError, match=r"kb\.csv\.gz: missing column 'test_accuracy'"):
        kb.read(table_file)


def test_extra_column_is_named(table_file: Path) -> None:
    def add(records: list[list[str]]) -> None:
        records[0].append("favourite_colour")
        for r in records[1:]:
            r.append("blue")

    _rewrite(table_file, add)
    with pytest.raises(KnowledgeBaseError, match="unknown column 'favourite_colour'"):
        kb.read(table_file)


@pytest.mark.parametrize("column, bad, kind", [
    ("test_accuracy", "ninety", "float"),
    ("cfg_batch_size", "3.5", "int"),
    ("contended", "maybe", "bool"),
    ("epoch_times", "[1.0,", "json"),
    ("accuracy_curve", "1,2", "json"),
])
def test_wrong_type_names_file_column_and_row(table_file: Path, column: str, bad: str, kind: str) -> None:
    def plant(records: list[list[str]]) -> None:
        records[7][records[0].index(column)] = bad  # data row 7

    _rewrite(table_file, plant)
    with pytest.raises(KnowledgeBaseError) as info:
        kb.read(table_file)
    message = str(info.value)
    assert "kb.csv.gz" in message and f"column {column!r}, row 7" in message and kind in message
    assert "\n" not in message


def test_duplicate_trial_id_is_named(table_file: Path) -> None:
    def dup(records: list[list[str]]) -> None:
        i = records[0].index("trial_id")
        records[5][i] = records[2][i]

    _rewrite(table_file, dup)
    with pytest.raises(KnowledgeBaseError, match=r"'trial_id', row 5 repeats trial id '\w+' of row 2"):
        kb.read(table_file)


def test_other_schema_version_is_refused(table_file: Path) -> None:
    _rewrite(table_file, lambda records: records[3].__setitem__(0, "99"))
    with pytest.raises(KnowledgeBaseError, match="'schema_version', row 3 is 99"):
        kb.read(table_file)


def test_not_a_gzip_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv.gz"
    path.write_text("trial_id\n1\n")
    with pytest.raises(KnowledgeBaseError, match="not a gzip-compressed CSV"):
        kb.read(path)
    with pytest.raises(KnowledgeBaseError, match="does not exist"):
        kb.read(tmp_path / "nothing.csv.gz")


# ------------------------------------------------------------------------------------ merge


def test_merge_is_idempotent(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv.gz", tmp_path / "b.csv.gz"
    kb.write(rows(10, seed=1), a)
    kb.write(rows(7, seed=2), b)
    stats = kb.merge([a, a], tmp_path / "aa.csv.gz")
    assert (stats.rows_in, stats.rows_out, stats.duplicates) == (20, 10, 10)
    assert kb.read(tmp_path / "aa.csv.gz").rows == kb.read(a).rows
    kb.merge([a, b], tmp_path / "ab.csv.gz")
    kb.merge([a, b], tmp_path / "ab2.csv.gz")
    again = kb.merge([tmp_path / "ab.csv.gz", a, b], tmp_path / "ab3.csv.gz")
    assert len(kb.read(tmp_path / "ab.csv.gz")) == 17
    assert (tmp_path / "ab.csv.gz").read_bytes() == (tmp_path / "ab2.csv.gz").read_bytes()
    assert again.rows_out == 17 and again.duplicates == 17


def test_merge_fills_unknown_cells(tmp_path: Path) -> None:
    result = make_result(Config(framework="torch"), "digits")
    bare = kb.row_from_result(result)  # exported where the hardware profile was unknown
    joined = kb.row_from_result(result, CPU_PROFILE)
    kb.write([bare], tmp_path / "a.csv.gz")
    kb.write([joined], tmp_path / "b.csv.gz")
    kb.merge([tmp_path / "a.csv.gz", tmp_path / "b.csv.gz"], tmp_path / "c.csv.gz")
    merged = kb.read(tmp_path / "c.csv.gz").rows
    assert len(merged) == 1 and merged[0]["hw_gemm_gflops_max"] == 76.0


def test_conflicting_rows_raise_naming_the_id(tmp_path: Path) -> None:
    data = rows(3)
    changed = [dict(r) for r in data]
    changed[1]["test_accuracy"] = 0.123
    kb.write(data, tmp_path / "a.csv.gz")
    kb.write(changed, tmp_path / "b.csv.gz")
    with pytest.raises(KnowledgeBaseError, match=f"Trial id '{data[1]['trial_id']}'.*'test_accuracy'"):
        kb.merge([tmp_path / "a.csv.gz", tmp_path / "b.csv.gz"], tmp_path / "c.csv.gz")
    assert not (tmp_path / "c.csv.gz").exists()


def test_user_knowledge_base_appends_with_merge_semantics(tmp_path: Path, _isolated_home: Path) -> None:
    assert kb.user_knowledge_path() == _isolated_home / "knowledge.csv.gz"
    results = make_results(4)
    first = kb.append_to_user_knowledge(results[:3])
    second = kb.append_to_user_knowledge(results)
    assert (first.rows_out, second.rows_out, second.duplicates) == (3, 4, 3)
    ids = set(kb.read(kb.user_knowledge_path())["trial_id"])
    assert ids == {r.trial_id for r in results}


def test_summarize_counts(tmp_path: Path) -> None:
    data = rows(8, datasets=("digits", "mnist"), frameworks=("torch", "sklearn"))
    kb.write(data, tmp_path / "t.csv.gz")
    summary = kb.summarize(kb.read(tmp_path / "t.csv.gz"))
    assert summary["rows"] == 8
    assert summary["by_framework"] == {"sklearn": 4, "torch": 4}
    assert summary["by_dataset"] == {"digits": 4, "mnist": 4}
    assert summary["by_device_kind"] == {"cpu": 8}
    assert sum(summary["by_train_samples"].values()) == 8


# ----------------------------------------------------------------------------------- export


def _study_with_results(url: str, results, *, extra_without_attr: int = 0):  # type: ignore[no-untyped-def]
    import optuna
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="kb-test", storage=url,
                                directions=["minimize", "maximize", "minimize"])
    for r in results:
        ok = r.status == "ok"
        study.add_trial(create_trial(
            state=TrialState.COMPLETE if ok else TrialState.FAIL,
            values=[r.train_time_s, r.test_accuracy, r.peak_memory_mb] if ok else None,
            user_attrs={kb.RESULT_ATTR: r.to_dict()},
        ))
    for _ in range(extra_without_attr):
        study.add_trial(create_trial(state=TrialState.FAIL))
    return study


def test_export_from_a_sqlite_study(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    results = make_results(6) + [make_result(Config(framework="torch"), "mnist", status="failed", study="")]
    _study_with_results(url, results, extra_without_attr=2)
    out = tmp_path / "kb.csv.gz"
    count = kb.export(url, out=out, hardware=[CPU_PROFILE])
    assert int(count) == 7 and count.skipped == 2 and count.studies == ("kb-test",)
    table = kb.read(out)
    assert set(table["trial_id"]) == {r.trial_id for r in results}
    assert sorted(table["status"]) == ["failed"] + ["ok"] * 5 + ["oom"]
    # a result without a study name gets the study's, and the hardware profile is joined
    failed = next(r for r in table.rows if r["status"] == "failed")
    assert failed["study"] == "kb-test" and failed["hw_gemm_gflops_max"] == 76.0
    # exporting twice and merging changes nothing
    kb.export(url, studies=["kb-test"], out=tmp_path / "again.csv.gz", hardware=[CPU_PROFILE])
    assert kb.merge([out, tmp_path / "again.csv.gz"], tmp_path / "m.csv.gz").rows_out == 7


def test_export_from_an_unknown_study_is_a_storage_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    _study_with_results(url, [])
    with pytest.raises(StorageError, match="nope"):
        kb.export(url, studies=["nope"], out=tmp_path / "x.csv.gz")


def test_export_reads_a_result_recorded_under_older_rules_and_names_unreadable_ones(tmp_path: Path) -> None:
    """A trial stays a fact when a rule tightens: ``compile`` with oneDNN off ran (and failed)
    before Config refused it; its row is exported. A result with a key this version does not
    know is counted as unreadable, with the reason, not as 'without a result'."""
    import optuna
    from optuna.trial import TrialState, create_trial

    url = f"sqlite:///{tmp_path / 'old.db'}"
    study = _study_with_results(url, make_results(2))
    old = make_result(Config(framework="torch"), "mnist", status="failed").to_dict()
    old["config"].update(compile=True, onednn=False)  # refused by today's Config
    with pytest.raises(ValueError, match="onednn|compile"):
        Config.from_dict(old["config"])
    alien = make_result(Config(framework="torch"), "mnist").to_dict()
    alien["config"]["from_the_future"] = 1
    for data in (old, alien):
        study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={kb.RESULT_ATTR: data}))
    count = kb.export(url, out=tmp_path / "kb.csv.gz", hardware=[CPU_PROFILE])
    assert int(count) == 3 and count.skipped == 0 and count.unreadable == 1
    assert count.reasons[0].startswith("kb-test trial 3: The 'keys' parameter of Config")
    row = next(r for r in kb.read(tmp_path / "kb.csv.gz").rows if r["trial_id"] == old["trial_id"])
    assert row["cfg_compile"] is True and row["cfg_onednn"] is False and row["status"] == "failed"
    # a value of the wrong type is still refused, even on the lenient path
    with pytest.raises(ValueError, match="batch_size"):
        Config.from_record({**old["config"], "batch_size": "many"})
    optuna.delete_study(study_name="kb-test", storage=url)


def test_a_row_recorded_before_a_copy_was_known_names_it() -> None:
    """A trial recorded before KNOWN_CIFAR_COPIES named the JPEG-derived copy gets the same variant
    as one recorded after, so the two merge without a conflict."""
    from advisor._datasets.sources import KNOWN_CIFAR_COPIES, amend_variant

    digest, what = next(iter(KNOWN_CIFAR_COPIES.items()))
    old = f"cifar-10-batches-bin: 3/5 train batches (sha256 {digest[:8]} 106eeaad 99cb88ba 3104fa3f)"
    result = make_result(Config(framework="torch"), "mnist").replace(dataset_variant=old)
    assert kb.row_from_result(result)["dataset_variant"] == f"{old}; {what}" == amend_variant(f"{old}; {what}")
    assert amend_variant("official") == "official"
    assert amend_variant("cifar-10-batches-bin: 3/5 train batches (sha256 00000000 11111111)").endswith(")")
