"""Checks every backend must pass, written once and called from each tests/test_frameworks_*.py."""

from __future__ import annotations

from typing import Any

import numpy as np

from advisor.frameworks.base import Trainer, run_protocol
from advisor.models import get_model
from advisor.records import Config


def check_augmentation_changes_training_batches_but_never_the_test_set(
        trainer_class: type[Trainer], framework: str, digits: dict[str, np.ndarray], *, model: str = "lenet5") -> None:
    """Augmented epochs see the protocol's shuffled images moved or mirrored (labels untouched),
    while every prediction sees exactly the test set."""
    seen: dict[str, list[np.ndarray]] = {"x": [], "y": [], "test": []}

    class Recording(trainer_class):  # type: ignore[valid-type,misc]
        def train_epoch(self, x: np.ndarray, y: np.ndarray) -> float:
            seen["x"].append(np.array(x))
            seen["y"].append(np.array(y))
            return float(super().train_epoch(x, y))

        def predict(self, x: np.ndarray) -> Any:
            seen["test"].append(np.array(x))
            return super().predict(x)

    config = Config(framework=framework, batch_size=64, learning_rate=0.05, epochs=2, augment_translate=2,
                    augment_flip=True, seed=4)
    trainer = Recording(config)
    trainer.configure()
    try:
        run_protocol(trainer, get_model(model), num_classes=10, config=config, emit=lambda e: None, **digits)
    finally:
        trainer.close()
    rng = np.random.default_rng(config.seed)  # the protocol's shuffling stream
    for x, y in zip(seen["x"], seen["y"]):
        order = rng.permutation(len(digits["x_train"]))
        np.testing.assert_array_equal(y, digits["y_train"][order])
        raw = digits["x_train"][order]
        assert x.shape == raw.shape
        assert np.mean(np.any(x != raw, axis=(1, 2, 3))) > 0.8  # most images moved or were mirrored
    assert len(seen["x"]) == 2 and len(seen["test"]) == 3  # two evaluations and the timed predict
    assert all(np.array_equal(t, digits["x_test"]) for t in seen["test"])
