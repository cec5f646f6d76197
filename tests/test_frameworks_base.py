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


def test_restarts_anneal_in_cycles_that_double_and_the_last_ends_with_the_run() -> None:
    """30 epochs of 10 steps: four cycles (floor(log2 31)) of 2, 4, 8 and 16 epochs, each a cosine
    from the full rate to near 0, so an annealed accuracy comes after 2, 6, 14 and 30 epochs. Under a
    time budget the projected epochs (``epochs``) set the cycles."""
    config = Config(framework="torch", learning_rate=0.4, epochs=30, schedule="restarts")
    rates = [learning_rate_at(config, t, 300) for t in range(300)]
    jumps = [t for t in range(1, 300) if rates[t] > rates[t - 1]]
    assert jumps == [20, 60, 140]
    assert rates[0] == rates[20] == rates[60] == rates[140] == 0.4
    assert all(rates[t - 1] < 0.01 for t in jumps) and rates[-1] < 0.001
    cycle = rates[60:140]  # the third: one cosine over 80 steps
    assert cycle[40] == pytest.approx(0.2) and cycle == sorted(cycle, reverse=True)
    short = [learning_rate_at(config, t, 60, epochs=6) for t in range(60)]  # 6 epochs projected: 2 cycles
    assert [t for t in range(1, 60) if short[t] > short[t - 1]] == [20]
    one = [learning_rate_at(Config(framework="torch", learning_rate=0.4, epochs=1, schedule="restarts"), t, 10)
           for t in range(10)]
    assert one == _rates(10, schedule="cosine", epochs=1)  # one epoch: one cycle, plain cosine


def test_probes_anneal_twice_briefly_then_once_over_four_fifths_of_the_run() -> None:
    """150 steps: cycles of 10, 20 and 120 steps (1/15, 2/15, 12/15), each a cosine from the full
    rate to near 0; the warm-up comes first and the cycles share the steps after it."""
    config = Config(framework="torch", learning_rate=0.4, epochs=15, schedule="probes")
    rates = [learning_rate_at(config, t, 150) for t in range(150)]
    assert [t for t in range(1, 150) if rates[t] > rates[t - 1]] == [10, 30]
    assert rates[0] == rates[10] == rates[30] == 0.4
    assert rates[9] < 0.01 and rates[29] < 0.005 and rates[-1] < 0.001
    last = rates[30:]
    assert last[60] == pytest.approx(0.2) and last == sorted(last, reverse=True)
    warm = [learning_rate_at(Config(framework="torch", learning_rate=0.4, epochs=16, schedule="probes",
                                    warmup_fraction=0.0625), t, 160) for t in range(160)]
    assert [t for t in range(11, 160) if warm[t] > warm[t - 1]] == [20, 40]  # 10 warm-up steps, then 10 and 20


def test_warm_up_applies_to_every_schedule() -> None:
    for schedule in ("constant", "step", "cosine", "onecycle", "inv", "restarts", "probes"):
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


def test_budget_epochs_projects_from_the_slower_of_the_last_two() -> None:
    from advisor.frameworks.base import budget_epochs

    assert budget_epochs(60.0, [], 50) == 50  # nothing measured yet: the plan stands
    assert budget_epochs(60.0, [10.0], 50) == 6
    assert budget_epochs(60.0, [12.0, 8.0], 50) == 5  # 40 s left at 12 s an epoch: 3 more
    assert budget_epochs(60.0, [12.0, 6.0, 6.0], 50) == 9  # a slow first epoch is forgotten after two
    assert budget_epochs(60.0, [10.0], 4) == 4  # capped by the epochs asked for
    assert budget_epochs(60.0, [70.0], 50) == 1  # never fewer than the epochs already run


