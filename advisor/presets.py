"""The seed study's stock settings, as presets that build :class:`~advisor.records.Config` objects.

The measurement study (``reference/gtdlbench.md``) ran each framework with its own stock
hyper-parameters. They are kept here, per (seed framework, dataset), so that ``recommend`` can
offer them as candidates and the study scripts can measure them on today's frameworks:

========================  =========  ======  =====  ======  ======  ==========================
preset                    optimizer  lr      batch  epochs  wd      as given
========================  =========  ======  =====  ======  ======  ==========================
tensorflow-mnist          adam       1e-4    50     17      0       20,000 iterations = 16.7
caffe-mnist               momentum   0.01    64     11      5e-4    momentum 0.9, "inv" decay
torch-mnist               sgd        0.05    10     20      0
theano-mnist              sgd        0.1     500    200     0       <= 200 with early stop
tensorflow-cifar10        sgd        0.1     128    2560    0       exponential decay
caffe-cifar10             momentum   0.001   100    10      0.004   momentum 0.9; lr 1e-4 late
torch-cifar10             sgd        0.001   1      45      0
theano-cifar10            momentum   0.01    50     50      0       momentum 0.9
========================  =========  ======  =====  ======  ======  ==========================

Fractional epochs are rounded up. Learning-rate schedules are not modelled (the advisor's
protocol has none), so the starting rate is used. Each seed framework maps to its lineage in the
advisor (TensorFlow -> ``tensorflow``, Torch -> ``torch``, Caffe -> ``onnxruntime``, Theano ->
``sklearn``), but a preset can build a config for any framework whose optimizers allow it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.errors import UnknownNameError, invalid_parameter
from advisor.knobs import FRAMEWORK_INFO, FRAMEWORKS
from advisor.records import Config

__all__ = ["Preset", "PRESETS", "LINEAGE", "get_preset", "presets_for"]

#: Seed-study framework -> the advisor framework of the same lineage (DESIGN.md).
LINEAGE = {"tensorflow": "tensorflow", "torch": "torch", "caffe": "onnxruntime", "theano": "sklearn"}


@dataclass(frozen=True)
class Preset:
    """One framework's stock settings on one dataset.

    Attributes:
        name: ``<seed framework>-<dataset>``, e.g. ``caffe-mnist``.
        seed_framework: ``tensorflow``, ``caffe``, ``torch`` or ``theano``.
        dataset: ``mnist`` or ``cifar10``.
        optimizer: ``sgd``, ``momentum`` or ``adam``.
        learning_rate: The starting learning rate.
        batch_size: Mini-batch size.
        epochs_given: Epochs as the study ran them (iterations x batch / train size).
        momentum: Momentum (for ``optimizer="momentum"``).
        weight_decay: L2 weight decay.
        schedule: The learning-rate policy (:data:`advisor.knobs.SCHEDULES`), where the stock
            one is expressible (Caffe's LeNet solver uses ``inv``).
        note: What the preset leaves out (schedules, early stopping).
    """

    name: str
    seed_framework: str
    dataset: str
    optimizer: str
    learning_rate: float
    batch_size: int
    epochs_given: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    schedule: str = "constant"
    note: str = ""

    @property
    def framework(self) -> str:
        """The advisor framework of this preset's lineage."""
        return LINEAGE[self.seed_framework]

    def epochs(self, *, scale_epochs: float = 1.0) -> int:
        """Epochs to run: ``epochs_given x scale_epochs``, rounded up, at least 1.

        ``scale_epochs`` shortens very long stock schedules (TensorFlow's 2,560 CIFAR-10 epochs)
        for measurement studies; the time then scales about linearly, the accuracy does not.
        """
        if not (isinstance(scale_epochs, (int, float)) and 0 < scale_epochs <= 1000):
            raise invalid_parameter("scale_epochs", f"preset {self.name!r}", "a number in (0, 1000]", scale_epochs)
        # round() first so that 16.7 x 1.0 does not become 17.000000001 -> 18
        return max(1, math.ceil(round(self.epochs_given * scale_epochs, 6)))

    def params(self, *, scale_epochs: float = 1.0) -> dict[str, Any]:
        """The hyper-parameters as :class:`Config` fields."""
        return {
            "optimizer": self.optimizer,
            "learning_rate": self.learning_rate,
            "batch_size": self.batch_size,
            "epochs": self.epochs(scale_epochs=scale_epochs),
            "momentum": self.momentum,
            "weight_decay": self.weight_decay,
            "schedule": self.schedule,
        }

    def to_config(self, *, framework: str | None = None, scale_epochs: float = 1.0,
                  **overrides: Any) -> Config:
        """Build a config from this preset.

        Args:
            framework: The advisor framework to run it on (default: the lineage framework).
            scale_epochs: Multiplies the stock epochs (see :meth:`epochs`).
            **overrides: Other :class:`Config` fields (``threads``, ``device``, ``seed``...).

        Raises:
            InvalidParameterError: When the framework cannot run the preset's optimizer
                (ONNX Runtime has no momentum SGD).
        """
        fw = framework or self.framework
        return Config(framework=fw, **{**self.params(scale_epochs=scale_epochs), **overrides})

    def supports(self, framework: str) -> bool:
        """Whether ``framework`` can run this preset's optimizer."""
        info = FRAMEWORK_INFO[framework]
        return self.optimizer in info.optimizers and (
            self.weight_decay == 0 or self.optimizer in info.decay_optimizers)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("tensorflow-mnist", "tensorflow", "mnist", "adam", 1e-4, 50, 20_000 * 50 / 60_000,
               note="20,000 iterations"),
        Preset("caffe-mnist", "caffe", "mnist", "momentum", 0.01, 64, 10_000 * 64 / 60_000,
               momentum=0.9, weight_decay=5e-4, schedule="inv",
               note="Caffe's lenet_solver: 'inv' policy, gamma 1e-4, power 0.75"),
        Preset("torch-mnist", "torch", "mnist", "sgd", 0.05, 10, 20),
        Preset("theano-mnist", "theano", "mnist", "sgd", 0.1, 500, 200,
               note="up to 200 epochs with early stopping; run in full here"),
        Preset("tensorflow-cifar10", "tensorflow", "cifar10", "sgd", 0.1, 128, 2_560,
               note="exponential learning-rate decay not modelled"),
        Preset("caffe-cifar10", "caffe", "cifar10", "momentum", 0.001, 100, 10,
               momentum=0.9, weight_decay=0.004,
               note="lr drops to 1e-4 for the last fifth of the run: not expressible (the 'step' "
                    "policy drops at 50% and 75%)"),
        Preset("torch-cifar10", "torch", "cifar10", "sgd", 0.001, 1, 45),
        Preset("theano-cifar10", "theano", "cifar10", "momentum", 0.01, 50, 50, momentum=0.9),
    )
}


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (``<seed framework>-<dataset>``).

    Raises:
        UnknownNameError: When there is no such preset.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownNameError(f"Unknown preset {name!r}: choose one of {', '.join(PRESETS)}.") from None


def presets_for(dataset: str | None = None, *, framework: str | None = None) -> list[Preset]:
    """Presets for a dataset (all when ``None``) that ``framework`` (any when ``None``) can run."""
    if framework is not None and framework not in FRAMEWORKS:
        raise invalid_parameter("framework", "presets_for", f"one of {FRAMEWORKS}", framework)
    return [p for p in PRESETS.values()
            if (dataset is None or p.dataset == dataset) and (framework is None or p.supports(framework))]
