"""Hostile input through the command line: one line, a non-zero exit, nothing executed or overwritten.

Each case runs the real ``advisor`` command in a subprocess (so native output and tracebacks are
seen as a user would see them) and asserts: exit code != 0, exactly one line on stderr starting
with ``error:``, no ``Traceback``, no marker file from a payload, and pre-existing files unchanged.

The library-level versions live elsewhere and are not repeated here: search-space validation in
tests/test_space.py, dataset readers (including their fuzzing) in tests/test_datasets_hostile.py,
knowledge-base schema checks in tests/test_knowledge.py, surrogate files in tests/test_surrogate.py.
``tests/test_security_grep.py`` proves the package has no pickle.load, unsafe yaml.load,
eval/exec, os.system or shell=True.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import pickle
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor.knowledge as kb
from advisor.errors import SearchSpaceError
from advisor.space import SearchSpace, list_spaces, load_space, spaces_dir
from _knowledge_rows import rows
from test_reliability_load import record
from test_datasets import cifar_pickle, random_cifar, write_mnist

MAX_ERROR_CHARS = 2000  # an error line names the input; it does not echo megabytes of it


def advisor(*args: str, cwd: Path | None = None, memory_mb: int | None = None, timeout: float = 240,
            in_process: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``advisor ARGS``: in a subprocess (native output, memory limit), or with CliRunner for
    the cases where neither matters (an escaping exception then reads as a traceback)."""
    if in_process:
        from typer.testing import CliRunner

        from advisor.cli import app

        result = CliRunner().invoke(app, list(args))
        stderr = result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            stderr += f"\nTraceback (in process): {result.exception!r}\n"
        return subprocess.CompletedProcess([sys.executable, "-m", "advisor", *args], result.exit_code,
                                           result.stdout, stderr)

    def limit() -> None:
        if memory_mb is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env, preexec_fn=limit if memory_mb else None)


_CASE = {"name": ""}


@pytest.fixture(autouse=True)
def _case_name(request: pytest.FixtureRequest) -> None:
    _CASE["name"] = request.node.name


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Assert the refusal shape and return the error line."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    record(_CASE["name"], argv=" ".join(str(a) for a in done.args[3:])[:160], exit_code=done.returncode,
           stderr_lines=len(lines), traceback="Traceback" in done.stderr,
           first_line=(lines[0] if lines else "")[:200], longest_line=max(map(len, lines), default=0))
    assert done.returncode != 0, done.stdout[-1000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    line = lines[0]
    assert line.startswith("error: "), line
    assert len(line) <= MAX_ERROR_CHARS, f"{len(line):,} characters: {line[:300]}..."
    for fragment in fragments:
        assert fragment in line, line
    return line


def digest(path: Path) -> str:
    if path.is_dir():
        return hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sorted(path.iterdir()))).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------- search-space YAML

GOOD = ("framework: sklearn\ntarget: cpu\nparams:\n"
        "  batch_size: {type: int, low: 16, high: 128, log: true}\n"
        "  learning_rate: {type: float, low: 1.0e-3, high: 0.1, log: true}\n"
        "fixed:\n  epochs: 1\n  threads: 1\n")


def _laughs(fanout: int, levels: int) -> str:
    """A 'billion laughs' list: each level repeats an alias of the one below ``fanout`` times."""
    parts = ["&l0 [" + ", ".join(["lol"] * fanout) + "]"]
    parts += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * fanout) + "]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


