"""``advisor datasets list | info | download`` driven through typer's CliRunner."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from advisor._datasets import download as download_module
from advisor.cli import app
from test_datasets import SHARED, _Server, server, write_cifar_bin, write_mnist, write_npz  # noqa: F401 (fixture)

runner = CliRunner()


def test_list_table_and_json() -> None:
    result = runner.invoke(app, ["datasets", "list"])
    assert result.exit_code == 0, result.output
    for name in ("digits", "mnist", "fashion-mnist", "cifar10", "synthetic:28x28x1"):
        assert name in result.stdout
    assert "60,000" in result.stdout
    result = runner.invoke(app, ["datasets", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["cifar10"]["input_shape"] == [32, 32, 3] and rows["cifar10"]["train_size"] == 50_000
    assert rows["digits"]["test_size"] == 360 and rows["synthetic:28x28x1"]["synthetic"] is True


def test_info_json_without_data_dir() -> None:
    result = runner.invoke(app, ["datasets", "info", "fashion-mnist", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["input_shape"] == [28, 28, 1] and data["num_classes"] == 10 and "present" not in data


def test_info_with_data_dir_reports_files_and_variant(tmp_path: Path) -> None:
    folder = write_cifar_bin(tmp_path / "cifar-10-batches-bin", n_batches=2, per_batch=5, n_test=4)
    result = runner.invoke(app, ["datasets", "info", "cifar10", "--data-dir", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    present = json.loads(result.stdout)["present"]
    assert present["format"] == "cifar-10-batches-bin"
    assert (present["train_size"], present["test_size"]) == (10, 4)
    assert present["variant"].startswith("cifar-10-batches-bin: 2/5 train batches")
    assert [f["name"] for f in present["files"]] == ["data_batch_1.bin", "data_batch_2.bin", "test_batch.bin"]
    assert present["files"][0]["bytes"] == 5 * 3073 and len(present["fingerprint"]) == 64
    table = runner.invoke(app, ["datasets", "info", "cifar10", "--data-dir", str(folder)])
    assert table.exit_code == 0 and "2/5 train batches" in table.stdout and "2 of 5 training" in table.stdout


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_info_on_the_shared_idx_datasets_says_official(name: str) -> None:
    folder = SHARED / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing: the shared real-data folder is not on this machine")
    result = runner.invoke(app, ["datasets", "info", name, "--data-dir", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    present = json.loads(result.stdout)["present"]
    assert present["variant"] == "official" and present["train_size"] == 60_000


def test_unknown_dataset_is_one_line_and_exit_1() -> None:
    result = runner.invoke(app, ["datasets", "info", "imagenet"])
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: Unknown dataset 'imagenet': choose one of digits, mnist")
    assert lines[0].endswith("or give a path to an .npz file.")


def test_info_with_a_broken_data_dir_is_one_line(tmp_path: Path) -> None:
    folder = write_mnist(tmp_path / "m")
    (folder / "train-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8bnot really gzip")
    result = runner.invoke(app, ["datasets", "info", "mnist", "--data-dir", str(folder)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "train-images-idx3-ubyte.gz" in lines[0] and "gzip" in lines[0]


def test_download_with_mirror_progress_and_cache_dir(server: _Server, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    write_mnist(server.root)
    remotes = tuple(
        download_module.RemoteFile(r.name, r.urls, frozenset([hashlib.sha256((server.root / r.name).read_bytes()).hexdigest()]))
        for r in download_module.SOURCES["mnist"]
    )
    monkeypatch.setitem(download_module.SOURCES, "mnist", remotes)
    cache = tmp_path / "cache"
    result = runner.invoke(app, ["datasets", "download", "mnist", "--cache-dir", str(cache), "--mirror", server.url])
    assert result.exit_code == 0, result.output
    assert str(cache / "mnist") in result.stdout
    assert "train-images-idx3-ubyte.gz" in result.stderr  # progress goes to stderr
    assert sorted(p.name for p in (cache / "mnist").glob("*.gz")) == sorted(r.name for r in remotes)


def test_download_checksum_mismatch_exits_1(server: _Server, tmp_path: Path) -> None:
    write_mnist(server.root)  # the published digests cannot match these files
    result = runner.invoke(app, ["datasets", "download", "mnist", "--cache-dir", str(tmp_path / "c"),
                                 "--mirror", server.url])
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: Checksum mismatch for ") and "440fcabf" in last


def test_a_download_that_never_connects_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No byte arrived, so no progress was drawn: the error is the only line (the progress display
    left a blank line above it)."""
    remotes = tuple(download_module.RemoteFile(r.name, ("http://127.0.0.1:9/" + r.name,), r.sha256)
                    for r in download_module.SOURCES["mnist"])
    monkeypatch.setitem(download_module.SOURCES, "mnist", remotes)
    result = runner.invoke(app, ["datasets", "download", "mnist", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: Download of "), result.stderr


def test_download_of_a_builtin_needs_nothing() -> None:
    result = runner.invoke(app, ["datasets", "download", "digits"])
    assert result.exit_code == 0, result.output
    assert "needs no download" in result.stderr


@pytest.mark.parametrize(("name", "folder"), [("digits", None), ("mnist", "mnist"), ("fashion-mnist", "fashion-mnist"),
                                            ("cifar10", "cifar-10-batches-bin")])
def test_recorded_landmarks_are_what_the_data_measures(name: str, folder: str | None) -> None:
    """The registry's landmark scores are measurements: re-measuring them from the files agrees."""
    args = ["datasets", "landmark", name, "--json"]
    if folder is not None:
        if not (SHARED / folder).is_dir():
            pytest.skip(f"{SHARED / folder} is missing: the shared real-data folder is not on this machine")
        args += ["--data-dir", str(SHARED / folder)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["landmark"] == pytest.approx(data["recorded"], abs=6e-5)  # recorded to 4 decimals
    # 2,000 training and 1,000 test images, or all that digits has
    assert (data["train_samples"], data["test_samples"]) == ((1437, 360) if name == "digits" else (2000, 1000))


def test_a_users_file_is_scored_once_per_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``recommend`` describes a user's .npz once per model; its landmark is measured once per file
    version (kept across processes in ADVISOR_HOME), and again when the file changes."""
    import os

    from advisor._datasets import landmark as lm

    rng = np.random.default_rng(0)
    y, yt = np.arange(40) % 2, np.arange(20) % 2
    x = rng.random((40, 6, 6, 1)) + y[:, None, None, None]
    path = write_npz(tmp_path / "mine.npz", x_train=x, y_train=y, x_test=rng.random((20, 6, 6, 1)) + yt[:, None, None, None],
                     y_test=yt)
    calls = []
    real = lm.landmark_score
    monkeypatch.setattr(lm, "landmark_score", lambda *a, **k: calls.append(a) or real(*a, **k))
    first = lm.file_landmark(str(path))
    assert first == real(str(path)) and first > 0.9 and len(calls) == 1
    assert lm.file_landmark(str(path)) == first and len(calls) == 1
    lm._MEMO.clear()  # a new process: the file in ADVISOR_HOME answers
    assert lm.file_landmark(str(path)) == first and len(calls) == 1
    assert (Path(os.environ["ADVISOR_HOME"]) / "landmarks.json").exists()
    write_npz(path, x_train=x, y_train=1 - y, x_test=x[:20], y_test=yt)  # the file changes: measured again
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    assert lm.file_landmark(str(path)) == real(str(path)) and len(calls) == 2


def test_landmark_orders_datasets_by_difficulty_and_refuses_random_data(tmp_path: Path) -> None:
    from advisor.datasets import get_info

    assert (get_info("digits").landmark > get_info("mnist").landmark > get_info("fashion-mnist").landmark
            > get_info("cifar10").landmark)  # clothes are harder than digits, easier than CIFAR-10
    assert get_info("synthetic:8x8x1").landmark is None
    result = runner.invoke(app, ["datasets", "landmark", "synthetic:8x8x1"])
    assert result.exit_code == 1 and "no landmark" in result.output
    # a user's .npz: separable classes score high, random labels near chance
    rng = np.random.default_rng(0)
    y = np.arange(400) % 2
    x = (rng.normal(size=(400, 4, 4, 1)) + 3.0 * y[:, None, None, None]).astype(np.float32)
    easy = write_npz(tmp_path / "easy.npz", x_train=x[:300], y_train=y[:300], x_test=x[300:], y_test=y[300:])
    noisy = write_npz(tmp_path / "noisy.npz", x_train=x[:300], y_train=rng.permutation(y[:300]), x_test=x[300:],
                      y_test=rng.permutation(y[300:]))
    scores = {}
    for path in (easy, noisy):
        result = runner.invoke(app, ["datasets", "landmark", str(path), "--json"])
        assert result.exit_code == 0, result.output
        scores[path.stem] = json.loads(result.stdout)["landmark"]
    assert scores["easy"] > 0.95 and scores["noisy"] < 0.7
