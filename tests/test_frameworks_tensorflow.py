"""The TensorFlow/Keras backend trains the shared specs through the shared protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed (pip install 'advisor[tensorflow]')")

from advisor.errors import DeviceError  # noqa: E402
from advisor.frameworks import get_trainer_class  # noqa: E402
from advisor.frameworks.base import TrialDiverged, run_protocol  # noqa: E402
from advisor.frameworks.tensorflow import TensorFlowTrainer  # noqa: E402
from advisor.models import get_model, param_count  # noqa: E402
from advisor.records import Config  # noqa: E402
from tests._backend_checks import check_augmentation_changes_training_batches_but_never_the_test_set  # noqa: E402

# One config shared with the onnxruntime tests: both backends must learn digits with it.
SHARED = dict(framework="tensorflow", batch_size=32, learning_rate=1e-3, optimizer="adam", epochs=10)


@pytest.fixture(scope="module")
def digits() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[..., None]
    y = data.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, stratify=y, random_state=0)
    mean, std = x_train.mean(), x_train.std()
    return {"x_train": (x_train - mean) / std, "y_train": y_train,
            "x_test": (x_test - mean) / std, "y_test": y_test}


def _run(config: Config, model: str, data: dict[str, np.ndarray]) -> tuple[object, list[dict]]:
    trainer = TensorFlowTrainer(config)
    trainer.configure()
    events: list[dict] = []
    try:
        result = run_protocol(trainer, get_model(model), num_classes=10, config=config,
                              emit=events.append, **data)
    finally:
        trainer.close()
    return result, events


def test_registry_returns_this_backend() -> None:
    assert get_trainer_class("tensorflow") is TensorFlowTrainer


@pytest.mark.parametrize("model", ["lenet5", "mlp"])
def test_learns_digits(digits: dict[str, np.ndarray], model: str) -> None:
    config = Config(**SHARED)
    result, events = _run(config, model, digits)
    assert [e["epoch"] for e in events] == list(range(1, 11))
    assert result.params == param_count(get_model(model), (8, 8, 1), 10)
    assert events[-1]["loss"] < events[0]["loss"] / 3
    assert events[-1]["test_accuracy"] >= 0.90
    assert result.train_time_s == pytest.approx(sum(e["epoch_time_s"] for e in events))


def test_xla_step_trains(digits: dict[str, np.ndarray]) -> None:
    config = Config(**{**SHARED, "epochs": 2, "xla": True})
    trainer = TensorFlowTrainer(config)
    assert trainer.configure()["xla"] is True
    trainer.close()
    result, events = _run(config, "mlp", digits)
    assert events[-1]["test_accuracy"] >= 0.85
    assert result.description["jit_compile"] is True


@pytest.mark.parametrize(("model", "shape"), [
    ("lenet5", (8, 8, 1)), ("mlp", (28, 28, 1)), ("cifar_quick", (32, 32, 3)),
    ("lenet5", (28, 28, 1)), ("cifar_quick", (8, 8, 1)), ("mlp", (32, 32, 3)),
])
def test_param_count_matches_spec(model: str, shape: tuple[int, int, int]) -> None:
    trainer = TensorFlowTrainer(Config(framework="tensorflow"))
    trainer.configure()
    try:
        count = trainer.build(get_model(model), shape, 10)
        assert count == param_count(get_model(model), shape, 10)
        assert sum(int(np.prod(v.shape)) for v in trainer.model_.trainable_variables) == count
    finally:
        trainer.close()


def test_weight_decay_is_l2_in_the_gradient() -> None:
    """One full-batch SGD step: decay must move every weight by exactly -lr * wd * w (torch's rule)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4, 4, 1)).astype(np.float32)
    y = rng.integers(0, 3, 16).astype(np.int64)
    lr, wd = 0.1, 0.05
    weights = {}
    for decay in (0.0, wd):
        trainer = TensorFlowTrainer(Config(framework="tensorflow", batch_size=16, learning_rate=lr,
                                           weight_decay=decay, seed=3))
        trainer.configure()
        trainer.build(get_model("mlp"), (4, 4, 1), 3)
        before = [v.numpy().copy() for v in trainer.model_.trainable_variables]
        trainer.train_epoch(x, y)
        weights[decay] = (before, [v.numpy() for v in trainer.model_.trainable_variables])
        trainer.close()
    start, plain = weights[0.0]
    start_wd, decayed = weights[wd]
    for w0, w0_wd, a, b in zip(start, start_wd, plain, decayed):
        np.testing.assert_array_equal(w0, w0_wd)  # same seed, same start
        np.testing.assert_allclose(b - a, -lr * wd * w0, atol=1e-6)
    assert any(np.abs(w0).max() > 0.1 for w0 in start)  # the check above is not vacuous


def test_huge_learning_rate_diverges(digits: dict[str, np.ndarray]) -> None:
    config = Config(**{**SHARED, "learning_rate": 1e4, "epochs": 3})
    with pytest.raises(TrialDiverged):
        _run(config, "lenet5", digits)


def test_configure_reports_state_in_force() -> None:
    trainer = TensorFlowTrainer(Config(framework="tensorflow", threads=1, inter_op_threads=1))
    report = trainer.configure()
    assert report["intra_op_threads"] == tf.config.threading.get_intra_op_parallelism_threads()
    assert report["inter_op_threads"] == tf.config.threading.get_inter_op_parallelism_threads()
    assert report["device"] == "/CPU:0"
    assert isinstance(report["onednn"], bool) and report["xla"] is False
    versions = trainer.versions()
    assert versions["tensorflow"] == tf.__version__
    assert versions["cuda_build"] in ("true", "false")


_CHILD = textwrap.dedent("""
    import json
    import tensorflow as tf
    from advisor.frameworks.tensorflow import TensorFlowTrainer
    from advisor.records import Config

    def configure(intra, inter):
        return TensorFlowTrainer(Config(framework="tensorflow", threads=intra, inter_op_threads=inter)).configure()

    first = configure(2, 1)
    tf.linalg.matmul(tf.ones((8, 8)), tf.ones((8, 8))).numpy()  # the runtime starts here
    up = [tf.config.threading.get_intra_op_parallelism_threads(),
          tf.config.threading.get_inter_op_parallelism_threads()]
    print(json.dumps({"first": first, "after_first_op": up, "second": configure(1, 2)}))
""")


def test_thread_pools_are_applied_before_the_first_op() -> None:
    # TF fixes its pools once per process, when the runtime starts: this needs a fresh interpreter.
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    first = report["first"]
    assert (first["intra_op_threads"], first["inter_op_threads"]) == (2, 1)
    assert report["after_first_op"] == [2, 1]
    assert first["onednn"] is False and first["onednn_source"] == "TF_ENABLE_ONEDNN_OPTS=0"
    # Too late to change the pools: the report tells the truth instead of echoing the request.
    second = report["second"]
    assert (second["intra_op_threads"], second["inter_op_threads"]) == (2, 1)
    assert "TensorFlow thread pools already fixed" in proc.stderr


def test_cuda_without_gpu_raises_device_error() -> None:
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("a GPU is visible to tensorflow here; the missing-GPU path cannot be tested")
    trainer = TensorFlowTrainer(Config(framework="tensorflow", device="cuda"))
    with pytest.raises(DeviceError, match="tensorflow sees no GPU") as info:
        trainer.configure()
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ recipe knobs (advisor.knobs)


@pytest.mark.parametrize(("schedule", "warmup", "xla"), [
    ("onecycle", 0.2, False), ("cosine", 0.0, False), ("step", 0.0, False), ("cosine", 0.0, True),
])
def test_learning_rate_applied_per_step_follows_the_schedule(digits, schedule: str, warmup: float,
                                                             xla: bool) -> None:
    from advisor.frameworks.base import learning_rate_at

    config = Config(framework="tensorflow", optimizer="momentum", momentum=0.9, learning_rate=0.5,
                    batch_size=8, epochs=3, schedule=schedule, warmup_fraction=warmup, xla=xla or None)
    trainer = TensorFlowTrainer(config)
    trainer.configure()
    trainer.build(get_model("lenet5"), (8, 8, 1), 10)
    x, y = digits["x_train"][:40], digits["y_train"][:40]
    trainer.plan(5)  # 40 samples at batch 8: 5 steps an epoch, 15 in all
    seen = []
    try:
        for step in range(15):
            start = (step % 5) * 8
            trainer.train_epoch(x[start:start + 8], y[start:start + 8])  # one batch: one step
            seen.append(trainer.current_learning_rate())  # read back from the rate variable
        assert trainer._train_step.experimental_get_tracing_count() == 1  # the rate never retraces
    finally:
        trainer.close()
    expected = [learning_rate_at(config, t, 15) for t in range(15)]
    assert seen == pytest.approx(expected, rel=1e-6)  # float32 variable
    assert len(set(seen)) > 2


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_under_a_changing_rate_follows_torch(nesterov: bool) -> None:
    """Two full-batch steps whose rates differ tenfold: the second update must be torch's
    lr1 * (m * g0 + g1) (Nesterov: lr1 * (g1 + m * (m * g0 + g1))), not Keras' m * lr0 * g0 + lr1 * g1."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4, 4, 1)).astype(np.float32)
    y = rng.integers(0, 3, 16).astype(np.int64)
    m = 0.9
    config = Config(framework="tensorflow", optimizer="momentum", momentum=m, nesterov=nesterov,
                    learning_rate=0.1, batch_size=16, epochs=2, schedule="step", seed=1)
    trainer = TensorFlowTrainer(config)
    trainer.configure()
    trainer.build(get_model("mlp"), (4, 4, 1), 3)
    trainer.plan(1)  # two steps: the step schedule runs step 1 at a tenth of the rate
    lr0, lr1 = trainer.lr_at(0), trainer.lr_at(1)
    assert lr1 == pytest.approx(lr0 / 10)
    variables = trainer.model_.trainable_variables

    def grads() -> list[np.ndarray]:
        with tf.GradientTape() as tape:
            loss = trainer.loss_fn_(tf.constant(y), trainer.model_(x, training=True))
        return [g.numpy() for g in tape.gradient(loss, variables)]

    try:
        g0 = grads()
        trainer.train_epoch(x, y)
        p1, g1 = [v.numpy().copy() for v in variables], grads()
        trainer.train_epoch(x, y)
        p2 = [v.numpy() for v in variables]
    finally:
        trainer.close()
    for a, b, c, d in zip(p1, p2, g0, g1):
        buf = m * c + d
        step = d + m * buf if nesterov else buf
        np.testing.assert_allclose(b, a - lr1 * step, rtol=1e-4, atol=1e-6)
    assert max(np.abs(m * (lr0 - lr1) * c).max() for c in g0) > 1e-3  # Keras' own rule would fail


def test_augmentation_changes_training_batches_but_never_the_test_set(digits) -> None:
    check_augmentation_changes_training_batches_but_never_the_test_set(TensorFlowTrainer, "tensorflow", digits)


def test_label_smoothing_is_torchs_definition() -> None:
    eps = 0.1
    trainer = TensorFlowTrainer(Config(framework="tensorflow", label_smoothing=eps))
    trainer.configure()
    try:
        trainer.build(get_model("mlp"), (4, 4, 1), 4)
        logits = np.array([[2.0, -1.0, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32)
        labels = np.array([0, 3])
        got = float(trainer.loss_fn_(tf.constant(labels), tf.constant(logits)))
    finally:
        trainer.close()
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    target = np.full((2, 4), eps / 4)
    target[[0, 1], labels] += 1 - eps
    expected = float(np.mean(-(target * log_p).sum(axis=1)))
    assert got == pytest.approx(expected, rel=1e-6)
    plain = float(np.mean(-log_p[[0, 1], labels]))
    assert abs(expected - plain) > 0.05  # the smoothing is visible at this tolerance


def test_adamw_decay_is_decoupled_and_adds_no_regularization_loss() -> None:
    """One step: AdamW's decay moves each weight by exactly -lr * wd * w beyond the Adam step."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4, 4, 1)).astype(np.float32)
    y = rng.integers(0, 3, 16).astype(np.int64)
    lr, wd = 0.01, 0.2
    weights = {}
    for decay in (0.0, wd):
        trainer = TensorFlowTrainer(Config(framework="tensorflow", optimizer="adamw", batch_size=16,
                                           learning_rate=lr, weight_decay=decay, seed=3))
        trainer.configure()
        trainer.build(get_model("mlp"), (4, 4, 1), 3)
        assert trainer.model_.losses == []  # no L2 penalty on any layer
        assert trainer.describe()["weight_decay_kind"] == ("decoupled" if decay else "none")
        before = [v.numpy().copy() for v in trainer.model_.trainable_variables]
        trainer.train_epoch(x, y)
        weights[decay] = (before, [v.numpy() for v in trainer.model_.trainable_variables])
        trainer.close()
    (start, plain), (_, decayed) = weights[0.0], weights[wd]
    for w0, a, b in zip(start, plain, decayed):
        np.testing.assert_allclose(b - a, -lr * wd * w0, atol=1e-6)
    assert max(np.abs(lr * wd * w0).max() for w0 in start) > 1e-4


def test_nesterov_reaches_the_keras_optimizer() -> None:
    trainer = TensorFlowTrainer(Config(framework="tensorflow", optimizer="momentum", momentum=0.9, nesterov=True))
    trainer.configure()
    try:
        trainer.build(get_model("mlp"), (4, 4, 1), 3)
        assert trainer.optimizer_.nesterov is True and trainer.optimizer_.momentum == 0.9
    finally:
        trainer.close()


def test_bfloat16_is_refused_in_one_line_without_cpu_support(monkeypatch) -> None:
    import advisor.hardware

    monkeypatch.setattr(advisor.hardware, "cpu_bf16_support", lambda: None)
    with pytest.raises(DeviceError) as info:
        TensorFlowTrainer(Config(framework="tensorflow", bfloat16=True)).configure()
    assert "avx512_bf16" in str(info.value) and "\n" not in str(info.value)


def test_bfloat16_computes_in_bfloat16_with_a_float32_classifier(monkeypatch) -> None:
    import advisor.hardware

    # Whether the CPU has native bfloat16 only decides speed; the policy is the same either way.
    monkeypatch.setattr(advisor.hardware, "cpu_bf16_support", lambda: "avx512_bf16")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 10, 32).astype(np.int64)
    trainer = TensorFlowTrainer(Config(framework="tensorflow", bfloat16=True, batch_size=16))
    try:
        assert trainer.configure()["bfloat16"] is True
        trainer.build(get_model("lenet5"), (8, 8, 1), 10)
        assert trainer.describe()["dtype_policy"] == "mixed_bfloat16"
        layers = [l for l in trainer.model_.layers if l.weights]
        assert layers[0].compute_dtype == "bfloat16" and layers[-1].compute_dtype == "float32"
        assert all(v.dtype == "float32" for v in trainer.model_.trainable_variables)
        assert np.isfinite(trainer.train_epoch(x, y))
        assert trainer.predict(x).shape == (32,)
    finally:
        trainer.close()