class _ClockTrainer:
    """A backend whose epochs take ``epoch_s`` on a fake clock, recording the rate of every step."""

    def __init__(self, config: Config, clock: list[float], epoch_s: list[float]) -> None:
        from advisor.frameworks.base import Trainer

        class _T(Trainer):
            def configure(self):  # type: ignore[no-untyped-def]
                return {}

            def versions(self):  # type: ignore[no-untyped-def]
                return {}

            def build(self, spec, input_shape, num_classes):  # type: ignore[no-untyped-def]
                self.step_, self.rates = 0, []
                return 0

            def train_epoch(self, x, y):  # type: ignore[no-untyped-def]
                for _ in range(0, len(x), self.config.batch_size):
                    self.rates.append(self.lr_at(self.step_))
                    self.step_ += 1
                clock[0] += epoch_s[min(len(epoch_s) - 1, self.step_ // -(-len(x) // self.config.batch_size) - 1)]
                return 0.1

            def predict(self, x):  # type: ignore[no-untyped-def]
                return np.zeros(len(x), dtype=np.int64)

        self.trainer = _T(config)


def _run_on_clock(monkeypatch: pytest.MonkeyPatch, config: Config, epoch_s: list[float]):  # type: ignore[no-untyped-def]
    import advisor.frameworks.base as base
    from advisor.models import get_model

    clock = [0.0]
    monkeypatch.setattr(base.time, "perf_counter", lambda: clock[0])
    trainer = _ClockTrainer(config, clock, epoch_s).trainer
    events: list[dict] = []
    x = np.zeros((100, 8, 8, 1), np.float32)
    y = np.zeros(100, np.int64)
    result = base.run_protocol(trainer, get_model("mlp"), x_train=x, y_train=y, x_test=x[:10], y_test=y[:10],
                               num_classes=10, config=config, emit=events.append)
    return result, events, trainer


def test_a_time_budget_stops_before_an_epoch_that_would_overrun_and_the_schedule_ends_with_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = Config(framework="torch", batch_size=10, learning_rate=0.4, epochs=50, schedule="onecycle",
                    warmup_fraction=0.1, time_budget_s=60.0)
    result, events, trainer = _run_on_clock(monkeypatch, config, [7.0])  # 8 epochs fit, not 9
    assert [e["epoch"] for e in events] == list(range(1, 9))
    assert result.train_time_s == pytest.approx(56.0) and result.train_time_s <= config.time_budget_s
    # Planned again after every epoch: the schedule spans the 8 epochs run, not the 50 asked for,
    # so its last step runs near zero; the first epoch warmed up as planned for 50 (10 of 50 warm-up
    # steps), and the re-plan to 80 steps (8 of warm-up) picks the decay up from there.
    assert trainer.total_steps_ == 80
    assert trainer.rates[-1] == pytest.approx(0.4 / (80 - 8), rel=1e-6)
    assert trainer.rates[9] == pytest.approx(0.4 * 10 / 50) and trainer.rates[10] == pytest.approx(0.4 * (1 - 2 / 72))


def test_without_a_budget_every_epoch_runs_and_the_first_epoch_always_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    result, events, _ = _run_on_clock(monkeypatch, Config(framework="torch", batch_size=10, epochs=5), [30.0])
    assert len(events) == 5 and result.train_time_s == pytest.approx(150.0)
    over = Config(framework="torch", batch_size=10, epochs=5, time_budget_s=20.0)
    result, events, _ = _run_on_clock(monkeypatch, over, [30.0])
    assert len(events) == 1 and result.train_time_s == pytest.approx(30.0)  # one epoch, even over the budget


def test_stop_at_accuracy_ends_the_run_after_the_first_epoch_reaching_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import advisor.frameworks.base as base

    readings = iter([0.5, 0.8, 0.91, 0.95, 0.97])
    monkeypatch.setattr(base, "_accuracy", lambda trainer, x, y: next(readings))
    config = Config(framework="torch", batch_size=10, learning_rate=0.4, epochs=5, schedule="onecycle",
                    warmup_fraction=0.1, stop_at_accuracy=0.9)
    result, events, trainer = _run_on_clock(monkeypatch, config, [7.0])
    assert [e["test_accuracy"] for e in events] == [0.5, 0.8, 0.91]  # stopped at the third, not before
    assert result.train_time_s == pytest.approx(21.0)
    assert trainer.total_steps_ == 50  # the schedule still spans the 5 epochs asked for
    readings = iter([0.5, 0.8, 0.85, 0.88, 0.89])
    monkeypatch.setattr(base, "_accuracy", lambda trainer, x, y: next(readings))
    _, events, _ = _run_on_clock(monkeypatch, config, [7.0])
    assert len(events) == 5  # never reached: every epoch runs
    from advisor.knobs import measure_argv

    argv = measure_argv(config, dataset="digits", model="mlp")
    assert argv[argv.index("--stop-at-accuracy") + 1] == "0.9"
    with pytest.raises(ValueError, match="stop_at_accuracy"):
        Config(framework="torch", stop_at_accuracy=1.5)


def test_time_budget_is_a_knob_with_a_flag_and_a_measure_command() -> None:
    from advisor.knobs import get_knob, measure_argv

    assert get_knob("time_budget_s").flag == "--time-budget" and not get_knob("time_budget_s").searchable
    argv = measure_argv(Config(framework="sklearn", epochs=30, time_budget_s=60.0), dataset="digits", model="mlp")
    assert argv[argv.index("--time-budget") + 1] == "60.0"
    with pytest.raises(ValueError, match="time_budget_s"):
        Config(framework="torch", time_budget_s=-1.0)
