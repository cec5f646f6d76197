"""Measurement-core benchmarks (issues 2 and 3), each written to benchmarks/results/.

Parts (run one or several; raw TrialResults are appended to benchmarks/results/raw/*.jsonl, and
the report is regenerated from the raw file, so a part can be resumed or re-rendered):

  mnist       LeNet-5 on full MNIST (60k/10k) on torch, tensorflow and onnxruntime -> mnist-full.md
  threads     torch, --threads 1 vs 2, 3 repeats each: LeNet-5 on MNIST 10k (or --threads-model
              cifar_quick: the CIFAR-10 quick net on CIFAR-10 5k) -> threads.md
  noise       one config repeated 5 times: median, CV of train time, sampler CPU cost -> noise.md
  frameworks  one LeNet-5 / MNIST 10k config on all four frameworks at 1 and 2 threads, oneDNN
              on/off where the framework has the switch, 3 repeats -> frameworks-cpu.md (+ .png)

Usage:
    python benchmarks/bench_measure.py frameworks [--repeats 3] [--render-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, SHARED, append_jsonl, cv, git_rev, machine_line, md_table, median, read_jsonl  # noqa: E402

from advisor.harness import Limits, run_trial  # noqa: E402
from advisor.records import Config, TrialResult, Workload  # noqa: E402

RAW = RESULTS / "raw"
MNIST = str(SHARED / "mnist")
CIFAR = str(SHARED / "cifar-10-batches-bin")


def _run(tag: str, workload: Workload, config: Config, *, cores: list[int], limit: float = 1800) -> TrialResult:
    result = run_trial(workload, config, limits=Limits(wall_time_s=limit, memory_mb=16000), cores=cores,
                       workdir="/tmp/advisor-bench")
    append_jsonl(RAW / f"{tag}.jsonl", {"tag": tag, "git": git_rev(), "result": result.to_dict()})
    print(f"[{tag}] {config.framework} threads={config.threads} onednn={config.onednn} -> {result.status} "
          f"acc={result.test_accuracy} train={result.train_time_s} peak={result.peak_memory_mb} "
          f"cpu={result.cpu_utilization} contended={result.contended} err={result.error}", file=sys.stderr)
    return result


def _load(tag: str) -> list[TrialResult]:
    return [TrialResult.from_dict(r["result"]) for r in read_jsonl(RAW / f"{tag}.jsonl")]


def _write(name: str, text: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(text)
    print(f"wrote {RESULTS / name}", file=sys.stderr)


# --- full MNIST -------------------------------------------------------------------------------

MNIST_CONFIGS = {
    "torch": Config(framework="torch", optimizer="momentum", momentum=0.9, learning_rate=0.01,
                    weight_decay=5e-4, batch_size=64, epochs=10, threads=2, inter_op_threads=1, seed=3),
    # The acceptance config: Adam at a constant 1e-3 with batch 128 ends above 0.990; repeated
    # over seeds 0, 1, 2 on one core (``--mnist-seeds``), since the final epoch varies by ~0.2 points.
    "torch-adam": Config(framework="torch", optimizer="adam", learning_rate=1e-3, batch_size=128, epochs=12,
                         threads=1, inter_op_threads=1, seed=0),
    "tensorflow": Config(framework="tensorflow", optimizer="adam", learning_rate=1e-3, batch_size=64,
                         epochs=5, threads=2, inter_op_threads=1, seed=1),
    "onnxruntime": Config(framework="onnxruntime", optimizer="adam", learning_rate=1e-3, batch_size=64,
                          epochs=5, threads=2, inter_op_threads=1, seed=1),
}


def part_mnist(args: argparse.Namespace) -> None:
    if not args.render_only:
        cores = [int(c) for c in args.cores.split(",")] if args.cores else [0, 1]
        for name, config in MNIST_CONFIGS.items():
            if config.framework not in args.frameworks or (args.mnist_only and name not in args.mnist_only.split(",")):
                continue
            seeds = [int(x) for x in args.mnist_seeds.split(",")] if name == "torch-adam" else [config.seed]
            for seed in seeds:
                _run("mnist-full", Workload(dataset="mnist", model="lenet5", data_dir=MNIST),
                     dataclasses.replace(config, seed=seed), cores=cores[: config.threads])
    rows = []
    for r in _load("mnist-full"):
        c = r.config
        rows.append((r.config.framework, f"{c.optimizer} lr={c.learning_rate} batch={c.batch_size}",
                     c.epochs, c.threads, c.seed, r.status, r.test_accuracy, r.best_accuracy, r.train_time_s,
                     r.time_to_accuracy.get("0.99"), r.peak_memory_mb, r.cpu_utilization, r.contended))
    ref = MNIST_CONFIGS["torch-adam"]
    adam = [r for r in _load("mnist-full") if dataclasses.replace(r.config, seed=ref.seed) == ref]
    torch_adam = ", ".join(f"seed {r.config.seed}: {r.test_accuracy:.4f}" for r in adam) or "not yet measured"
    adam_time = f"{median([r.train_time_s for r in adam]):.1f} s" if adam else "n/a"
    adam_mem = f"{median([r.peak_memory_mb for r in adam]):.0f} MiB" if adam else "n/a"
    text = f"""# LeNet-5 on full MNIST (60,000 train / 10,000 test)

