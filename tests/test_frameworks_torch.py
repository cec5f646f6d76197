"""The PyTorch backend: the shared protocol on real digits, thread and device settings, and
agreement with the numpy engine on the same weights."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'advisor[torch]')")

from advisor import models  # noqa: E402
from advisor.errors import DeviceError  # noqa: E402
from advisor.frameworks import get_trainer_class  # noqa: E402
from advisor.frameworks._numpy_cnn import NumpyNet  # noqa: E402
from advisor.frameworks.base import TrialDiverged, run_protocol  # noqa: E402
from advisor.frameworks.torch import TorchTrainer  # noqa: E402
from advisor.records import Config  # noqa: E402
from tests._backend_checks import check_augmentation_changes_training_batches_but_never_the_test_set  # noqa: E402

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


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


def _run(config: Config, model: str, data: dict[str, np.ndarray]) -> tuple[Any, list[dict[str, Any]]]:
    trainer = TorchTrainer(config)
    trainer.configure()
    events: list[dict[str, Any]] = []
    try:
        result = run_protocol(trainer, models.get_model(model), num_classes=10, config=config,
                              emit=events.append, **data)
    finally:
        trainer.close()
    return result, events


def test_registry_finds_the_torch_trainer() -> None:
    assert get_trainer_class("torch") is TorchTrainer


def test_lenet5_learns_digits(digits: dict[str, np.ndarray]) -> None:
    config = Config(framework="torch", optimizer="adam", learning_rate=2e-3, batch_size=32, epochs=10,
                    threads=2, seed=0)
    result, events = _run(config, "lenet5", digits)
    assert result.params == models.param_count(models.get_model("lenet5"), (8, 8, 1), 10) == 21_386
    assert [e["epoch"] for e in events] == list(range(1, 11))
    assert events[-1]["test_accuracy"] >= 0.90
    assert events[-1]["loss"] < events[0]["loss"]
    assert result.gpu_peak_memory_mb is None


@pytest.mark.parametrize("threads", [1, 2])
def test_configure_reports_the_threads_asked_for(threads: int) -> None:
    applied = TorchTrainer(Config(framework="torch", threads=threads)).configure()
    assert applied["intra_op_threads"] == threads == torch.get_num_threads()
    assert applied["device"] == "cpu"
    assert applied["mixed_precision"] is False  # AMP is a CUDA feature here


def test_inter_op_threads_apply_in_a_fresh_process() -> None:
    # Inter-op threads can be set once per process, before any parallel work: as in the trial child.
    code = (
        "import json; from advisor.frameworks.torch import TorchTrainer; from advisor.records import Config;"
        "c = Config(framework='torch', threads=1, inter_op_threads=2);"
        "print(json.dumps(TorchTrainer(c).configure()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120)
    applied = json.loads(out.stdout.strip().splitlines()[-1])
    assert applied["inter_op_threads"] == 2
    assert applied["intra_op_threads"] == 1


def test_onednn_switch_is_applied_and_reported() -> None:
    before = torch.backends.mkldnn.enabled
    try:
        applied = TorchTrainer(Config(framework="torch", onednn=False)).configure()
        assert applied["onednn"] is False
        assert torch.backends.mkldnn.enabled is False
    finally:
        torch.backends.mkldnn.enabled = before


def test_versions_name_torch_and_its_parallel_backend() -> None:
    versions = TorchTrainer(Config(framework="torch")).versions()
    assert versions["torch"] == torch.__version__
    assert versions["parallel_backend"] in ("OpenMP", "native thread pool", "TBB")


def test_huge_learning_rate_diverges(digits: dict[str, np.ndarray]) -> None:
    config = Config(framework="torch", optimizer="sgd", learning_rate=1e4, batch_size=32, epochs=3)
    with pytest.raises(TrialDiverged):
        _run(config, "lenet5", digits)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_missing_cuda_is_a_one_line_device_error() -> None:
    with pytest.raises(DeviceError) as info:
        TorchTrainer(Config(framework="torch", device="cuda")).configure()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("CUDA device 'cuda' requested but torch sees no GPU")


def test_predict_returns_int64_labels(digits: dict[str, np.ndarray]) -> None:
    trainer = TorchTrainer(Config(framework="torch"))
    trainer.configure()
    trainer.build(models.get_model("mlp"), (8, 8, 1), 10)
    pred = trainer.predict(digits["x_test"])
    assert pred.dtype == np.int64 and pred.shape == digits["y_test"].shape
    assert pred.min() >= 0 and pred.max() <= 9


SPEC = models.ModelSpec(
    "check",
    (models.Layer("conv", 3, 3, "relu"), models.Layer("maxpool"), models.Layer("conv", 4, 4, "relu"),
     models.Layer("avgpool"), models.Layer("flatten"), models.Layer("dense", 5, activation="relu"),
     models.Layer("dense", None)),
    "odd sizes, both poolings and an even kernel", True,
)


def _copy_numpy_weights(net: NumpyNet, module: Any, shape: tuple[int, int, int]) -> None:
    """Load the numpy engine's weights into the torch module (NHWC layouts to NCHW ones)."""
    torch_layers = [m for m in module if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    numpy_layers = [lay for lay in net.layers if lay.params]
    pre_flatten = next(s for lay, s, _ in models.layer_shapes(SPEC, shape, 3) if lay.kind == "flatten")
    first_dense = True
    with torch.no_grad():
        for t, n in zip(torch_layers, numpy_layers, strict=True):
            w = n.w
            if isinstance(t, torch.nn.Conv2d):
                k = t.kernel_size[0]
                w = w.reshape(k, k, t.in_channels, t.out_channels).transpose(3, 2, 0, 1)
            elif first_dense:  # numpy flattens (h, w, c); torch flattens (c, h, w)
                h, wd, c = pre_flatten
                w = w.reshape(h, wd, c, -1).transpose(3, 2, 0, 1).reshape(w.shape[1], -1)
                first_dense = False
            else:
                w = w.T
            t.weight.copy_(torch.from_numpy(np.ascontiguousarray(w)))
            t.bias.copy_(torch.from_numpy(n.b))


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel:UserWarning")
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_torch_and_numpy_engine_agree_on_the_same_weights(optimizer: str) -> None:
    shape = (9, 7, 2)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, *shape)).astype(np.float32)
    y = rng.integers(0, 3, 8)
    lr = 0.01 if optimizer == "adam" else 0.1
    config = Config(framework="torch", optimizer=optimizer, learning_rate=lr, batch_size=4,
                    momentum=0.9 if optimizer == "momentum" else 0.0, weight_decay=0.01)
    net = NumpyNet(SPEC, shape, 3, optimizer=optimizer, learning_rate=lr, momentum=config.momentum,
                   weight_decay=0.01, seed=0)
    trainer = TorchTrainer(config)
    trainer.configure()
    trainer.build(SPEC, shape, 3)
    _copy_numpy_weights(net, trainer.model_, shape)
    with torch.no_grad():
        logits = trainer.model_(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()).numpy()
    np.testing.assert_allclose(logits, net.forward(x), rtol=1e-4, atol=1e-5)
    # Two optimizer steps each (two batches of 4): same losses, same weights afterwards.
    loss_torch = trainer.train_epoch(x, y)
    loss_numpy = net.train_epoch(x, y, batch_size=4)
    assert math.isclose(loss_torch, loss_numpy, rel_tol=1e-4)
    with torch.no_grad():
        after = trainer.model_(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()).numpy()
    assert not np.allclose(after, logits, atol=1e-3)  # the steps really moved the weights
    np.testing.assert_allclose(after, net.forward(x), rtol=1e-3, atol=1e-4)