SPACE_CASES: dict[str, tuple[str, str]] = {
    # name: (file text with {marker}, fragment of the error)
    "python-apply-tag": ("!!python/object/apply:os.system ['touch {marker}']\n",
                         "could not determine a constructor for the tag"),
    "python-tag-in-a-value": (GOOD.replace("framework: sklearn", "framework: !!python/object/apply:os.system "
                                                                   "['touch {marker}']"),
                              "python/object/apply:os.system"),
    "python-new-popen": (GOOD + "description: !!python/object/new:subprocess.Popen [['touch', '{marker}']]\n",
                         "python/object/new:subprocess.Popen"),
    "enormous-range": (GOOD.replace("high: 128", "high: 1.0e+300"), "must lie within"),
    "enormous-int": (GOOD.replace("high: 128", "high: " + "9" * 400), "params.batch_size"),
    "nan-bound": (GOOD.replace("low: 1.0e-3", "low: .nan"), "must be a finite number; found nan"),
    "inf-bound": (GOOD.replace("high: 0.1", "high: .inf"), "must be a finite number; found inf"),
    "minus-inf-bound": (GOOD.replace("low: 16", "low: -.inf"), "must be a finite number; found -inf"),
    "billion-laughs": (GOOD.replace("fixed:\n", "description: " + _laughs(10, 4) + "\nfixed:\n"),
                       "description: must be text"),
    # The aliases expand only when something walks or prints the value: a 1 KB file must not
    # become a gigabyte error message (the error shows the offending value).
    "laughs-in-a-printed-value": (GOOD.replace("  learning_rate", "  momentum: " + _laughs(12, 5) + "\n"
                                               "  learning_rate"), "params.momentum"),
    "deep-nesting": (GOOD + "description: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
    "not-utf8": ("framework: \xff\xfe\n", "UTF-8"),
}


@pytest.mark.parametrize("case", list(SPACE_CASES))
def test_hostile_search_space_through_the_cli(tmp_path: Path, case: str) -> None:
    text, fragment = SPACE_CASES[case]
    marker = tmp_path / "pwned"
    path = tmp_path / "space.yaml"
    data = text.replace("{marker}", str(marker))
    path.write_bytes(data.encode("latin-1") if case == "not-utf8" else data.encode())
    bomb = case.startswith("laughs")  # in a subprocess under a memory limit
    one_line_error(advisor("spaces", "validate", str(path), cwd=tmp_path, memory_mb=2048, in_process=not bomb),
                   "space.yaml", fragment)
    db = tmp_path / "study.db"
    one_line_error(advisor("tune", "--space", str(path), "--storage", f"sqlite:///{db}", "--trials", "1",
                           cwd=tmp_path, memory_mb=2048, in_process=not bomb), "space.yaml", fragment)
    assert not marker.exists() and not (tmp_path / "pwned").exists()
    assert not db.exists()  # refused before any storage was opened


# ----------------------------------------------------------------------------- dataset files


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


def _huge_npz(path: Path) -> Path:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (10**9, 28, 28)})
    small = io.BytesIO()
    np.save(small, np.arange(3))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x_train.npy", header.getvalue() + b"\0" * 64)
        for key in ("y_train", "x_test", "y_test"):
            archive.writestr(f"{key}.npy", small.getvalue())
    return path


def _object_npz(path: Path) -> Path:
    x = np.empty(4, dtype=object)
    x[:] = [np.zeros((2, 2))] * 4
    np.savez(path, x_train=x, y_train=np.arange(4), x_test=x, y_test=np.arange(4))
    return path


def _mnist_with(folder: Path, edit: Callable[[bytes], bytes]) -> Path:
    write_mnist(folder)
    path = folder / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(edit(gzip.decompress(path.read_bytes())), mtime=0))
    return folder


def _evil_cifar(folder: Path, marker: Path) -> Path:
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(pickle.dumps({b"data": _Exploit(marker), b"labels": [1]}, protocol=2))
    (folder / "test_batch").write_bytes(cifar_pickle(*random_cifar(2, seed=0)))
    return folder


def test_hostile_npz_through_info_and_measure(tmp_path: Path) -> None:
    cases = {
        _object_npz(tmp_path / "objects.npz"): "array x_train has dtype object",
        _huge_npz(tmp_path / "huge.npz"): "declares shape (1000000000, 28, 28)",
        tmp_path / "notzip.npz": "is not an .npz (zip) file",
    }
    (tmp_path / "notzip.npz").write_bytes(b"PK\x03\x04 but not a zip")
    for path, fragment in cases.items():
        before = digest(path)
        one_line_error(advisor("datasets", "info", str(path)), str(path), fragment)
        # measure reads the file before spawning anything: no trial runs on it
        one_line_error(advisor("measure", "--dataset", str(path), "--workdir", str(tmp_path / "trials")),
                       str(path), fragment)
        assert digest(path) == before
    assert not any((tmp_path / "trials").iterdir()) if (tmp_path / "trials").exists() else True