Machine: {machine_line()}

Data: `{MNIST}` (the canonical IDX files). Each row is one trial in a fresh child process.
Train time excludes interpreter start, framework import, data loading and the per-epoch test
evaluation. Peak memory is the RSS of the trial's process tree, sampled at 20 Hz.

Commands: `python benchmarks/bench_measure.py mnist` (every config below), and for the acceptance
config alone `python benchmarks/bench_measure.py mnist --frameworks torch --mnist-only torch-adam --cores 1`
(equivalently, one seed: `advisor measure --framework torch --dataset mnist --data-dir {MNIST} --model lenet5 --optimizer adam --lr 0.001 --batch-size 128 --epochs 12 --seed 0 --threads 1 --json`).

{md_table(["framework", "config", "epochs", "threads", "seed", "status", "final acc", "best acc", "train s", "s to 0.99", "peak MiB", "busy cores", "contended"], rows)}

TensorFlow and ONNX Runtime pass 0.985 at their final epoch. Torch with Adam (lr 1e-3, batch 128,
12 epochs, one thread) ends at or above 0.990 on each of three seeds ({torch_adam}); its train
time is {adam_time} (median of the three) and its peak memory {adam_mem}. The margin is small: with
a constant learning rate this LeNet-5 ends an epoch anywhere between about 0.987 and 0.991 (see the
momentum rows, which pass 0.990 during training but not at their last epoch). A decaying
learning-rate schedule is the known fix; `Config` has none yet.
Benchmarks ran at `nice -15` with `kernel.sched_autogroup_enabled=0`, because other work shared
the machine; "contended" marks the trials during which other processes still used the granted cores.
"""
    _write("mnist-full.md", text)


# --- threads ----------------------------------------------------------------------------------

def _mnist10k(model: str = "lenet5") -> Workload:
    return Workload(dataset="mnist", model=model, train_samples=10_000, test_samples=2_000, data_dir=MNIST, seed=0)


def _cifar5k() -> Workload:
    return Workload(dataset="cifar10", model="cifar_quick", train_samples=5_000, test_samples=2_000,
                    data_dir=CIFAR, seed=0)


THREADS_WORKLOADS = {"lenet5": _mnist10k, "cifar_quick": _cifar5k}


def _span(values: list[float], fmt: str = "{:.2f}") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"


def _threads_summary(by: dict[tuple[str, int, int], list[TrialResult]], speedups: dict[tuple[str, int], float]) -> str:
    """The figures the text states, computed from the runs (median per setting, span over batches)."""
    lines = []
    for model in sorted({k[0] for k in by}, key=lambda m: m != "lenet5"):
        busy = {t: [median(r.cpu_utilization for r in rs) for k, rs in by.items() if k[0] == model and k[2] == t]
                for t in (1, 2)}
        cvs = {t: [cv([r.train_time_s for r in rs]) * 100 for k, rs in by.items() if k[0] == model and k[2] == t]
               for t in (1, 2)}
        speed = [x for (m, _), x in speedups.items() if m == model]
        if busy[1] and busy[2] and speed:
            lines.append(f"- {model}: busy cores {_span(busy[1])} at 1 thread, {_span(busy[2])} at 2 threads; "
                         f"speed-up {_span(speed)}x; CV of train time {_span(cvs[1], '{:.0f}')}% at 1 thread, "
                         f"{_span(cvs[2], '{:.0f}')}% at 2.")
    return "\n".join(lines) + """

