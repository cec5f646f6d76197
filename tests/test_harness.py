"""The trial harness: outcomes, limits, isolation, the progress channel and what a result records.

Trials run the sklearn backend on ``digits`` (seconds each). Every test that spawns a child checks
that no process of the trial's tree is left behind.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from advisor import hardware, models
from advisor.errors import InvalidParameterError
from advisor.harness import Limits, build_child_env, resolve_cores, run_trial, time_to_accuracy
from advisor.harness.events import MAX_GARBAGE_LINES, EventReader
from advisor.records import Config, EpochRecord, TrialResult, Workload
from tests.conftest import requires

DIGITS_MLP = Workload(dataset="digits", model="mlp")
CHILD_MODULE = "advisor.harness.child"


def _live_children() -> list[psutil.Process]:
    alive = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and CHILD_MODULE in " ".join(proc.cmdline()):
                alive.append(proc)
        except psutil.Error:
            continue
    return alive


def _check_clean(result: TrialResult) -> None:
    assert "survivors" not in result.extra
    assert _live_children() == []


def _sklearn(**kwargs: object) -> Config:
    base: dict[str, object] = {"framework": "sklearn", "batch_size": 32, "learning_rate": 0.01,
                               "epochs": 2, "optimizer": "adam", "threads": 1}
    base.update(kwargs)
    return Config(**base)  # type: ignore[arg-type]


# -- pure parts: no child process ---------------------------------------------------------------

def test_child_env_sets_every_thread_variable_without_touching_the_parent() -> None:
    before = dict(os.environ)
    config = Config(framework="tensorflow", threads=3, inter_op_threads=2, onednn=False, seed=7)
    env, applied = build_child_env(config, event_fd=9, base={"PATH": "/bin", "OMP_NUM_THREADS": "64"})
    assert dict(os.environ) == before
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS",
                 "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        assert applied[name] == env[name] == "3"
    assert applied["TF_NUM_INTEROP_THREADS"] == "2"
    assert applied["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert applied["TF_CPP_MIN_LOG_LEVEL"] == "2"
    assert applied["CUDA_VISIBLE_DEVICES"] == ""
    assert applied["PYTHONHASHSEED"] == "7"
    assert env["ADVISOR_EVENT_FD"] == "9" and "ADVISOR_EVENT_FD" not in applied
    assert env["PATH"] == "/bin"


def test_child_env_leaves_gpus_visible_for_cuda_and_onednn_to_tensorflow_only() -> None:
    _, cuda = build_child_env(Config(framework="torch", device="cuda:0", onednn=True), event_fd=5, base={})
    assert "CUDA_VISIBLE_DEVICES" not in cuda
    assert "TF_ENABLE_ONEDNN_OPTS" not in cuda
    _, tf_on = build_child_env(Config(framework="tensorflow", onednn=True), event_fd=5, base={})
    assert tf_on["TF_ENABLE_ONEDNN_OPTS"] == "1"
    _, tf_default = build_child_env(Config(framework="tensorflow"), event_fd=5, base={})
    assert "TF_ENABLE_ONEDNN_OPTS" not in tf_default


def test_resolve_cores_takes_the_first_allowed_and_wraps() -> None:
    allowed = tuple(sorted(os.sched_getaffinity(0)))
    assert resolve_cores(None, 1) == allowed[:1]
    assert resolve_cores(None, len(allowed) + 3) == allowed
    assert resolve_cores([allowed[-1], allowed[-1]], 4) == (allowed[-1],)
    with pytest.raises(InvalidParameterError, match="cores"):
        resolve_cores([max(allowed) + 1000], 1)
    with pytest.raises(InvalidParameterError, match="cores"):
        resolve_cores([], 1)


def test_limits_reject_non_positive_values() -> None:
    with pytest.raises(InvalidParameterError, match="wall_time_s"):
        Limits(wall_time_s=0)
    with pytest.raises(InvalidParameterError, match="memory_mb"):
        Limits(memory_mb=-5)


def test_time_to_accuracy_takes_the_first_epoch_reaching_each_threshold() -> None:
    curve = [(0.4, 1.0), (0.85, 2.0), (0.83, 3.0), (0.96, 4.0)]
    epochs = [EpochRecord(i + 1, t, 1.0, 0.5, a, 0.1) for i, (a, t) in enumerate(curve)]
    assert time_to_accuracy(epochs) == {"0.5": 2.0, "0.8": 2.0, "0.9": 4.0, "0.95": 4.0}


def test_event_reader_counts_garbage_and_bounds_lines() -> None:
    read_fd, write_fd = os.pipe()
    broken: list[str] = []
    reader = EventReader(read_fd, max_events=10, on_broken=broken.append)
    reader.start()
    with os.fdopen(write_fd, "wb") as pipe:
        pipe.write(b'{"event": "started", "pid": 1}\n')
        pipe.write(b"not json\n")
        pipe.write(b'{"event": "nonsense"}\n')
        pipe.write(b"[1, 2]\n")
        pipe.write(b"y" * 200_000 + b"\n")  # over the line limit: skipped, not buffered
        pipe.write(b'{"event": "epoch", "epoch": 1}\n')
    reader.join(10)
    got = []
    while True:
        try:
            got.append(reader.events.get_nowait())
        except queue.Empty:
            break
    assert [e["event"] for e in got] == ["started", "epoch"]
    assert reader.garbage_lines == 4
    assert broken == []


def test_event_reader_breaks_the_channel_after_too_much_garbage() -> None:
    read_fd, write_fd = os.pipe()
    broken: list[str] = []
    reader = EventReader(read_fd, max_events=10, on_broken=broken.append)
    reader.start()
    with os.fdopen(write_fd, "wb") as pipe:
        pipe.write(b"garbage\n" * (MAX_GARBAGE_LINES + 1))
    reader.join(10)
    assert len(broken) == 1 and broken[0].startswith("progress channel:")


# -- trials -------------------------------------------------------------------------------------

def test_ok_trial_records_outcomes_and_provenance(tmp_path: Path) -> None:
    import sklearn

    seen: list[EpochRecord] = []
    result = run_trial(DIGITS_MLP, _sklearn(epochs=3), workdir=tmp_path, study="s", trial_number=4,
                       on_epoch=lambda e: seen.append(e) is None)
    _check_clean(result)
    assert result.status == "ok", result.error
    assert result.error is None
    assert [e.epoch for e in result.epochs] == [1, 2, 3] and list(result.epochs) == seen
    assert result.epochs_completed == 3
    # The parent stamps each epoch with the tree's peak RSS so far: early stopping's memory bound.
    peaks = [e.peak_memory_mb for e in result.epochs]
    assert all(p is not None and p > 10 for p in peaks) and peaks == sorted(peaks)
    assert peaks[-1] <= result.peak_memory_mb
    times = [e.train_time_s for e in result.epochs]
    assert times == sorted(times) and result.train_time_s == pytest.approx(times[-1])
    assert result.test_accuracy == result.epochs[-1].test_accuracy
    assert result.best_accuracy == max(result.accuracy_curve)
    assert result.test_accuracy is not None and result.test_accuracy > 0.8
    assert result.time_to_accuracy["0.5"] <= result.train_time_s
    assert result.dataset_name == "digits" and result.dataset_fingerprint
    assert result.input_shape == (8, 8, 1) and result.num_classes == 10
    assert result.train_samples + result.test_samples == 1797
    spec = models.get_model("mlp")
    assert result.params == models.param_count(spec, (8, 8, 1), 10)
    assert result.flops_per_sample == models.training_flops_per_sample(spec, (8, 8, 1), 10)
    assert result.framework_version == sklearn.__version__
    assert result.library_versions["numpy"] == np.__version__
    assert any(p.get("user_api") == "blas" for p in result.threadpools)
    assert result.hardware_id == hardware.identity().profile_id
    assert result.device_kind == "cpu" and result.gpu_model is None
    assert result.study == "s" and result.trial_number == 4 and len(result.trial_id) == 32
    assert result.import_time_s is not None and result.import_time_s > 0
    assert result.data_load_time_s is not None and result.data_load_time_s > 0
    assert result.wall_time_s is not None
    assert result.wall_time_s > result.import_time_s + result.data_load_time_s + result.train_time_s
    assert result.peak_memory_mb is not None and result.peak_memory_mb > 20
    assert result.inference_throughput is not None and result.inference_throughput > 0
    assert result.cpu_utilization is not None and 0 < result.cpu_utilization <= 1.2
    assert result.cpu_utilization_granted == pytest.approx(result.cpu_utilization)
    assert result.contention_cpu_s is not None and result.contention_cpu_s >= 0
    assert result.sampler_cpu_fraction is not None and 0 <= result.sampler_cpu_fraction < 0.5
    folder = Path(result.extra["trial_dir"])
    assert folder.parent == tmp_path
    assert json.loads((folder / "trial.json").read_text())["config"]["epochs"] == 3
    events = [json.loads(line)["event"] for line in (folder / "events.jsonl").read_text().splitlines()]
    assert events == ["started", "imported", "data_loaded", "training", "epoch", "epoch", "epoch", "final"]
    assert (folder / "child.log").exists()
    assert TrialResult.from_json(result.to_json()) == result


def test_temporary_trial_folder_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    result = run_trial(DIGITS_MLP, _sklearn(epochs=1))
    _check_clean(result)
    assert result.status == "ok", result.error
    assert "trial_dir" not in result.extra
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("framework", ["sklearn", pytest.param("torch", marks=requires("torch"))])
@pytest.mark.parametrize("threads", [1, 2])
def test_thread_counts_reported_by_the_child_match_the_request(framework: str, threads: int) -> None:
    config = Config(framework=framework, threads=threads, inter_op_threads=1, epochs=1, batch_size=64)
    result = run_trial(DIGITS_MLP, config)
    _check_clean(result)
    assert result.status == "ok", result.error
    assert result.threads_applied["intra_op_threads"] == threads
    assert result.env_applied["OMP_NUM_THREADS"] == str(threads)
    assert result.env_applied["CUDA_VISIBLE_DEVICES"] == ""
    allowed = sorted(os.sched_getaffinity(0))
    assert result.cores_granted == tuple(allowed[: min(threads, len(allowed))])


def test_cores_argument_pins_the_child() -> None:
    last = max(os.sched_getaffinity(0))
    result = run_trial(DIGITS_MLP, _sklearn(epochs=1), cores=[last])
    _check_clean(result)
    assert result.status == "ok", result.error
    assert result.cores_granted == (last,)


def test_wall_time_limit_kills_within_two_seconds() -> None:
    limit = 3.0
    start = time.monotonic()
    result = run_trial(DIGITS_MLP, _sklearn(epochs=100_000), limits=Limits(wall_time_s=limit))
    elapsed = time.monotonic() - start
    _check_clean(result)
    assert result.status == "timeout"
    assert result.wall_time_s is not None and limit <= result.wall_time_s <= limit + 2.0
    assert elapsed <= limit + 2.0 + 3.0  # spawn and result building around the measured window
    assert result.epochs_completed < 100_000


def test_memory_cap_kills_and_reports_oom() -> None:
    result = run_trial(DIGITS_MLP, _sklearn(), limits=Limits(memory_mb=60))
    _check_clean(result)
    assert result.status == "oom"
    assert result.error is not None and "memory cap" in result.error
    assert result.peak_memory_mb is not None and result.peak_memory_mb > 60


def test_exploding_loss_is_diverged() -> None:
    config = _sklearn(optimizer="sgd", learning_rate=1e4, epochs=5)
    result = run_trial(DIGITS_MLP, config)
    _check_clean(result)
    assert result.status == "diverged", result.error
    assert result.error is not None and result.error.startswith("diverged")
    assert 1 <= result.epochs_completed <= 5


def test_on_epoch_false_prunes_and_keeps_the_partial_curve() -> None:
    calls: list[int] = []

    def stop_after_two(record: EpochRecord) -> bool:
        calls.append(record.epoch)
        return record.epoch < 2

    result = run_trial(DIGITS_MLP, _sklearn(epochs=500), on_epoch=stop_after_two)
    _check_clean(result)
    assert result.status == "pruned"
    assert calls == [1, 2]
    assert 2 <= result.epochs_completed < 500
    assert [e.epoch for e in result.epochs[:2]] == [1, 2]
    assert result.test_accuracy is not None and result.train_time_s == result.epochs[-1].train_time_s


def test_on_epoch_exception_propagates_and_kills_the_child() -> None:
    def boom(record: EpochRecord) -> bool:
        raise RuntimeError("callback bug")

    with pytest.raises(RuntimeError, match="callback bug"):
        run_trial(DIGITS_MLP, _sklearn(epochs=500), on_epoch=boom)
    assert _live_children() == []


def test_malformed_npz_fails_with_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, x_train=np.zeros((10, 4, 4, 1), np.float32), y_train=np.zeros(3, np.int64),
             x_test=np.zeros((5, 4, 4, 1), np.float32), y_test=np.zeros(5, np.int64))
    result = run_trial(Workload(dataset=str(path), model="mlp"), _sklearn(epochs=1))
    _check_clean(result)
    assert result.status == "failed"
    assert result.error is not None and "\n" not in result.error and "Traceback" not in result.error
    assert "bad.npz" in result.error or "y_train" in result.error


def test_cuda_on_a_machine_without_gpu_fails_with_the_device_message() -> None:
    if hardware.identity().gpus:
        pytest.skip("this machine has a GPU")
    result = run_trial(DIGITS_MLP, _sklearn(device="cuda", epochs=1))
    _check_clean(result)
    assert result.status == "failed"
    assert result.error is not None and result.error.startswith("CUDA device 'cuda' requested")
    assert result.device_kind == "gpu"


def test_missing_framework_fails_with_the_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "blocked" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    monkeypatch.setenv("PYTHONPATH", str(blocker.parent))
    result = run_trial(DIGITS_MLP, Config(framework="torch", epochs=1))
    _check_clean(result)
    assert result.status == "failed"
    assert result.error is not None and "\n" not in result.error
    assert "torch" in result.error and "install" in result.error


@pytest.mark.parametrize(("behaviour", "expected"), [
    ("segfault", "SIGSEGV"),
    ("exit", "exited with code 7"),
])
def test_crashing_child_fails_with_exit_status(monkeypatch: pytest.MonkeyPatch, behaviour: str, expected: str) -> None:
    monkeypatch.setenv("ADVISOR_TEST_CHILD_BEHAVIOUR", behaviour)
    result = run_trial(DIGITS_MLP, _sklearn())
    _check_clean(result)
    assert result.status == "failed"
    assert result.error is not None and expected in result.error
    assert result.extra["exit_code"] == (-signal.SIGSEGV if behaviour == "segfault" else 7)


def test_segfault_error_carries_the_child_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISOR_TEST_CHILD_BEHAVIOUR", "segfault")
    result = run_trial(DIGITS_MLP, _sklearn())
    assert result.error is not None and "Segmentation fault" in result.error  # the fault handler's report


@pytest.mark.parametrize("behaviour", ["garbage", "huge_line"])
def test_hostile_event_channel_fails_the_trial_with_bounded_memory(
    monkeypatch: pytest.MonkeyPatch, behaviour: str
) -> None:
    monkeypatch.setenv("ADVISOR_TEST_CHILD_BEHAVIOUR", behaviour)
    before = psutil.Process().memory_info().rss
    result = run_trial(DIGITS_MLP, _sklearn(), limits=Limits(wall_time_s=60))
    grown_mb = (psutil.Process().memory_info().rss - before) / 2**20
    _check_clean(result)
    assert result.status == "failed"
    assert result.error is not None and result.error.startswith("progress channel:")
    assert grown_mb < 64  # the huge line is 512 MiB; the reader keeps at most 64 KiB of it


def test_child_dies_when_the_parent_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        from advisor.harness import Limits, run_trial
        from advisor.records import Config, Workload
        run_trial(Workload(dataset="digits", model="mlp"),
                  Config(framework="sklearn", epochs=100000, batch_size=32),
                  limits=Limits(wall_time_s=300))
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path)
    try:
        child = None
        deadline = time.monotonic() + 60
        while child is None and time.monotonic() < deadline and parent.poll() is None:
            for proc in psutil.Process(parent.pid).children():
                try:
                    if CHILD_MODULE in " ".join(proc.cmdline()):
                        child = proc
                except psutil.Error:
                    continue
            time.sleep(0.1)
        assert child is not None, "the trial child never started"
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        gone_by = time.monotonic() + 10
        while time.monotonic() < gone_by:
            try:
                if child.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.1)
        else:
            child.kill()
            pytest.fail("the trial child outlived its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_malformed_events_are_rejected_before_they_reach_the_result() -> None:
    from advisor.harness.outcome import TrialLog

    log = TrialLog()
    with pytest.raises(KeyError):
        log.add({"event": "final", "train_time_s": 1.0, "eval_time_s": 0.1})
    with pytest.raises(ValueError):
        log.add({"event": "data_loaded", "num_classes": "ten"})
    with pytest.raises(KeyError):
        log.add({"event": "epoch", "epoch": 1, "train_time_s": 1.0, "epoch_time_s": 1.0})
    assert log.status is None and log.epochs == []
    log.add({"event": "error", "type": "MemoryError", "message": "", "advisor_error": False})
    assert log.status == "oom"


def test_relative_data_paths_are_resolved_before_the_child_changes_folder(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from advisor.harness.parent import _absolute_paths

    (tmp_path / "data").mkdir()
    (tmp_path / "mine.npz").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    w = _absolute_paths(Workload(dataset="mine.npz", model="mlp", data_dir="data"))
    assert w.data_dir == str(tmp_path / "data")
    assert w.dataset == str(tmp_path / "mine.npz")
    assert _absolute_paths(Workload(dataset="digits", model="mlp")).dataset == "digits"
