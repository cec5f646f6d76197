"""A prepared spread of GPU trials that fits in 10 minutes of one GPU, for a lent device machine.

Every framework with a CUDA path (torch, TensorFlow, ONNX Runtime) whose runtime is installed where
it runs, MNIST, Fashion-MNIST and CIFAR-10 (full MNIST, subsets of the others), the recipe nets
(bn_cnn, ResNet-9) beside LeNet-5 and the Caffe quick net, a precision sweep (float32, float16 and
bfloat16 mixed precision) and a batch-size sweep. Each trial's cost is predicted with the device
model (advisor/devices.py) plus a fixed start-up (process, imports, data, CUDA context); trials are
taken in plan order while the running total fits ``--budget``.

``--dry-run`` prints the plan with the predicted cost of each trial and the total, and runs
nothing (this is what CI checks, on a CPU). Without it, each trial runs through the harness on the
GPU; after every trial the results so far are written as a knowledge table with this machine's
hardware profile (``--out``, ready for ``advisor knowledge merge``) and as one JSON line per trial
(``--jsonl``, with the device model's prediction beside the measurement), so a run cut short
keeps what it measured. Training sizes are capped at what ``--data-dir`` holds.

Usage:
    benchmarks/gpu/collect.sh --dry-run [--gpu-model H200]
    benchmarks/gpu/collect.sh --data-dir ../shared/datasets --out gpu-trials.csv.gz
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import itertools
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from advisor import datasets, devices
from advisor.records import Config, Workload

STARTUP_S = {"torch": 12.0, "tensorflow": 20.0, "onnxruntime": 25.0}
#: Folders searched, in order, for each dataset under ``--data-dir``.
SUBDIRS = {"mnist": ("mnist",), "fashion-mnist": ("fashion-mnist",),
           "cifar10": ("cifar-10-batches-bin", "cifar-10-lossless-subset")}
#: The module whose presence means a framework can train here (ONNX Runtime needs its training API).
RUNTIME = {"torch": "torch", "tensorflow": "tensorflow", "onnxruntime": "onnxruntime.training"}
SIZES = {"mnist": None, "fashion-mnist": 20_000, "cifar10": 10_000}
EPOCHS = {"mnist": 3, "fashion-mnist": 3, "cifar10": 5}
PRECISIONS = {"fp32": {}, "fp16": {"mixed_precision": True}, "bf16": {"bfloat16": True}}


def _config(fw: str, batch: int, epochs: int, **knobs: object) -> Config:
    opt = "adam" if fw == "onnxruntime" else "momentum"
    return Config(framework=fw, device="cuda", batch_size=batch, learning_rate=0.002 if opt == "adam" else 0.05,
                  optimizer=opt, momentum=0.9 if opt == "momentum" else 0.0, epochs=epochs, schedule="onecycle",
                  threads=1, execution_mode="sequential" if fw == "onnxruntime" else None, **knobs)  # type: ignore[arg-type]


def _workload(dataset: str, model: str) -> Workload:
    return Workload(dataset=dataset, model=model, train_samples=SIZES[dataset], test_samples=2000, seed=0)


def plan() -> list[tuple[Workload, Config]]:
    """The spread, round-robin over frameworks and datasets so that a shorter budget covers all of
    them, then the batch-size sweep and the speed switches."""
    nets = {"mnist": ("lenet5", "bn_cnn_w16"), "fashion-mnist": ("bn_cnn_w16", "bn_cnn_w32"),
            "cifar10": ("cifar_quick", "resnet9_w16", "resnet9_w32")}
    by_key: dict[tuple[str, str], list[tuple[Workload, Config]]] = {}
    for fw, (dataset, names) in itertools.product(("torch", "tensorflow", "onnxruntime"), nets.items()):
        for model, (batch, precision) in itertools.product(names, ((128, "fp32"), (512, "fp32"), (512, "fp16"),
                                                                   (512, "bf16"))):
            if fw == "onnxruntime" and precision != "fp32":
                continue  # no mixed-precision path in its training API here
            if fw == "tensorflow" and precision == "fp16":
                continue  # the framework's mixed precision knob is bfloat16
            cfg = _config(fw, batch, EPOCHS[dataset], **PRECISIONS[precision])
            by_key.setdefault((fw, dataset), []).append((_workload(dataset, model), cfg))
    ordered = []
    while any(by_key.values()):
        for key in list(by_key):
            if by_key[key]:
                ordered.append(by_key[key].pop(0))
    # Launch overhead against batch size: one small net over a wide batch sweep.
    for batch in (32, 64, 256, 1024, 2048):
        ordered.append((_workload("mnist", "lenet5"), _config("torch", batch, 2)))
    # Speed switches on the residual net: channels-last with bfloat16, and torch.compile.
    ordered.append((_workload("cifar10", "resnet9_w16"), _config("torch", 512, 5, bfloat16=True, channels_last=True)))
    ordered.append((_workload("cifar10", "resnet9_w16"), _config("torch", 512, 5, bfloat16=True, compile=True)))
    return ordered


def holdout_plan() -> list[tuple[Workload, Config]]:
    """Configurations none of :func:`plan`'s trials used (other nets, optimizers, batch sizes and
    sizes), to check the device model's constants out of sample once they were fitted on that plan."""
    out = []
    for dataset, model, batch, opt in (("mnist", "mlp", 256, "adam"), ("mnist", "bn_cnn_w8", 96, "adam"),
                                       ("fashion-mnist", "lenet5", 384, "sgd"), ("cifar10", "resnet9_w8", 256, "adamw"),
                                       ("cifar10", "bn_cnn_w8", 64, "momentum"), ("fashion-mnist", "resnet9_w8", 192, "adam"),
                                       ("cifar10", "lenet5", 768, "sgd"), ("mnist", "resnet9_w16", 320, "momentum"),
                                       ("cifar10", "resnet9_w64", 512, "momentum"), ("fashion-mnist", "mlp", 1536, "adamw")):
        lr = 0.002 if opt in ("adam", "adamw") else 0.05
        cfg = Config(framework="torch", device="cuda", batch_size=batch, learning_rate=lr, optimizer=opt,
                     momentum=0.9 if opt == "momentum" else 0.0, epochs=3, schedule="onecycle", threads=1,
                     bfloat16=batch >= 512)
        out.append((_workload(dataset, model), cfg))
    return out