Two threads fill both cores only when each step has enough parallel work. The CIFAR-10 quick net's
convolutions (32-64 channels on 32x32 images) have it; LeNet-5's (6 and 16 channels on 28x28) do
not, so the single-threaded share of a step (the Python loop, batch slicing, optimizer bookkeeping
and kernels below PyTorch's parallel grain) is large and the second core idles through it. The
child does run 2 intra-op threads either way (the "threads in child" column). Two threads on a
2-core machine also share both cores with every stray process, hence their larger CV."""


def part_threads(args: argparse.Namespace) -> None:
    if not args.render_only:
        workload = THREADS_WORKLOADS[args.threads_model]()
        for rep in range(args.repeats):
            for threads in (1, 2):
                cfg = Config(framework="torch", optimizer="momentum", momentum=0.9,
                             learning_rate=0.05 if args.threads_model == "lenet5" else 0.01,
                             batch_size=args.threads_batch, epochs=2, threads=threads, seed=rep)
                _run("threads", workload, cfg, cores=[0, 1][:threads])
    by = defaultdict(list)
    for r in _load("threads"):
        by[(r.workload.model, r.config.batch_size, r.config.threads)].append(r)
    rows = []
    speedups: dict[tuple[str, int], float] = {}
    for key in sorted(by, key=lambda k: (k[0] != "lenet5", k[1:])):
        rs = by[key]
        w = rs[-1].workload
        rows.append((f"{w.dataset} {w.train_samples // 1000}k / {w.model}", key[1], key[2], len(rs),
                     median(r.train_time_s for r in rs), cv([r.train_time_s for r in rs]),
                     median(r.cpu_utilization for r in rs), median(r.cpu_utilization_granted for r in rs),
                     str(rs[-1].threads_applied.get("intra_op_threads")), sum(r.contended for r in rs)))
    for model, batch in sorted({k[:2] for k in by}, key=lambda k: (k[0] != "lenet5", k[1])):
        one, two = by.get((model, batch, 1)), by.get((model, batch, 2))
        if one and two:
            speedups[(model, batch)] = median(r.train_time_s for r in one) / median(r.train_time_s for r in two)
    ratio = "; ".join(f"{m} batch {b}: **{x:.2f}x**" for (m, b), x in speedups.items()) or "n/a"
    text = f"""# Thread settings take effect (torch, 2 epochs: LeNet-5 on MNIST 10k, Caffe's CIFAR-10 quick net on CIFAR-10 5k)

Machine: {machine_line()}

Commands: `python benchmarks/bench_measure.py threads --repeats 3` (LeNet-5, batch 64), the same with
`--threads-batch 256`, and `--threads-model cifar_quick` (batch 64 and 256). Repeats alternate
1 and 2 threads so that drift in the machine's load hits both alike. "busy cores" is the mean
number of cores the trial's process tree kept busy during training (psutil, 20 Hz); "threads in
child" is what torch reported after the settings were applied inside the trial process.

{md_table(["workload", "batch", "threads", "runs", "median train s", "CV", "busy cores", "of granted", "threads in child", "contended runs"], rows)}

Train-time ratio, 1 thread / 2 threads (medians): {ratio}.

{_threads_summary(by, speedups)}
The first run of this benchmark, taken while other work shared the cores, is kept in
`raw/threads-first-run-contended.jsonl`.
"""
    _write("threads.md", text)


# --- noise ------------------------------------------------------------------------------------

def part_noise(args: argparse.Namespace) -> None:
    if not args.render_only:
        for rep in range(5):
            cfg = Config(framework="torch", optimizer="momentum", momentum=0.9, learning_rate=0.05,
                         batch_size=64, epochs=2, threads=1, seed=0)
            _run("noise", _mnist10k(), cfg, cores=[1])
    rs = _load("noise")
    times = [r.train_time_s for r in rs]
    rows = [(i + 1, r.train_time_s, r.test_accuracy, r.peak_memory_mb, r.cpu_utilization,
             r.sampler_cpu_fraction, r.contention_cpu_s, r.contended) for i, r in enumerate(rs)]
    text = f"""# Measurement noise: one config repeated (torch, LeNet-5, MNIST 10k, 2 epochs, 1 thread)

Machine: {machine_line()}

Command: `python benchmarks/bench_measure.py noise`. Same config and seed each time, each in a
fresh child pinned to core 1. "sampler CPU" is the parent's own CPU time spent sampling the child
(20 Hz), as a fraction of one core; "others CPU s" is CPU time other processes used on the granted
core during the trial.

{md_table(["run", "train s", "accuracy", "peak MiB", "busy cores", "sampler CPU", "others CPU s", "contended"], rows)}

Median train time **{median(times):.3f} s**, coefficient of variation **{cv(times) * 100:.1f}%**
(target <= 5%); sampler cost median **{median(r.sampler_cpu_fraction for r in rs) * 100:.2f}%** of one core
(target <= 2%).
"""
    _write("noise.md", text)


# --- frameworks -------------------------------------------------------------------------------

FW_ONEDNN = {"torch": (True, False), "tensorflow": (True, False), "onnxruntime": (None,), "sklearn": (None,)}


def part_frameworks(args: argparse.Namespace) -> None:
    if not args.render_only:
        for rep in range(args.repeats):
            for fw in args.frameworks:
                for threads in (1, 2):
                    for onednn in FW_ONEDNN[fw]:
                        cfg = Config(framework=fw, optimizer="adam", learning_rate=1e-3, batch_size=64,
                                     epochs=3, threads=threads, onednn=onednn, seed=rep)
                        _run("frameworks-cpu", _mnist10k(), cfg, cores=[0, 1][:threads])
    groups = defaultdict(list)
    for r in _load("frameworks-cpu"):
        groups[(r.config.framework, r.config.threads, r.config.onednn)].append(r)
    rows = []
    plot = []
    for (fw, t, onednn), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))):
        ok = [r for r in rs if r.status == "ok"]
        first = median(r.epochs[0].epoch_time_s for r in ok if r.epochs)
        later = median(median(e.epoch_time_s for e in r.epochs[1:]) for r in ok if len(r.epochs) > 1)
        tm = median(r.train_time_s for r in ok)
        rows.append((fw, t, {True: "on", False: "off", None: "-"}[onednn], f"{len(ok)}/{len(rs)}", tm,
                     cv([r.train_time_s for r in ok]), median(r.test_accuracy for r in ok),
                     median(r.peak_memory_mb for r in ok), median(r.cpu_utilization for r in ok),
                     median(r.import_time_s for r in ok), first, later, first - later,
                     str(ok[-1].threads_applied.get("intra_op_threads")) if ok else "-",
                     sum(r.contended for r in rs)))
        plot.append((f"{fw}\n{t}t" + ("" if onednn is None else (" dnn" if onednn else " no-dnn")), tm,
                     median(r.test_accuracy for r in ok)))
    _plot_frameworks(plot)
    text = f"""# Four frameworks, one protocol: LeNet-5 on MNIST 10k (CPU)

Machine: {machine_line()}

One shared config on all four frameworks: Adam, lr 1e-3, batch 64, 3 epochs, LeNet-5 (107,786
parameters in every framework), 10,000 training and 2,000 test images (stratified, seed 0) from
`{MNIST}`. Each cell is the median of {args.repeats} trials, each in a fresh child process pinned to
the granted cores. scikit-learn has no convolution layer, so its LeNet-5 runs on the project's
numpy im2col engine over the same BLAS that scikit-learn uses.

- **train s**: training only (no import, no data loading, no evaluation), median; **CV** its spread.
- **import s**: framework import plus thread configuration inside the child.
- **epoch 1 s / later s / warm-up s**: the first epoch (graph tracing, allocator and oneDNN
  primitive creation) against the median of later epochs; warm-up = the difference.
- **threads in child**: the intra-op thread count the framework reported after the settings were
  applied inside the trial process.

Command: `python benchmarks/bench_measure.py frameworks --repeats {args.repeats}`

{md_table(["framework", "threads", "oneDNN", "ok", "train s", "CV", "accuracy", "peak MiB", "busy cores", "import s", "epoch 1 s", "later s", "warm-up s", "threads in child", "contended"], rows)}

![train time and accuracy per framework](frameworks-cpu.png)
"""
    _write("frameworks-cpu.md", text)


def _plot_frameworks(points: list[tuple[str, float, float]]) -> None:
    import matplotlib.pyplot as plt

    if not points:
        return
    fig, ax = plt.subplots(figsize=(max(6, len(points) * 0.9), 4))
    labels = [p[0] for p in points]
    ax.bar(range(len(points)), [p[1] for p in points], color="#4472c4")
    ax.set_xticks(range(len(points)), labels, fontsize=7)
    ax.set_ylabel("median train time (s)")
    ax2 = ax.twinx()
    ax2.plot(range(len(points)), [p[2] for p in points], "o", color="#c00000")
    ax2.set_ylabel("test accuracy", color="#c00000")
    ax2.set_ylim(0.9, 1.0)
    ax.set_title("LeNet-5, MNIST 10k, 3 epochs: time (bars) and accuracy (dots)")
    fig.tight_layout()
    fig.savefig(RESULTS / "frameworks-cpu.png", dpi=120)


PARTS = {"mnist": part_mnist, "threads": part_threads, "noise": part_noise, "frameworks": part_frameworks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts", nargs="+", choices=sorted(PARTS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--frameworks", default="torch,tensorflow,onnxruntime,sklearn")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--cores", default=None, help="CPU ids for the mnist part, e.g. 1 or 0,1 (default 0,1)")
    ap.add_argument("--mnist-only", default=None, help="mnist part: only these configs, e.g. torch-adam")
    ap.add_argument("--threads-batch", type=int, default=64, help="threads part: the batch size")
    ap.add_argument("--threads-model", choices=sorted(THREADS_WORKLOADS), default="lenet5",
                    help="threads part: LeNet-5 on MNIST 10k or the CIFAR-10 quick net on CIFAR-10 5k")
    ap.add_argument("--mnist-seeds", default="0,1,2", help="mnist part: seeds of the torch-adam config")
    args = ap.parse_args()
    args.frameworks = args.frameworks.split(",")
    for part in args.parts:
        PARTS[part](args)


if __name__ == "__main__":
    main()
