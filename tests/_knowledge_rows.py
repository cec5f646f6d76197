"""TEST DATA: constructed trial records with known, deterministic outcomes.

These are not measurements. Each record's time, accuracy and memory follow simple formulas of the
workload, config and hardware, so a test can tell whether the surrogate learnt them (a broken
model cannot reach a low error) and what ``recommend`` should prefer.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import numpy as np

from advisor import models, space
from advisor.records import Config, EpochRecord, HardwareProfile, TrialResult, Workload

CPU_PROFILE = HardwareProfile(
    profile_id="testcpu0000000001", cpu_model="Test CPU", physical_cores=2, logical_cores=2,
    affinity=(0, 1), memory_gb=8.0, gemm_gflops={"1": 40.0, "2": 76.0},
)

# name: (input shape, classes, full train size, test size, accuracy ceiling, model)
DATASETS = {
    "digits": ((8, 8, 1), 10, 1437, 360, 0.97, "mlp"),
    "mnist": ((28, 28, 1), 10, 60000, 10000, 0.99, "lenet5"),
    "fashion-mnist": ((28, 28, 1), 10, 60000, 10000, 0.90, "lenet5"),
    "cifar10": ((32, 32, 3), 10, 50000, 10000, 0.75, "cifar_quick"),
}
FRAMEWORK_SPEED = {"torch": 1.0, "tensorflow": 1.4, "onnxruntime": 0.8, "sklearn": 2.5}
FRAMEWORK_MEMORY = {"torch": 300.0, "tensorflow": 550.0, "onnxruntime": 250.0, "sklearn": 120.0}


# The constructed truths below know nothing of the training-recipe knobs: they stay at their defaults
# (and drawing none of them keeps the random stream, so the rows, as before they existed).
RECIPE_KNOBS = ("nesterov", "schedule", "warmup_fraction", "label_smoothing", "augment_translate",
                "augment_flip", "channels_last", "compile", "bfloat16")


def true_time(cfg: Config, flops_per_sample: float, train: int) -> float:
    gflops = CPU_PROFILE.gemm_gflops[str(min(cfg.threads, 2))]
    steps = math.ceil(train / cfg.batch_size) * cfg.epochs
    return FRAMEWORK_SPEED[cfg.framework] * (flops_per_sample * train * cfg.epochs / (gflops * 1e9 * 0.3)
                                             + steps * 2e-4)


def true_accuracy(cfg: Config, ceiling: float, train: int) -> float:
    lr_penalty = 0.06 * abs(math.log10(cfg.learning_rate) + (3.0 if cfg.optimizer == "adam" else 1.5))
    short = 0.25 / cfg.epochs + 200.0 / train
    return float(min(1.0, max(0.05, ceiling - lr_penalty - short)))


def true_memory(cfg: Config, params: int, shape: tuple[int, int, int]) -> float:
    return FRAMEWORK_MEMORY[cfg.framework] + params * 16 / 2**20 + cfg.batch_size * math.prod(shape) * 4 * 40 / 2**20


def make_result(cfg: Config, dataset: str, *, train: int | None = None, status: str = "ok",
                contended: bool = False, study: str = "test-study", number: int = 0,
                device_kind: str = "cpu", hardware_id: str = CPU_PROFILE.profile_id) -> TrialResult:
    shape, classes, full, test, ceiling, model = DATASETS[dataset]
    train = train or full
    spec = models.get_model(model)
    fps = models.training_flops_per_sample(spec, shape, classes)
    params = models.param_count(spec, shape, classes)
    ok = status in ("ok", "pruned")
    t = true_time(cfg, fps, train) if ok else None
    acc = true_accuracy(cfg, ceiling, train) if status == "ok" else None
    epochs = tuple(
        EpochRecord(epoch=e + 1, train_time_s=t * (e + 1) / cfg.epochs, epoch_time_s=t / cfg.epochs, loss=1.0 / (e + 1),
                    test_accuracy=acc, eval_time_s=0.01)
        for e in range(min(cfg.epochs, 3))
    ) if t is not None and acc is not None else ()
    return TrialResult(
        trial_id=uuid.uuid4().hex, status=status, workload=Workload(dataset=dataset, model=model, train_samples=train),
        config=cfg, started_at="2026-01-01T00:00:00+00:00", study=study, trial_number=number,
        advisor_version="0.1.0", framework_version="9.9", library_versions={"numpy": "2.0"},
        threadpools=({"internal_api": "openblas", "num_threads": cfg.threads},),
        threads_applied={"intra_op_threads": cfg.threads, "inter_op_threads": 1},
        cores_granted=tuple(range(cfg.threads)), hardware_id=hardware_id, device_kind=device_kind,
        dataset_name=dataset, dataset_fingerprint="f" * 64, dataset_variant="official",
        input_shape=shape, num_classes=classes, train_samples=train, test_samples=test,
        flops_per_sample=fps, params=params, train_time_s=t, epochs_completed=cfg.epochs if ok else 0,
        epochs=epochs, test_accuracy=acc, best_accuracy=acc,
        peak_memory_mb=true_memory(cfg, params, shape) if ok else None, contended=contended,
        error=None if ok else "constructed failure",
    )


def make_results(n: int, *, seed: int = 0, datasets: tuple[str, ...] = ("digits", "mnist", "cifar10"),
                 frameworks: tuple[str, ...] = ("torch", "tensorflow", "onnxruntime", "sklearn"),
                 sizes: tuple[float, ...] = (0.1, 0.3, 1.0)) -> list[TrialResult]:
    """``n`` constructed trials drawn from the real CPU search spaces (2 cores)."""
    rng = np.random.default_rng(seed)
    spaces = {fw: space.load_space(f"{fw}-cpu", cores=2) for fw in frameworks}
    out = []
    for i in range(n):
        fw = frameworks[i % len(frameworks)]
        ds = datasets[(i // len(frameworks)) % len(datasets)]
        sp = spaces[fw]
        cfg = sp.to_config(sp.sample(rng, exclude=RECIPE_KNOBS))
        full = DATASETS[ds][2]
        train = max(100, int(full * sizes[int(rng.integers(len(sizes)))]))
        status = "ok"
        if i % 37 == 5:
            status = "oom"
        out.append(make_result(cfg, ds, train=train, status=status, contended=(i % 29 == 3), number=i))
    return out


def rows(n: int, **kwargs: Any) -> list[dict[str, Any]]:
    from advisor.knowledge import row_from_result

    return [row_from_result(r, CPU_PROFILE) for r in make_results(n, **kwargs)]


def fitted_table(folder: Any, n: int, *, seed: int, rounds: int, portfolio: bool = False) -> tuple[Any, Any]:
    """Write ``n`` constructed rows to ``folder/knowledge.csv.gz``, fit a surrogate on them and save it
    to ``folder/model`` (with its recipe portfolio when asked). Returns ``(table, model folder)``."""
    from pathlib import Path

    from advisor import knowledge
    from advisor import surrogate as sg

    folder = Path(folder)
    table = folder / "knowledge.csv.gz"
    knowledge.write(rows(n, seed=seed), table)
    model = sg.fit_file(table, num_boost_round=rounds)
    sg.save(model, folder / "model", table_path=table)
    if portfolio:
        from advisor._recommend._portfolio import build_portfolio, save_portfolio

        save_portfolio(folder / "model", {"cpu": build_portfolio(knowledge.read(table), model)},
                       table_sha256=model.meta["table_sha256"])
    return table, folder / "model"