def predicted_cost(device: devices.Accelerator, w: Workload, c: Config) -> float:
    """Start-up plus the device model's expected step time over the trial's steps."""
    return STARTUP_S[c.framework] + _steps(w, c) * _step_s(device, w, c)


def _steps(w: Workload, c: Config, available: int | None = None) -> int:
    """Optimizer steps of the trial; ``available``: the training samples the data folder holds."""
    n = w.train_samples or available or datasets.get_info(w.dataset).train_size
    return math.ceil(n / c.batch_size) * c.epochs


def _step_s(device: devices.Accelerator, w: Workload, c: Config) -> float:
    info = datasets.get_info(w.dataset)
    return devices.estimate_model_step(device, c, w.model, tuple(info.input_shape), info.num_classes).expected_s


@functools.lru_cache(maxsize=None)
def _inspect(dataset: str, folder: str) -> datasets.SourceReport:
    """What a folder holds, read (and hashed) once per run, not once per trial."""
    return datasets.inspect_source(dataset, data_dir=folder)


def _fit_to_data(w: Workload, data_dir: Path) -> tuple[Workload, int] | None:
    """The workload on the first folder that holds the dataset, with its sizes capped at what the
    files hold, and the training samples the folder holds; ``None`` when no folder does."""
    for sub in SUBDIRS[w.dataset]:
        folder = data_dir / sub
        if not folder.is_dir():
            continue
        try:
            report = _inspect(w.dataset, str(folder))
        except Exception as exc:  # a malformed copy: say so and try the next folder
            print(f"skipping {folder}: {exc}", file=sys.stderr)
            continue
        train = None if w.train_samples is None and report.train_size else w.train_samples
        if train is not None and train >= report.train_size:
            train = None
        return replace(w, train_samples=train, test_samples=min(w.test_samples or report.test_size, report.test_size),
                       data_dir=str(folder)), report.train_size
    return None


