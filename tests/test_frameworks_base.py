"""The shared protocol's learning-rate schedules and augmentation (advisor.frameworks.base)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.frameworks.base import augment, learning_rate_at
from advisor.records import Config


def _rates(total: int = 100, **knobs) -> list[float]:  # type: ignore[no-untyped-def]
    config = Config(framework="torch", learning_rate=0.4, **knobs)
    return [learning_rate_at(config, t, total) for t in range(total)]


def test_schedules_by_hand() -> None:
    assert _rates(schedule="constant") == [0.4] * 100
    step = _rates(schedule="step")
    assert step[49] == 0.4 and step[50] == pytest.approx(0.04) and step[75] == pytest.approx(0.004)
    cosine = _rates(schedule="cosine")
    assert cosine[0] == 0.4 and cosine[50] == pytest.approx(0.2) and cosine[99] < 0.001
    assert cosine[25] == pytest.approx(0.2 * (1 + math.cos(math.pi / 4)))
    inv = _rates(schedule="inv")
    assert inv[99] == pytest.approx(0.4 * (1 + 1e-4 * 99) ** -0.75)


def test_onecycle_warms_up_then_falls_linearly_to_near_zero() -> None:
    rates = _rates(schedule="onecycle", warmup_fraction=0.25)
    assert rates[:25] == pytest.approx([0.4 * (t + 1) / 25 for t in range(25)])
    assert rates[25] == 0.4
    falls = np.diff(rates[25:])
    assert np.allclose(falls, falls[0]) and falls[0] < 0
    assert rates[-1] == pytest.approx(0.4 / 75)


def test_warm_up_applies_to_every_schedule() -> None:
    for schedule in ("constant", "step", "cosine", "onecycle", "inv"):
        rates = _rates(schedule=schedule, warmup_fraction=0.1)
        assert rates[0] == pytest.approx(0.04) and rates[9] == pytest.approx(0.4), schedule


def test_translation_moves_images_within_the_padding() -> None:
    rng = np.random.default_rng(0)
    x = np.zeros((500, 12, 12, 1), np.float32)
    x[:, 6, 6, 0] = 1.0  # one bright pixel in the middle
    out = augment(x, Config(framework="torch", augment_translate=3), rng)
    assert out.shape == x.shape and x[:, 6, 6, 0].all()  # the input is left alone
    where = np.argwhere(out[..., 0] == 1.0)
    assert len(where) == 500  # every pixel stays inside a 3-pixel shift
    shifts = where[:, 1:] - 6
    assert np.abs(shifts).max() == 3 and len({tuple(s) for s in shifts}) == 49


def test_flip_mirrors_about_half_and_off_returns_the_input() -> None:
    rng = np.random.default_rng(1)
    x = np.random.default_rng(2).random((1000, 4, 4, 3)).astype(np.float32)
    assert augment(x, Config(framework="torch"), rng) is x
    out = augment(x, Config(framework="torch", augment_flip=True), rng)
    mirrored = np.all(out == x[:, :, ::-1], axis=(1, 2, 3))
    kept = np.all(out == x, axis=(1, 2, 3))
    assert np.all(mirrored | kept) and 400 < mirrored.sum() < 600