@pytest.mark.parametrize(("case", "edit", "fragment"), [
    ("wrong-magic", lambda b: b"\x01\x02" + b[2:], "is not an IDX file: its magic number is 01 02 08 03"),
    ("truncated", lambda b: b[: len(b) // 2], "is truncated"),
    ("terabytes", lambda b: bytes([0, 0, 8, 3]) + struct.pack(">III", 2**31, 60000, 60000) + b[16:],
     "declares 2147483648x60000x60000 items"),
    # found by the long fuzz run (benchmarks/bench_reliability.py): zero items, but dimensions whose
    # product overflows, made numpy raise ValueError("array is too big") past the reader's checks
    ("zero-times-huge", lambda b: bytes([0, 0, 8, 3]) + struct.pack(">III", 0, 2**32 - 1, 2**32 - 1),
     "train-images-idx3-ubyte.gz"),
])
def test_hostile_mnist_files_through_datasets_info(tmp_path: Path, case: str, edit: Callable[[bytes], bytes],
                                                   fragment: str) -> None:
    folder = _mnist_with(tmp_path / case, edit)
    before = digest(folder)
    one_line_error(advisor("datasets", "info", "mnist", "--data-dir", str(folder), memory_mb=2048),
                   "train-images-idx3-ubyte.gz", fragment)
    assert digest(folder) == before


@pytest.mark.parametrize("dims", [(0, 2**32 - 1, 2**32 - 1), (2**32 - 1, 0, 2**32 - 1, 2**32 - 1)])
def test_fuzz_regression_idx_zero_dimension_beside_huge_ones(tmp_path: Path, dims: tuple[int, ...]) -> None:
    from advisor.datasets import read_idx
    from advisor.errors import DatasetFileError

    path = tmp_path / "f.idx"
    path.write_bytes(bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims))
    with pytest.raises(DatasetFileError) as exc:
        read_idx(path)
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_cifar_pickle_that_imports_os_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    folder = _evil_cifar(tmp_path / "cifar", marker)
    one_line_error(advisor("datasets", "info", "cifar10", "--data-dir", str(folder)),
                   "data_batch_1", "refused as unsafe", "system")
    # measure loads the data in the trial process: the trial fails with the same one-line reason
    done = advisor("measure", "--dataset", "cifar10", "--model", "mlp", "--data-dir", str(folder), "--json")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "failed" and "refused as unsafe" in result["error"] and "\n" not in result["error"]
    assert not marker.exists()


def test_a_relative_dataset_path_means_the_same_file_in_the_trial(tmp_path: Path) -> None:
    # The trial process runs in its own folder; a path the user gave relative to theirs must
    # still name their file (otherwise a valid file is reported missing, and a hostile one is
    # judged by the wrong error).
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "mine.npz", x_train=rng.random((40, 8, 8), dtype=np.float32), y_train=np.arange(40) % 4,
             x_test=rng.random((12, 8, 8), dtype=np.float32), y_test=np.arange(12) % 4)
    done = advisor("measure", "--dataset", "mine.npz", "--json", cwd=tmp_path)
    result = json.loads(done.stdout)
    assert (result["status"], result["error"]) == ("ok", None), done.stderr[-2000:]