@CUDA
@pytest.mark.gpu
def test_cuda_mixed_precision_trains_and_reports_memory(digits: dict[str, np.ndarray]) -> None:
    config = Config(framework="torch", optimizer="adam", learning_rate=2e-3, batch_size=32, epochs=10,
                    device="cuda", mixed_precision=True, cudnn_benchmark=True)
    trainer = TorchTrainer(config)
    applied = trainer.configure()
    assert applied["device"] == "cuda:0" and applied["mixed_precision"] is True
    assert applied["cudnn_benchmark"] is True
    events: list[dict[str, Any]] = []
    result = run_protocol(trainer, models.get_model("lenet5"), num_classes=10, config=config,
                          emit=events.append, **digits)
    assert events[-1]["test_accuracy"] >= 0.90
    assert result.gpu_peak_memory_mb is not None and result.gpu_peak_memory_mb > 0
    trainer.close()


@CUDA
@pytest.mark.gpu
def test_cuda_index_out_of_range_is_a_device_error() -> None:
    with pytest.raises(DeviceError, match="requested but torch sees only"):
        TorchTrainer(Config(framework="torch", device=f"cuda:{torch.cuda.device_count()}")).configure()


# ------------------------------------------------------------------ recipe knobs (advisor.knobs)


@pytest.mark.parametrize("schedule,warmup", [("onecycle", 0.2), ("cosine", 0.0), ("step", 0.1), ("inv", 0.0),
                                             ("restarts", 0.0)])
