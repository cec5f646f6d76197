"""The scikit-learn backend and its numpy engine: learning on real digits, BLAS thread limits,
divergence, device errors, and a finite-difference check of the engine's gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from advisor import models
from advisor.errors import DeviceError
from advisor.frameworks import get_trainer_class
from advisor.frameworks._numpy_cnn import NumpyNet, softmax_cross_entropy
from advisor.frameworks.base import TrialDiverged, run_protocol
from advisor.frameworks.sklearn import SklearnTrainer
from advisor.records import Config
from tests._backend_checks import check_augmentation_changes_training_batches_but_never_the_test_set  # noqa: E402


@pytest.fixture(scope="module")
def digits() -> dict[str, np.ndarray]:
    """scikit-learn's 1,797 real 8x8 digits as NHWC, standardised, with a fixed stratified split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[..., None]
    x_train, x_test, y_train, y_test = train_test_split(
        x, data.target.astype(np.int64), test_size=0.25, stratify=data.target, random_state=0
    )
    mean, std = x_train.mean(), x_train.std()
    return {"x_train": (x_train - mean) / std, "y_train": y_train,
            "x_test": (x_test - mean) / std, "y_test": y_test}


def _run(config: Config, model: str, data: dict[str, np.ndarray]) -> tuple[Any, list[dict[str, Any]], dict]:
    trainer = SklearnTrainer(config)
    trainer.configure()
    events: list[dict[str, Any]] = []
    try:
        result = run_protocol(trainer, models.get_model(model), num_classes=10, config=config,
                              emit=events.append, **data)
        described = trainer.describe()
    finally:
        trainer.close()
    return result, events, described


def _blas_threads() -> list[int]:
    return [int(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"]


def test_registry_finds_the_sklearn_trainer() -> None:
    assert get_trainer_class("sklearn") is SklearnTrainer


def test_mlp_learns_digits_with_mlpclassifier(digits: dict[str, np.ndarray]) -> None:
    config = Config(framework="sklearn", optimizer="momentum", learning_rate=0.05, momentum=0.9,
                    batch_size=32, epochs=4, threads=2)
    result, events, described = _run(config, "mlp", digits)
    assert described == {"engine": "sklearn-mlpclassifier"}
    assert result.params == models.param_count(models.get_model("mlp"), (8, 8, 1), 10) == 50_826
    assert events[-1]["test_accuracy"] >= 0.90
    assert events[-1]["loss"] < events[0]["loss"]


def test_lenet5_learns_digits_with_the_numpy_engine(digits: dict[str, np.ndarray]) -> None:
    config = Config(framework="sklearn", optimizer="momentum", learning_rate=0.01, momentum=0.9,
                    batch_size=32, epochs=6, threads=2)
    result, events, described = _run(config, "lenet5", digits)
    assert described == {"engine": "numpy-im2col"}
    assert result.params == 21_386
    assert events[-1]["test_accuracy"] >= 0.90


def test_mlp_solver_settings_follow_the_config() -> None:
    trainer = SklearnTrainer(Config(framework="sklearn", optimizer="momentum", momentum=0.8,
                                    learning_rate=0.03, batch_size=16, weight_decay=1e-3, seed=7))
    trainer.build(models.get_model("mlp"), (8, 8, 1), 10)
    params = trainer.mlp_.get_params()
    assert (params["solver"], params["momentum"], params["nesterovs_momentum"]) == ("sgd", 0.8, False)
    assert (params["learning_rate_init"], params["batch_size"], params["random_state"]) == (0.03, 16, 7)
    assert params["hidden_layer_sizes"] == (256, 128) and params["shuffle"] is False
    assert params["alpha"] == pytest.approx(1e-3 * 16)  # per-step decay equal to weight_decay


def test_two_classes_use_the_numpy_engine() -> None:
    # MLPClassifier would build a single logistic output: a different model from the spec.
    trainer = SklearnTrainer(Config(framework="sklearn"))
    count = trainer.build(models.get_model("mlp"), (8, 8, 1), 2)
    assert trainer.describe() == {"engine": "numpy-im2col"}
    assert count == models.param_count(models.get_model("mlp"), (8, 8, 1), 2)


@pytest.mark.parametrize("threads", [1, 2])
def test_configure_limits_blas_threads_until_close(threads: int) -> None:
    before = _blas_threads()
    trainer = SklearnTrainer(Config(framework="sklearn", threads=threads))
    applied = trainer.configure()
    assert applied["intra_op_threads"] == threads == applied["blas_threads"]
    assert applied["inter_op_threads"] == 1
    assert "openblas" in applied["blas"] or "mkl" in applied["blas"]
    assert set(_blas_threads()) == {threads}
    trainer.close()
    assert _blas_threads() == before


def test_versions_name_sklearn_and_the_blas() -> None:
    import sklearn

    versions = SklearnTrainer(Config(framework="sklearn")).versions()
    assert versions["scikit-learn"] == sklearn.__version__
    assert versions["numpy"] == np.__version__


@pytest.mark.parametrize("model", ["mlp", "lenet5"])
def test_huge_learning_rate_diverges(model: str, digits: dict[str, np.ndarray]) -> None:
    config = Config(framework="sklearn", optimizer="sgd", learning_rate=1e4, batch_size=32, epochs=3)
    with pytest.raises(TrialDiverged):
        _run(config, model, digits)


def test_cuda_is_a_one_line_device_error() -> None:
    with pytest.raises(DeviceError) as info:
        SklearnTrainer(Config(framework="sklearn", device="cuda:0")).configure()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("CUDA device 'cuda:0' requested but sklearn sees no GPU")
    assert "scikit-learn has no CUDA path" in message


GRAD_SPEC = models.ModelSpec(
    "check",
    (models.Layer("conv", 3, 3, "relu"), models.Layer("maxpool"), models.Layer("conv", 4, 4, "relu"),
     models.Layer("avgpool"), models.Layer("flatten"), models.Layer("dense", 5, activation="relu"),
     models.Layer("dense", None)),
    "odd sizes, both poolings and an even kernel", True,
)


def test_numpy_engine_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 9, 7, 2))
    y = rng.integers(0, 3, 4)
    net = NumpyNet(GRAD_SPEC, (9, 7, 2), 3, seed=3, dtype=np.float64)
    net.loss_and_grads(x, y)
    analytic = [g.copy() for g in net.grads]
    eps = 1e-6
    for param, grad in zip(net.params, analytic):
        for idx in np.ndindex(param.shape):
            old = param[idx]
            param[idx] = old + eps
            plus = net.loss_and_grads(x, y)
            param[idx] = old - eps
            minus = net.loss_and_grads(x, y)
            param[idx] = old
            numeric = (plus - minus) / (2 * eps)
            assert numeric == pytest.approx(grad[idx], rel=1e-4, abs=1e-7), idx
    assert any(np.abs(g).max() > 1e-3 for g in analytic)  # the check saw real gradients


