"""A prepared spread of GPU trials that fits in 10 minutes of one GPU, for a lent device machine.

Every framework with a CUDA path (torch, TensorFlow, ONNX Runtime), MNIST, Fashion-MNIST and
CIFAR-10 subsets, the recipe nets (bn_cnn, ResNet-9) beside LeNet-5 and the Caffe quick net, a
precision sweep (float32 against mixed precision) and a batch-size sweep. Each trial's cost is
predicted with the device model (advisor/devices.py) plus a fixed start-up (process, imports, data,
CUDA context); trials are taken in plan order while the running total fits ``--budget``.

``--dry-run`` prints the plan with the predicted cost of each trial and the total, and runs
nothing (this is what CI checks, on a CPU). Without it, each trial runs through the harness on the
GPU and the results are written as a knowledge table with this machine's hardware profile
(``--out``), ready for ``advisor knowledge merge``.

Usage:
    benchmarks/gpu/collect.sh --dry-run [--gpu-model H200]
    benchmarks/gpu/collect.sh --data-dir ../shared/datasets --out gpu-trials.csv.gz
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

from advisor import datasets, devices
from advisor.records import Config, Workload

STARTUP_S = {"torch": 12.0, "tensorflow": 20.0, "onnxruntime": 25.0}
SUBDIRS = {"mnist": "mnist", "fashion-mnist": "fashion-mnist", "cifar10": "cifar-10-batches-bin"}


def plan() -> list[tuple[Workload, Config]]:
    out = []
    nets = {"mnist": ("lenet5", "bn_cnn_w16"), "fashion-mnist": ("bn_cnn_w16", "bn_cnn_w32"),
            "cifar10": ("cifar_quick", "resnet9_w16", "resnet9_w32")}
    sizes = {"mnist": 20_000, "fashion-mnist": 20_000, "cifar10": 10_000}
    for fw, (dataset, names) in itertools.product(("torch", "tensorflow", "onnxruntime"), nets.items()):
        for model, (batch, half) in itertools.product(names, ((128, False), (512, False), (512, True))):
            if fw == "onnxruntime" and half:
                continue  # no mixed-precision path in its training API here
            opt = "adam" if fw == "onnxruntime" else "momentum"
            cfg = Config(framework=fw, device="cuda", batch_size=batch, learning_rate=0.002 if opt == "adam" else 0.05,
                         optimizer=opt, momentum=0.9 if opt == "momentum" else 0.0, epochs=3, schedule="onecycle",
                         mixed_precision=half, threads=1,
                         execution_mode="sequential" if fw == "onnxruntime" else None)
            out.append((Workload(dataset=dataset, model=model, train_samples=sizes[dataset], test_samples=2000,
                                 seed=0), cfg))
    # Round-robin over frameworks and datasets, so a shorter budget still covers all of them.
    by_key: dict[tuple[str, str], list[tuple[Workload, Config]]] = {}
    for w, c in out:
        by_key.setdefault((c.framework, w.dataset), []).append((w, c))
    ordered = []
    while any(by_key.values()):
        for key in list(by_key):
            if by_key[key]:
                ordered.append(by_key[key].pop(0))
    return ordered


def predicted_cost(device: devices.Accelerator, w: Workload, c: Config) -> float:
    info = datasets.get_info(w.dataset)
    est = devices.estimate_model_step(device, c, w.model, tuple(info.input_shape), info.num_classes)
    steps = math.ceil((w.train_samples or info.train_size) / c.batch_size) * c.epochs
    return STARTUP_S[c.framework] + steps * est.expected_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--gpu-model", default=None, help="device row (default: the detected GPU, else A100)")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds of GPU time for the whole spread")
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[3] / "shared" / "datasets"))
    ap.add_argument("--out", default="gpu-trials.csv.gz")
    ap.add_argument("--json", action="store_true", help="print the plan as JSON")
    args = ap.parse_args(argv)
    from advisor import hardware

    detected = hardware.identity().gpus
    device = devices.get_accelerator(args.gpu_model or (detected[0].name if detected else None))
    chosen, total = [], 0.0
    for w, c in plan():
        cost = predicted_cost(device, w, c)
        if total + cost > args.budget:
            continue
        chosen.append((w, c, cost))
        total += cost
    if args.json:
        print(json.dumps({"device": device.name, "budget_s": args.budget, "predicted_total_s": total,
                          "trials": [{"framework": c.framework, "dataset": w.dataset, "model": w.model,
                                      "train_samples": w.train_samples, "batch_size": c.batch_size,
                                      "mixed_precision": c.mixed_precision, "predicted_s": cost}
                                     for w, c, cost in chosen]}, indent=1))
    else:
        print(f"{len(chosen)} trials on {device.name}, predicted {total:.0f} s of {args.budget:.0f} s:")
        for w, c, cost in chosen:
            print(f"  {c.framework:<11} {w.dataset:<13} {w.model:<12} n={w.train_samples} batch={c.batch_size:<4} "
                  f"{'mixed' if c.mixed_precision else 'fp32 '} {cost:6.1f} s")
    if args.dry_run:
        return 0
    if not detected:
        print("error: no GPU on this machine: run with --dry-run to see the plan", file=sys.stderr)
        return 1
    from advisor import knowledge
    from advisor.harness import Limits, run_trial

    results = []
    started = time.monotonic()
    for w, c, cost in chosen:
        if time.monotonic() - started > args.budget:
            break
        w = Workload(dataset=w.dataset, model=w.model, train_samples=w.train_samples, test_samples=w.test_samples,
                     seed=w.seed, data_dir=str(Path(args.data_dir) / SUBDIRS[w.dataset]))
        r = run_trial(w, c, limits=Limits(wall_time_s=max(120.0, 4 * cost)), study="gpu-collect")
        print(f"{c.framework} {w.dataset} {w.model} batch={c.batch_size} mixed={c.mixed_precision}: {r.status} "
              f"acc={r.test_accuracy} time={r.train_time_s} (predicted {cost:.1f} s with start-up)", flush=True)
        results.append(r)
    profile = hardware.load_cached() or hardware.identity()
    n = knowledge.write([knowledge.row_from_result(r, profile) for r in results], args.out)
    print(f"wrote {n} trials to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