def _runnable(frameworks: list[str]) -> list[str]:
    out = []
    for fw in frameworks:
        try:
            found = importlib.util.find_spec(RUNTIME[fw]) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            out.append(fw)
        else:
            print(f"{fw}: {RUNTIME[fw]} is not installed here, its trials are left out", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--gpu-model", default=None, help="device row (default: the detected GPU, else A100)")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds of GPU time for the whole spread")
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "datasets"))
    ap.add_argument("--frameworks", default="torch,tensorflow,onnxruntime")
    ap.add_argument("--out", default="gpu-trials.csv.gz")
    ap.add_argument("--deadline", type=float, default=None,
                    help="stop starting trials after this many real seconds (default: --budget)")
    ap.add_argument("--jsonl", default=None, help="also append each trial, measured beside predicted, as a JSON line")
    ap.add_argument("--json", action="store_true", help="print the plan as JSON")
    ap.add_argument("--holdout", action="store_true", help="run holdout_plan() instead: configurations the spread never used")
    ap.add_argument("--device", default="cuda", help="'cpu' rehearses the whole flow without a GPU (slowly)")
    args = ap.parse_args(argv)
    from advisor import hardware

    detected = hardware.identity().gpus
    device = devices.get_accelerator(args.gpu_model or (detected[0].name if detected else None))
    frameworks = args.frameworks.split(",")
    if not args.dry_run:
        frameworks = _runnable(frameworks)
    chosen, total = [], 0.0
    for w, c in (holdout_plan() if args.holdout else plan()):
        if c.framework not in frameworks:
            continue
        cost = predicted_cost(device, w, c)
        if total + cost > args.budget:
            continue
        chosen.append((w, c, cost))
        total += cost
    if args.json:
        print(json.dumps({"device": device.name, "budget_s": args.budget, "predicted_total_s": total,
                          "trials": [{"framework": c.framework, "dataset": w.dataset, "model": w.model,
                                      "train_samples": w.train_samples, "batch_size": c.batch_size,
                                      "mixed_precision": c.mixed_precision, "bfloat16": c.bfloat16,
                                      "predicted_s": cost} for w, c, cost in chosen]}, indent=1))
    else:
        print(f"{len(chosen)} trials on {device.name}, predicted {total:.0f} s of {args.budget:.0f} s:")
        for w, c, cost in chosen:
            precision = "fp16" if c.mixed_precision else "bf16" if c.bfloat16 else "fp32"
            extra = " channels_last" * c.channels_last + " compile" * c.compile
            print(f"  {c.framework:<11} {w.dataset:<13} {w.model:<12} n={w.train_samples} batch={c.batch_size:<4} "
                  f"{precision}{extra} {cost:6.1f} s")
    if args.dry_run:
        return 0
    if args.device == "cuda" and not detected:
        print("error: no GPU on this machine: run with --dry-run to see the plan", file=sys.stderr)
        return 1
    from advisor import knowledge
    from advisor.harness import Limits, run_trial

    profile = hardware.load_cached() or hardware.identity()
    results: list[Any] = []
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    for w, c, cost in chosen:
        left = (args.deadline or args.budget) - (time.monotonic() - started)
        if left < STARTUP_S[c.framework]:
            print(f"budget spent: {len(results)} of {len(chosen)} trials ran", flush=True)
            break
        found = _fit_to_data(w, Path(args.data_dir))
        if found is None:
            print(f"{w.dataset}: no copy under {args.data_dir}, skipped", flush=True)
            continue
        fitted, available = found
        if args.device != "cuda":
            c = replace(c, device=args.device, mixed_precision=False, bfloat16=False)
        r = run_trial(fitted, c, limits=Limits(wall_time_s=max(60.0, min(4 * cost, left))), study="gpu-collect")
        step = _step_s(device, fitted, c)
        steps = _steps(fitted, c, available)
        epoch_times = [e.epoch_time_s for e in r.epochs] if r.epochs else []
        line = {"framework": c.framework, "dataset": fitted.dataset, "model": fitted.model,
                "train_samples": fitted.train_samples, "batch_size": c.batch_size, "epochs": c.epochs,
                "precision": "fp16" if c.mixed_precision else "bf16" if c.bfloat16 else "fp32",
                "channels_last": c.channels_last, "compile": c.compile, "status": r.status,
                "error": r.error, "test_accuracy": r.test_accuracy, "train_time_s": r.train_time_s,
                "epoch_times_s": epoch_times, "steps": steps, "predicted_step_s": step,
                "predicted_train_s": steps * step, "device": device.name}
        print(json.dumps(line), flush=True)
        results.append(r)
        rows.append(knowledge.row_from_result(r, profile))
        if args.jsonl:
            with open(args.jsonl, "a") as fh:
                fh.write(json.dumps(line) + "\n")
        knowledge.write(rows, args.out)
        if len(results) == 3 and all(x.status == "failed" for x in results):
            print("error: the first three trials failed; stopping so the cause can be fixed", file=sys.stderr)
            return 1
    print(f"wrote {len(rows)} trials to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