def test_softmax_cross_entropy_by_hand() -> None:
    loss, grad = softmax_cross_entropy(np.array([[0.0, np.log(3.0)]]), np.array([1]))
    assert loss == pytest.approx(-np.log(0.75))  # p = 3 / (1 + 3)
    np.testing.assert_allclose(grad, [[0.25, -0.25]])


def test_optimizer_steps_follow_their_definitions() -> None:
    spec = models.get_model("mlp")
    for optimizer in ("sgd", "adam"):
        net = NumpyNet(spec, (2, 2, 1), 3, optimizer=optimizer, learning_rate=0.1, weight_decay=0.5,
                       dtype=np.float64)
        before = [p.copy() for p in net.params]
        for g in net.grads:
            g[...] = 0.2
        net.step()
        for old, new in zip(before, net.params):
            if optimizer == "sgd":  # p - lr * (g + wd * p)
                np.testing.assert_allclose(new, old - 0.1 * (0.2 + 0.5 * old))
            else:  # Adam's first step moves by lr * sign(g + wd * p)
                # atol: Adam's eps in the denominator matters where g + wd * p is tiny.
                np.testing.assert_allclose(new, old - 0.1 * np.sign(0.2 + 0.5 * old), atol=1e-5)


# ------------------------------------------------------------------ recipe knobs (advisor.knobs)


@pytest.mark.parametrize("model", ["mlp", "lenet5"])  # MLPClassifier, then the numpy engine
@pytest.mark.parametrize(("schedule", "warmup", "optimizer"), [
    ("onecycle", 0.2, "momentum"), ("cosine", 0.0, "adam"), ("step", 0.0, "sgd"),
])
def test_learning_rate_applied_per_step_follows_the_schedule(digits, model: str, schedule: str, warmup: float,
                                                             optimizer: str) -> None:
    from advisor.frameworks.base import learning_rate_at

    config = Config(framework="sklearn", optimizer=optimizer, momentum=0.9 if optimizer == "momentum" else 0.0,
                    learning_rate=0.05, batch_size=8, epochs=3, schedule=schedule, warmup_fraction=warmup)
    trainer = SklearnTrainer(config)
    trainer.build(models.get_model(model), (8, 8, 1), 10)
    x, y = digits["x_train"][:40], digits["y_train"][:40]
    trainer.plan(5)  # 40 samples at batch 8: 5 steps an epoch, 15 in all
    seen = []
    for step in range(15):
        start = (step % 5) * 8
        trainer.train_epoch(x[start:start + 8], y[start:start + 8])  # one batch: one step
        seen.append(trainer.current_learning_rate())  # what the optimizer itself holds
    expected = [learning_rate_at(config, t, 15) for t in range(15)]
    assert seen == pytest.approx(expected, rel=1e-12)
    assert len(set(seen)) > 2
    if model == "mlp":
        assert len(trainer.mlp_.loss_curve_) == 15  # one partial_fit per step


def test_a_constant_rate_keeps_one_partial_fit_per_epoch(digits) -> None:
    config = Config(framework="sklearn", learning_rate=0.05, batch_size=32, epochs=2)
    trainer = SklearnTrainer(config)
    trainer.build(models.get_model("mlp"), (8, 8, 1), 10)
    trainer.plan(11)
    for _ in range(2):
        trainer.train_epoch(digits["x_train"][:320], digits["y_train"][:320])
    assert len(trainer.mlp_.loss_curve_) == 2 and trainer.current_learning_rate() == 0.05


