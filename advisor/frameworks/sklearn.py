"""The scikit-learn backend: the numpy-on-BLAS lineage of the study (where Theano stood).

Dense-only specs train with ``sklearn.neural_network.MLPClassifier``; convolutional specs, which
``MLPClassifier`` cannot express, train with the hand-written numpy engine in
:mod:`advisor.frameworks._numpy_cnn`. Both spend their time in numpy's BLAS, whose thread count
is limited through threadpoolctl for the trainer's whole life. Neither has batch norm, residual
blocks or global pooling: specs with them are refused, in one line, when built.

The learning-rate schedule is applied per mini-batch. ``MLPClassifier`` then gets one
``partial_fit`` per mini-batch, its optimizer's rate set before each; a constant rate keeps the
faster single ``partial_fit`` per epoch.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from advisor.errors import DeviceError
from advisor.frameworks._numpy_cnn import ENGINE as NUMPY_ENGINE
from advisor.frameworks._numpy_cnn import NumpyNet, check_supported
from advisor.frameworks.base import Trainer
from advisor.models import ModelSpec
from advisor.records import Config

__all__ = ["SklearnTrainer"]

MLP_ENGINE = "sklearn-mlpclassifier"


def _mlp_hidden_units(spec: ModelSpec, num_classes: int) -> tuple[int, ...] | None:
    """Hidden layer sizes when ``MLPClassifier`` builds exactly this spec, else ``None``.

    That is: flatten, then ReLU dense layers, then a linear classifier with one unit per class.
    With two classes ``MLPClassifier`` would use a single logistic output, a different model.
    """
    layers = spec.resolved_layers(num_classes)
    if num_classes < 3 or spec.is_convolutional or not layers or layers[0].kind != "flatten":
        return None
    dense = layers[1:]
    if not dense or any(l.kind != "dense" for l in dense):
        return None
    if any(l.activation != "relu" for l in dense[:-1]) or dense[-1].activation is not None:
        return None
    return tuple(int(l.units or 0) for l in dense[:-1])


class SklearnTrainer(Trainer):
    """scikit-learn ``MLPClassifier`` for dense specs, the numpy im2col engine for the others.

    :meth:`describe` says which engine a built spec runs on.
    """

    name = "sklearn"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.step_ = 0  # global optimizer step: the schedule's clock

    def configure(self) -> dict[str, Any]:
        c = self.config
        if c.is_cuda:
            raise DeviceError(
                f"CUDA device {c.device!r} requested but sklearn sees no GPU: scikit-learn has no "
                "CUDA path; use device 'cpu'."
            )
        from threadpoolctl import threadpool_info, threadpool_limits

        # Kept until close(): every BLAS and OpenMP pool in the process is held to config.threads.
        self._limits = threadpool_limits(limits=c.threads)
        info = threadpool_info()
        blas = [p for p in info if p.get("user_api") == "blas"]
        openmp = [p for p in info if p.get("user_api") == "openmp"]
        blas_threads = max((int(p["num_threads"]) for p in blas), default=1)
        out: dict[str, Any] = {
            "intra_op_threads": blas_threads,
            "inter_op_threads": 1,  # numpy runs one operation at a time
            "blas": sorted({str(p.get("internal_api")) for p in blas}),
            "blas_threads": blas_threads,
        }
        if openmp:
            out["openmp_threads"] = max(int(p["num_threads"]) for p in openmp)
        return out

    def versions(self) -> dict[str, str]:
        import sklearn
        import threadpoolctl

        out = {"scikit-learn": sklearn.__version__, "numpy": np.__version__,
               "threadpoolctl": threadpoolctl.__version__}
        found: dict[str, list[str]] = {}
        for pool in threadpoolctl.threadpool_info():
            if pool.get("user_api") == "blas":  # numpy and scipy may each load their own copy
                found.setdefault(str(pool.get("internal_api")), []).append(str(pool.get("version")))
        out.update({api: ", ".join(sorted(set(vs))) for api, vs in found.items()})
        return out

    def build(self, spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> int:
        c = self.config
        check_supported(spec)  # neither engine has batch norm, residual blocks or global pooling
        self.classes_ = np.arange(num_classes)
        hidden = _mlp_hidden_units(spec, num_classes)
        self.engine_ = MLP_ENGINE if hidden is not None else NUMPY_ENGINE
        if hidden is None:
            self.net_: NumpyNet | None = NumpyNet(
                spec, input_shape, num_classes, optimizer=c.optimizer, learning_rate=c.learning_rate,
                momentum=c.momentum, nesterov=c.nesterov, weight_decay=c.weight_decay, seed=c.seed,
                schedule=self.lr_at,
            )
            self.mlp_: Any = None
            return self.net_.param_count
        from sklearn.neural_network import MLPClassifier

        self.net_ = None
        self.mlp_ = MLPClassifier(
            hidden_layer_sizes=hidden,
            activation="relu",
            solver="adam" if c.optimizer == "adam" else "sgd",
            # sklearn adds alpha * W / batch to each step's gradient (and 0.5 * alpha * |W|^2 / batch
            # to the loss), while PyTorch's weight_decay adds wd * W. alpha = wd * batch_size makes
            # the per-step decay the same. sklearn leaves the intercepts undecayed.
            alpha=c.weight_decay * c.batch_size,
            batch_size=c.batch_size,
            learning_rate="constant",
            learning_rate_init=c.learning_rate,
            momentum=c.momentum if c.optimizer == "momentum" else 0.0,
            nesterovs_momentum=c.nesterov,
            shuffle=False,  # the protocol shuffles
            random_state=c.seed,
            max_iter=1,
        )
        # sklearn creates its weights on the first partial_fit: count them from the layout it
        # will use (input, hidden..., one output per class), which equals the spec's count.
        sizes = [int(np.prod(input_shape)), *hidden, num_classes]
        return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))

    def describe(self) -> dict[str, Any]:
        """What :meth:`build` chose: the engine (``sklearn-mlpclassifier`` or ``numpy-im2col``)."""
        return {"engine": getattr(self, "engine_", None)}

    def param_count_fitted(self) -> int:
        """Parameters as the fitted model holds them (after the first epoch)."""
        if self.net_ is not None:
            return self.net_.param_count
        return sum(int(a.size) for a in (*self.mlp_.coefs_, *self.mlp_.intercepts_))

    def train_epoch(self, x: np.ndarray, y: np.ndarray) -> float:
        x = np.asarray(x, dtype=np.float32)
        y = np.asarray(y, dtype=np.int64)
        if self.net_ is not None:
            return self.net_.train_epoch(x, y, batch_size=self.config.batch_size)
        flat = x.reshape(len(x), -1)
        bs = self.config.batch_size
        starts = range(0, len(flat), bs)
        with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            # ConvergenceWarning (max_iter=1 by design) and batch-size clipping are expected here.
            warnings.simplefilter("ignore")
            try:
                if self.config.schedule == "constant" and self.config.warmup_fraction == 0:
                    self.step_ += len(starts)
                    self.mlp_.partial_fit(flat, y, classes=self.classes_)
                    loss = float(self.mlp_.loss_)
                else:
                    total = 0.0
                    for start in starts:
                        xb, yb = flat[start:start + bs], y[start:start + bs]
                        self._set_mlp_rate(self.lr_at(self.step_))
                        self.step_ += 1
                        # A batch shorter than batch_size is its own batch: sklearn clips the size.
                        self.mlp_.partial_fit(xb, yb, classes=self.classes_)
                        total += float(self.mlp_.loss_) * len(xb)
                    loss = total / max(len(flat), 1)
            except ValueError as exc:
                if "non-finite" in str(exc):  # sklearn's own check after a diverged update
                    return float("nan")
                raise
        weights = (*self.mlp_.coefs_, *self.mlp_.intercepts_)
        if not np.isfinite(loss) or not all(np.isfinite(w).all() for w in weights):
            return float("nan")
        return loss

    def _set_mlp_rate(self, rate: float) -> None:
        """Give ``MLPClassifier``'s optimizer the rate of its next update."""
        opt = getattr(self.mlp_, "_optimizer", None)
        if opt is None:  # the first partial_fit builds the optimizer from learning_rate_init
            self.mlp_.set_params(learning_rate_init=rate)
        elif self.mlp_.solver == "adam":
            opt.learning_rate_init = rate  # Adam derives each update's bias-corrected step from it
        else:
            # sklearn keeps lr inside its velocity (v = m * v - lr * g), torch outside it
            # (p -= lr * buf): rescaling v when the rate moves makes the two the same algorithm.
            if self.mlp_.momentum > 0 and rate != opt.learning_rate and opt.learning_rate > 0:
                opt.velocities = [v * (rate / opt.learning_rate) for v in opt.velocities]
            opt.learning_rate = rate

    def current_learning_rate(self) -> float | None:
        if self.net_ is not None:
            return self.net_.learning_rate
        opt = getattr(self.mlp_, "_optimizer", None)
        if opt is None:
            return float(self.mlp_.learning_rate_init)
        return float(opt.learning_rate_init if self.mlp_.solver == "adam" else opt.learning_rate)

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        if self.net_ is not None:
            return self.net_.predict(x)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(self.mlp_.predict(x.reshape(len(x), -1)), dtype=np.int64)

    def close(self) -> None:
        limits = getattr(self, "_limits", None)
        if limits is not None:
            limits.restore_original_limits()
            self._limits = None
        self.net_ = None
        self.mlp_ = None