# ------------------------------------------------------------------------ surrogate model dir


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TEST DATA: a table of constructed trials and a small surrogate fitted on it."""
    from advisor import surrogate as sg

    folder = tmp_path_factory.mktemp("surrogate")
    table = folder / "kb.csv.gz"
    kb.write(rows(120, seed=3), table)
    sg.save(sg.fit_file(table, num_boost_round=20), folder / "model", table_path=table)
    return table, folder / "model"


def _model_variant(good: Path, target: Path, edit: Callable[[Path, dict[str, Any]], None]) -> Path:
    shutil.copytree(good, target)
    edit(target, json.loads((good / "meta.json").read_text()))
    return target


def _first_model(meta: dict[str, Any]) -> str:
    return str(next(iter(next(iter(meta["files"].values())).values())))


MODEL_CASES: dict[str, tuple[Callable[[Path, dict[str, Any]], None], str]] = {
    "meta-not-json": (lambda d, m: (d / "meta.json").write_text("{nope"), "meta.json is corrupt"),
    "meta-a-list": (lambda d, m: (d / "meta.json").write_text("[1, 2]"), "meta.json is corrupt"),
    "schema-mismatch": (lambda d, m: (d / "meta.json").write_text(json.dumps(dict(m, feature_schema={
        "features": [{"name": "x", "kind": "num", "levels": []}]}))), "feature schema"),
    "files-a-list": (lambda d, m: (d / "meta.json").write_text(json.dumps(dict(m, files=["a.txt"]))), "meta.json"),
    "files-names-not-maps": (lambda d, m: (d / "meta.json").write_text(json.dumps(dict(m, files={
        k: "x.txt" for k in m["files"]}))), "meta.json"),
    "path-traversal": (lambda d, m: (d / "meta.json").write_text(json.dumps(dict(m, files={
        k: {a: "../../../../etc/passwd" for a in v} for k, v in m["files"].items()}))), "passwd is missing"),
    "model-garbage-text": (lambda d, m: (d / _first_model(m)).write_text("tree\nversion=v4\ngarbage"), "is corrupt"),
    "model-binary": (lambda d, m: (d / _first_model(m)).write_bytes(b"\xff\xfe\x00" * 100), "is corrupt"),
    "model-empty": (lambda d, m: (d / _first_model(m)).write_text(""), "is corrupt"),
}


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_corrupt_surrogate_model_dir_through_recommend(fitted: tuple[Path, Path], tmp_path: Path, case: str) -> None:
    edit, fragment = MODEL_CASES[case]
    model = _model_variant(fitted[1], tmp_path / "model", edit)
    before = digest(model)
    one_line_error(advisor("recommend", "--dataset", "mnist", "--table", str(fitted[0]), "--model-dir", str(model),
                           "--candidates", "50"), fragment)
    assert digest(model) == before


def test_missing_surrogate_model_dir(fitted: tuple[Path, Path], tmp_path: Path) -> None:
    one_line_error(advisor("recommend", "--dataset", "mnist", "--table", str(fitted[0]), "--model-dir",
                           str(tmp_path / "none")), "No surrogate model at")


# --------------------------------------------------------------------- knowledge-base tables


def _rewrite(source: Path, target: Path, edit: Callable[[list[list[str]]], list[list[str]]]) -> Path:
    records = list(csv.reader(io.StringIO(gzip.decompress(source.read_bytes()).decode())))
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(edit(records))
    target.write_bytes(gzip.compress(buffer.getvalue().encode(), mtime=0))
    return target


def _set(column: str, row: int, value: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def edit(records: list[list[str]]) -> list[list[str]]:
        records[row][records[0].index(column)] = value
        return records
    return edit


def _drop(column: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def edit(records: list[list[str]]) -> list[list[str]]:
        i = records[0].index(column)
        return [r[:i] + r[i + 1:] for r in records]
    return edit


def _duplicate_id(records: list[list[str]]) -> list[list[str]]:
    i = records[0].index("trial_id")
    records[3][i] = records[2][i]
    return records


TABLE_CASES: dict[str, tuple[Callable[[list[list[str]]], list[list[str]]], str]] = {
    "missing-column": (_drop("peak_memory_mb"), "missing column 'peak_memory_mb'"),
    "extra-column": (lambda r: [x + (["evil"] if i == 0 else ["$(touch pwned)"]) for i, x in enumerate(r)],
                     "unknown column 'evil'"),
    "wrong-type": (_set("train_time_s", 2, "fast"), "column 'train_time_s', row 2 must hold a float value"),
    "wrong-bool": (_set("contended", 1, "maybe"), "column 'contended', row 1 must hold a bool value"),
    "duplicated-trial-id": (_duplicate_id, "repeats trial id"),
    "deeply-nested-json-cell": (_set("epoch_times", 1, "[" * 60000 + "]" * 60000), "epoch_times"),
}


@pytest.mark.parametrize("case", list(TABLE_CASES))
def test_hostile_knowledge_table_through_merge_and_fit(tmp_path: Path, case: str) -> None:
    edit, fragment = TABLE_CASES[case]
    good = tmp_path / "good.csv.gz"
    kb.write(rows(30, seed=1), good)
    bad = _rewrite(good, tmp_path / "bad.csv.gz", edit)
    merged = tmp_path / "merged.csv.gz"
    kb.write(rows(5, seed=9), merged)
    model = tmp_path / "model"
    model.mkdir()
    (model / "meta.json").write_text('{"previous": true}')
    before = (digest(merged), digest(model))

    one_line_error(advisor("knowledge", "merge", str(good), str(bad), "--out", str(merged), in_process=True),
                   str(bad), fragment)
    one_line_error(advisor("surrogate", "fit", "--table", str(bad), "--out", str(model), "--rounds", "10",
                           in_process=True), str(bad), fragment)
    assert (digest(merged), digest(model)) == before  # nothing written over
    assert not (tmp_path / "pwned").exists()


def test_gzip_bomb_knowledge_table_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    # 64 MiB of newlines compress to about 64 KiB; 48 gzip members of it make a 3 GiB table.
    member = gzip.compress(b"\n" * (64 << 20), compresslevel=9, mtime=0)
    bomb = tmp_path / "bomb.csv.gz"
    bomb.write_bytes(member * 48)
    assert bomb.stat().st_size < 8 << 20
    one_line_error(advisor("knowledge", "info", str(bomb), memory_mb=1536), str(bomb))


# ----------------------------------------------------------- shell metacharacters in names


PAYLOADS = ["; touch {m}", "$(touch {m})", "`touch {m}`", "&& touch {m}", "| touch {m}"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_shell_metacharacters_in_storage_urls_run_nothing(tmp_path: Path, payload: str) -> None:
    marker = tmp_path / "pwned"
    evil = payload.format(m=marker)
    one_line_error(advisor("studies", "list", "--storage", f"sqlite:///{tmp_path}/x.db {evil}", cwd=tmp_path),
                   "Cannot open storage")
    one_line_error(advisor("pareto", "--study", "s", "--storage", f"postgresql://u@127.0.0.1:1/db {evil}",
                           cwd=tmp_path), "Cannot open storage")
    one_line_error(advisor("worker", "--study", evil, "--storage", f"sqlite:///{tmp_path}/y.db", cwd=tmp_path),
                   "No storage at")
    assert not marker.exists()


def test_shell_metacharacters_are_used_literally(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    study = "$(touch pwned); `touch pwned` && touch pwned | touch pwned"  # relative: cwd is tmp_path
    literal_db = tmp_path / "$(touch pwned).db"
    space = tmp_path / "q.yaml"
    space.write_text(GOOD)
    done = advisor("tune", "--space", str(space), "--dataset", "synthetic:8x8x1", "--model", "mlp",
                   "--train-samples", "64", "--test-samples", "32", "--objectives", "time,accuracy",
                   "--trials", "1", "--storage", "sqlite:///$(touch pwned).db", "--study", study, "--json",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["study"] == study
    # stderr is a pipe: progress is a whole line per finished trial, and no library warning
    assert any(line.startswith("[1/1] · trial 0: ") for line in done.stderr.splitlines()), done.stderr
    assert "Warning" not in done.stderr, done.stderr
    assert literal_db.is_file()  # the URL named a file, literally
    listed = advisor("studies", "list", "--storage", "sqlite:///$(touch pwned).db", "--json", cwd=tmp_path)
    assert [s["name"] for s in json.loads(listed.stdout)] == [study]
    assert not marker.exists() and not (tmp_path / "pwned").exists()
    one_line_error(advisor("pareto", "--study", "line\nbreak", "--storage", f"sqlite:///{tmp_path}/z.db"),
                   "printable text")


# ----------------------------------------------------------------- fuzzing the space loader

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

_WORDS = ["framework", "target", "description", "params", "fixed", "type", "low", "high", "log", "step",
          "choices", "when", "int", "float", "categorical", "torch", "sklearn", "tensorflow", "onnxruntime",
          "cpu", "gpu", "batch_size", "learning_rate", "epochs", "optimizer", "momentum", "threads", "xla",
          "sgd", "adam", "momentum", "device", "cuda", "seed", "${cores}", "${cores_half}", "${gpus}"]
_SCALARS = (st.sampled_from(_WORDS) | st.text(max_size=12) | st.integers(-10**12, 10**12)
            | st.floats(allow_nan=True, allow_infinity=True) | st.booleans() | st.none())
_DOCS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=5)
                     | st.dictionaries(st.sampled_from(_WORDS) | st.text(max_size=6), inner, max_size=6),
                     max_leaves=40)
_YAML_BITS = list("&*!:-[]{}#|>'\"%@`,?\n\t ") + ["!!python/object/apply:os.system", "*a", "&a", "<<: ",
                                                  ".nan", ".inf", "1e999", "~", "---", "...", "\\x00"]


def _builtin_texts() -> list[str]:
    return [(spaces_dir() / f"{name}.yaml").read_text() for name in list_spaces()]


@st.composite
def mutated_space(draw: st.DrawFn) -> str:
    """A built-in space file with a few spans deleted, duplicated or replaced by YAML syntax."""
    text = draw(st.sampled_from(_builtin_texts()))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 40)))
        action = draw(st.sampled_from(["delete", "duplicate", "insert"]))
        if action == "delete":
            text = text[:i] + text[j:]
        elif action == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + "".join(draw(st.lists(st.sampled_from(_YAML_BITS), min_size=1, max_size=4))) + text[i:]
    return text


def check_space_text(text: str) -> str:
    """Load ``text`` as a space file: a SearchSpace (that samples valid configs) or one
    SearchSpaceError line; any other exception fails. Returns the outcome kind."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            space = load_space(str(path), cores=4)
        except SearchSpaceError as exc:
            message = str(exc)
            assert "\n" not in message and message.startswith("fuzz.yaml"), message
            assert len(message) <= MAX_ERROR_CHARS, message[:300]
            return "refused"
    assert isinstance(space, SearchSpace)
    rng = np.random.default_rng(0)
    for _ in range(3):
        space.to_config(space.sample(rng))
    return "loaded"


def check_space_document(document: Any) -> str:
    return check_space_text(yaml.safe_dump(document, allow_unicode=True))


@FUZZ
@given(text=st.text(max_size=400))
def test_fuzz_space_loader_on_random_text(text: str) -> None:
    check_space_text(text)


@FUZZ
@given(document=st.fixed_dictionaries({}, optional={
    "framework": _DOCS, "target": _DOCS, "description": _DOCS, "params": _DOCS, "fixed": _DOCS}) | _DOCS)
def test_fuzz_space_loader_on_random_documents(document: Any) -> None:
    check_space_document(document)


@FUZZ
@given(text=mutated_space())
def test_fuzz_space_loader_on_mutated_builtin_files(text: str) -> None:
    check_space_text(text)


def test_fuzz_checker_sees_both_outcomes() -> None:
    # The properties above could pass vacuously; the checker must tell a space from a refusal.
    assert check_space_text(GOOD) == "loaded"
    assert check_space_text(GOOD.replace("low: 16", "low: 600")) == "refused"
    assert check_space_document(yaml.safe_load(GOOD)) == "loaded"