def test_learning_rate_applied_per_step_follows_the_schedule(digits, schedule: str, warmup: float) -> None:
    from advisor.frameworks.base import learning_rate_at

    config = Config(framework="torch", optimizer="momentum", momentum=0.9, nesterov=True, learning_rate=0.5,
                    batch_size=8, epochs=3, schedule=schedule, warmup_fraction=warmup)
    trainer = TorchTrainer(config)
    trainer.configure()
    trainer.build(models.get_model("lenet5"), (8, 8, 1), 10)
    x, y = digits["x_train"][:40], digits["y_train"][:40]
    trainer.plan(5)  # 40 samples at batch 8: 5 steps an epoch, 15 in all
    seen = []
    for step in range(15):
        start = (step % 5) * 8
        trainer.train_epoch(x[start:start + 8], y[start:start + 8])  # one batch: one optimizer step
        seen.append(trainer.current_learning_rate())
    expected = [learning_rate_at(config, t, 15) for t in range(15)]
    assert seen == pytest.approx(expected, rel=1e-12)
    assert len(set(seen)) > 2  # the schedule really moved the rate
    if schedule == "onecycle":
        # warm-up over round(0.2 * 15) = 3 steps, then a linear fall from the peak
        assert seen[0] < seen[1] < seen[2] == seen[3] == 0.5 > seen[4] > seen[-1] > 0


def test_augmentation_changes_training_batches_but_never_the_test_set(digits) -> None:
    check_augmentation_changes_training_batches_but_never_the_test_set(TorchTrainer, "torch", digits)


def test_label_smoothing_adamw_and_nesterov_reach_the_torch_objects() -> None:
    config = Config(framework="torch", optimizer="adamw", weight_decay=0.05, label_smoothing=0.1)
    trainer = TorchTrainer(config)
    trainer.configure()
    trainer.build(models.get_model("mlp"), (8, 8, 1), 10)
    assert isinstance(trainer.optimizer_, torch.optim.AdamW)
    assert trainer.optimizer_.param_groups[0]["weight_decay"] == 0.05
    assert trainer.loss_fn_.label_smoothing == 0.1
    logits = torch.zeros(1, 10)
    # uniform logits: smoothing does not change the loss; a confident right answer costs more
    assert float(trainer.loss_fn_(logits, torch.tensor([3]))) == pytest.approx(math.log(10))
    sharp = torch.full((1, 10), -20.0)
    sharp[0, 3] = 20.0
    expected = -(0.9 + 0.1 / 10) * 0.0 - (0.1 / 10) * 9 * (-40.0)
    assert float(trainer.loss_fn_(sharp, torch.tensor([3]))) == pytest.approx(expected, rel=1e-4)
    nesterov = TorchTrainer(Config(framework="torch", optimizer="momentum", momentum=0.9, nesterov=True))
    nesterov.configure()
    nesterov.build(models.get_model("mlp"), (8, 8, 1), 10)
    assert nesterov.optimizer_.param_groups[0]["nesterov"] is True


def test_bfloat16_is_refused_in_one_line_without_cpu_support(monkeypatch) -> None:
    import advisor.hardware

    monkeypatch.setattr(advisor.hardware, "cpu_bf16_support", lambda: None)
    with pytest.raises(DeviceError) as info:
        TorchTrainer(Config(framework="torch", bfloat16=True)).configure()
    assert "avx512_bf16" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.slow
def test_compile_reports_its_time_apart_and_trains(digits) -> None:
    config = Config(framework="torch", batch_size=64, learning_rate=0.05, epochs=1, compile=True,
                    channels_last=True)
    trainer = TorchTrainer(config)
    trainer.configure()
    result = run_protocol(trainer, models.get_model("lenet5"), num_classes=10, config=config,
                          emit=lambda e: None, **digits)
    assert result.description["compile_time_s"] > 0
    assert result.description["memory_format"] == "channels_last"
