"""Knobs and frameworks are declared once (advisor.knobs); everything else derives from them."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from advisor import knowledge
from advisor.errors import InvalidParameterError
from advisor.knobs import FRAMEWORK_INFO, KNOB_NAMES, KNOBS, get_knob
from advisor.records import Config

sys.path.insert(0, str(Path(__file__).parent))
from _knowledge_rows import RECIPE_KNOBS  # noqa: E402

# The knobs added with the training recipes: a table written before them has none of their columns.
NEWER_KNOBS = RECIPE_KNOBS


@pytest.fixture()
def old_table(tmp_path: Path) -> Path:
    """Twelve constructed trials written as a table of before the recipe knobs: every cfg_ column
    of a newer knob cut out of the file, the rest as written."""
    import csv
    import gzip
    import io
    from _knowledge_rows import rows

    written = tmp_path / "new.csv.gz"
    knowledge.write(rows(12, seed=3), written)
    records = list(csv.reader(io.StringIO(gzip.decompress(written.read_bytes()).decode())))
    keep = [i for i, name in enumerate(records[0]) if name[4:] not in NEWER_KNOBS or not name.startswith("cfg_")]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([[r[i] for i in keep] for r in records])
    path = tmp_path / "old.csv.gz"
    path.write_bytes(gzip.compress(out.getvalue().encode()))
    assert not any(f"cfg_{k}" in records[0][i] for i in keep for k in NEWER_KNOBS)
    return path


def test_config_fields_are_the_knobs_with_their_defaults() -> None:
    fields = [f for f in dataclasses.fields(Config) if f.name != "framework"]
    assert [f.name for f in fields] == list(KNOB_NAMES)
    assert {f.name: f.default for f in fields} == {k.name: k.default for k in KNOBS}


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.name)
def test_every_bound_is_enforced_by_config(knob) -> None:  # type: ignore[no-untyped-def]
    framework = (knob.frameworks or ("torch",))[0]
    base: dict = {"framework": framework}
    if knob.targets == ("gpu",):
        base["device"] = "cuda"
    bad = {"int": (knob.high or 0) + 1, "float": float("nan"), "bool": "yes", "choice": "nope",
           "str": 3}[knob.type]
    with pytest.raises(InvalidParameterError, match=repr(knob.name)):
        Config(**base, **{knob.name: bad})


@pytest.mark.parametrize("knob", [k for k in KNOBS if k.frameworks is not None], ids=lambda k: k.name)
def test_framework_specific_knobs_are_refused_elsewhere_in_one_line(knob) -> None:  # type: ignore[no-untyped-def]
    other = next(f for f in FRAMEWORK_INFO if f not in (knob.frameworks or ()))
    on = {"bool": True, "float": knob.high, "choice": knob.choices[-1] if knob.choices else None}[knob.type]
    with pytest.raises(InvalidParameterError) as info:
        Config(framework=other, **{knob.name: on})
    message = str(info.value)
    assert f"framework {other!r}" in message and "applies to" in message and "\n" not in message


def test_optimizer_limits_come_from_the_framework_entry() -> None:
    for name, fw in FRAMEWORK_INFO.items():
        for optimizer in ("sgd", "momentum", "adam", "adamw"):
            kwargs = {"momentum": 0.9} if optimizer == "momentum" else {}
            if optimizer in fw.optimizers:
                Config(framework=name, optimizer=optimizer, **kwargs)
            else:
                with pytest.raises(InvalidParameterError, match=name):
                    Config(framework=name, optimizer=optimizer, **kwargs)
    with pytest.raises(InvalidParameterError, match="no weight decay"):
        Config(framework="onnxruntime", optimizer="sgd", weight_decay=0.01)
    with pytest.raises(InvalidParameterError, match="nesterov"):
        Config(framework="torch", optimizer="adam", nesterov=True)


def test_a_table_written_before_the_recipe_knobs_still_reads(old_table: Path) -> None:
    table = knowledge.read(old_table)
    assert len(table) == 12
    for knob in NEWER_KNOBS:
        assert table[f"cfg_{knob}"] == [get_knob(knob).default] * 12
    configs = [knowledge.config_from_row(row) for row in table.rows]
    assert {c.schedule for c in configs} == {"constant"}
    assert configs[0].batch_size == table["cfg_batch_size"][0]


def test_a_table_missing_an_old_column_is_still_refused(tmp_path: Path, old_table: Path) -> None:
    import gzip

    text = gzip.decompress(old_table.read_bytes()).decode()
    header, *rest = text.split("\n")
    cols = header.split(",")
    drop = cols.index("train_time_s")
    body = [",".join(c for i, c in enumerate(line.split(",")) if i != drop) for line in [header, *rest] if line]
    path = tmp_path / "broken.csv.gz"
    path.write_bytes(gzip.compress(("\n".join(body) + "\n").encode()))
    with pytest.raises(knowledge.KnowledgeBaseError, match="missing column 'train_time_s'"):
        knowledge.read(path)


def test_the_shipped_model_predicts_on_an_old_table(old_table: Path) -> None:
    from advisor.surrogate import load, shipped_model_dir

    surrogate = load(shipped_model_dir())
    table = knowledge.read(old_table)
    bands = surrogate.predict(table.columns)
    mid = bands["test_accuracy"].mid
    assert len(mid) == 12 and ((0 <= mid) & (mid <= 1)).all()