@pytest.mark.parametrize("nesterov", [False, True])
def test_mlp_momentum_under_a_changing_rate_follows_torch(nesterov: bool) -> None:
    """Two full-batch steps whose rates differ tenfold: the second update must be torch's
    lr1 * (m * g0 + g1) (Nesterov: lr1 * (g1 + m * (m * g0 + g1))), not sklearn's m * lr0 * g0 + lr1 * g1."""
    import copy

    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4, 4, 1)).astype(np.float32)
    y = np.arange(16) % 3
    m = 0.9
    trainer = SklearnTrainer(Config(framework="sklearn", optimizer="momentum", momentum=m, nesterov=nesterov,
                                    learning_rate=0.1, batch_size=16, epochs=2, schedule="step"))
    trainer.build(models.get_model("mlp"), (4, 4, 1), 3)
    trainer.plan(1)  # two steps: the step schedule runs step 1 at a tenth of the rate
    lr0, lr1 = trainer.lr_at(0), trainer.lr_at(1)

    def params() -> list[np.ndarray]:
        return [p.copy() for p in (*trainer.mlp_.coefs_, *trainer.mlp_.intercepts_)]

    trainer.train_epoch(x, y)
    p1 = params()
    # The gradient at p1: one plain step of size 1 from a copy.
    probe = copy.deepcopy(trainer.mlp_)
    probe._optimizer.momentum, probe._optimizer.learning_rate = 0.0, 1.0
    with np.errstate(all="ignore"):
        probe.partial_fit(x.reshape(16, -1), y)
    g1 = [a - b for a, b in zip(p1, (*probe.coefs_, *probe.intercepts_))]
    # The first step started from a zero velocity: p1 = p0 - lr0 * (1 + m if Nesterov else 1) * g0.
    v1 = trainer.mlp_._optimizer.velocities  # sklearn's v = -lr0 * g0
    g0 = [-v / lr0 for v in v1]
    trainer.train_epoch(x, y)
    for a, b, c, d in zip(p1, params(), g0, g1):
        buf = m * c + d
        step = d + m * buf if nesterov else buf
        np.testing.assert_allclose(b, a - lr1 * step, rtol=1e-6, atol=1e-9)
    assert max(np.abs(m * (lr0 - lr1) * c).max() for c in g0) > 1e-3  # sklearn's own rule would fail


def test_numpy_engine_nesterov_is_torchs() -> None:
    """Two hand-computed steps of torch's SGD(nesterov=True): buf = m * buf + g; p -= lr * (g + m * buf)."""
    spec = models.get_model("lenet5")
    lr, m = 0.1, 0.9
    nets = {n: NumpyNet(spec, (8, 8, 1), 3, optimizer="momentum", learning_rate=lr, momentum=m, nesterov=n,
                        dtype=np.float64) for n in (False, True)}
    start = [p.copy() for p in nets[True].params]
    for g_value in (0.2, -0.3):
        for net in nets.values():
            for g in net.grads:
                g[...] = g_value
            net.step()
    buf1 = 0.2
    buf2 = m * buf1 - 0.3
    for p0, p2 in zip(start, nets[True].params):
        p1 = p0 - lr * (0.2 + m * buf1)
        np.testing.assert_allclose(p2, p1 - lr * (-0.3 + m * buf2))
    # Plain momentum ends elsewhere: p0 - lr * (buf1 + buf2).
    for p0, plain, nest in zip(start, nets[False].params, nets[True].params):
        np.testing.assert_allclose(plain, p0 - lr * (buf1 + buf2))
        assert np.abs(plain - nest).min() > 1e-3


def test_nesterov_reaches_both_engines(digits) -> None:
    config = Config(framework="sklearn", optimizer="momentum", momentum=0.9, nesterov=True, learning_rate=0.05,
                    batch_size=32)
    mlp, cnn = SklearnTrainer(config), SklearnTrainer(config)
    mlp.build(models.get_model("mlp"), (8, 8, 1), 10)
    cnn.build(models.get_model("lenet5"), (8, 8, 1), 10)
    assert mlp.mlp_.get_params()["nesterovs_momentum"] is True
    assert cnn.net_ is not None and cnn.net_.nesterov is True
    # and it changes the numpy engine's trajectory against plain momentum
    plain = SklearnTrainer(Config(**{**config.to_dict(), "nesterov": False}))
    plain.build(models.get_model("lenet5"), (8, 8, 1), 10)
    x, y = digits["x_train"][:64], digits["y_train"][:64]
    for trainer in (cnn, plain):
        trainer.plan(2)
        trainer.train_epoch(x, y)
    assert plain.net_ is not None
    diff = max(np.abs(a - b).max() for a, b in zip(cnn.net_.params, plain.net_.params))
    assert diff > 1e-4


def test_augmentation_changes_training_batches_but_never_the_test_set(digits) -> None:
    check_augmentation_changes_training_batches_but_never_the_test_set(SklearnTrainer, "sklearn", digits, model="mlp")
