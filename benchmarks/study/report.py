"""Render the measurement study: benchmarks/results/study.md and its figures in results/study/.

Reads every study of the given storage(s) (defaults-*, knob-*, joint-*, profile-* written by the
scripts next to this one) and the knowledge-base table, and writes tables and figures, each with
the command and the studies it comes from. Nothing is measured here, and a section whose studies
do not exist yet says "not yet measured".

Usage:
    python benchmarks/study/report.py [--storage sqlite:///benchmarks/study/study.db ...] \
        [--knowledge surrogate/knowledge.csv.gz] [--out benchmarks/results/study.md]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import targets  # noqa: E402
from defaults import DATA_SUBDIR, REPO, StudyData, config_key, load_studies, time_to  # noqa: E402
from joint import Comparison, compare  # noqa: E402
from profiles import PROFILE_ATTR  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
from common import cv, git_rev, md_table  # noqa: E402

from advisor.records import FRAMEWORKS, TrialResult  # noqa: E402

NOT_YET = "_not yet measured_"
SCRIPTS = "benchmarks/study"
#: The seed study's Server-1 CPU results with each framework's defaults (reference/gtdlbench.md).
SEED = [("mnist", "TensorFlow", 1114.3, 99.28), ("mnist", "Caffe", 512.2, 99.03), ("mnist", "Theano", 11555.4, 99.08),
        ("mnist", "Torch", 9647.3, 99.24), ("cifar10", "TensorFlow", 119102.6, 87.00),
        ("cifar10", "Caffe", 2708.9, 75.79), ("cifar10", "Torch", 46850.7, 66.20), ("cifar10", "Theano", 532.8, 49.66)]
#: Targets: dataset -> (accuracy, seconds of training, the data folder the runs must read), from targets.py.
TARGETS = {ds: (acc, budget, DATA_SUBDIR[ds]) for ds, (acc, budget) in targets.TARGETS.items()}
FULL_TEST = 10_000


@dataclass(frozen=True)
class Run:
    """One trial as the seed comparison needs it, from a storage or the knowledge base."""

    trial_id: str
    source: str  # study name
    framework: str
    dataset: str
    train_samples: int
    test_samples: int
    curve: tuple[tuple[float, float], ...]  # (cumulative train s, test accuracy) per epoch
    contended: bool

    def time_to(self, accuracy: float) -> float | None:
        return next((t for t, a in self.curve if a is not None and a == a and a >= accuracy), None)


def _fmt_spread(values: Sequence[float]) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "n/a"
    if len(vals) == 1:
        return f"{vals[0]:.3g}"
    return f"{statistics.median(vals):.3g} [{min(vals):.3g}-{max(vals):.3g}], CV {cv(vals) * 100:.0f}%"


def _ok(results: Iterable[TrialResult]) -> list[TrialResult]:
    return [r for r in results if r.status == "ok"]


def _statuses(results: Sequence[TrialResult]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for r in results:
        counts[r.status] += 1
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    contended = sum(1 for r in results if r.contended)
    # Other processes used the granted cores during these runs: their times are too long.
    return f"{text} ({contended} contended)" if contended else text


def _cmd(script: str, extra: str = "") -> str:
    return f"`python {SCRIPTS}/{script}{(' ' + extra) if extra else ''}`"


class Report:
    """Accumulates markdown and figures."""

    def __init__(self, studies: dict[str, StudyData], *, figures: Path, out: Path, kb_path: Path | None,
                 storages: Sequence[str]) -> None:
        self.studies, self.figures, self.out, self.kb_path, self.storages = studies, figures, out, kb_path, storages
        self.parts: list[str] = []
        self.render_cmd = "`python benchmarks/study/report.py " + " ".join(f"--storage {s}" for s in storages) + "`"

    def kind(self, kind: str) -> dict[str, StudyData]:
        return {n: d for n, d in sorted(self.studies.items()) if d.attrs.get("study.kind") == kind}

    @staticmethod
    def _shown(path: Path) -> str:
        """``path`` relative to the repository when it lies inside it (the report is committed)."""
        try:
            return str(Path(path).resolve().relative_to(REPO))
        except ValueError:
            return str(path)

    def section(self, kind: str, heading: str, intro: str) -> dict[str, StudyData] | None:
        """Open a section: its heading and intro, then the studies of ``kind``, or None (and the
        "not yet measured" line) when none of them holds a trial."""
        studies = self.kind(kind)
        self.parts.append(heading + "\n")
        self.parts.append(intro + "\n")
        if not any(d.results for d in studies.values()):
            self.parts.append(NOT_YET + "\n")
            return None
        return studies

    def figure(self, fig: Any, name: str) -> str:
        import matplotlib.pyplot as plt

        self.figures.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(self.figures / name, dpi=110)
        plt.close(fig)
        rel = Path(self.figures.name) / name if self.figures.parent == self.out.parent else self.figures / name
        return f"![{name}]({rel})"

    # --- 1. defaults ------------------------------------------------------------------------

    def defaults(self) -> None:
        studies = self.section(
            "defaults", "## 1. Do framework defaults transfer?",
            "Each seed framework's stock settings (`advisor/presets.py`) run on each of our four frameworks; "
            "LeNet-5 on MNIST (all 60,000 / 10,000 images), cifar_quick on CIFAR-10 (a 5,000 / 2,000 subset: a "
            "full CIFAR-10 epoch at the stock batch sizes takes minutes here). Commands: "
            f"{_cmd('defaults.py', '--presets tensorflow-mnist,caffe-mnist,torch-mnist,theano-mnist --frameworks torch,onnxruntime --max-epochs 3 --repeats 3 --cores 1')} "
            "(and `--frameworks tensorflow --cores 0`), and "
            f"{_cmd('defaults.py', '--presets tensorflow-cifar10,caffe-cifar10,torch-cifar10,theano-cifar10 --frameworks torch,onnxruntime --train-samples 5000 --test-samples 2000 --max-epochs 3 --repeats 2 --cores 0')} "
            "(and `--frameworks tensorflow --cores 1`); studies `defaults-<preset>-<framework>`. The MNIST presets "
            "also ran on Fashion-MNIST (60,000 / 10,000, the same LeNet-5): "
            f"{_cmd('defaults.py', '--presets tensorflow-mnist,caffe-mnist,torch-mnist,theano-mnist --dataset fashion-mnist --frameworks torch,onnxruntime --max-epochs 3 --repeats 2 --cores 1')} "
            "(and `--frameworks tensorflow --cores 0`), studies `defaults-<preset>-on-fashion-mnist-<framework>`: "
            "the rows '<preset> on fashion-mnist'. scikit-learn is "
            "not run on these: its numpy conv engine needs minutes per epoch at these sizes and batches.")
        if studies is None:
            return
        rows, grid = [], {}
        for name, d in studies.items():
            a = d.attrs
            preset, fw = a.get("study.preset", "?"), a.get("study.framework", "?")
            if a.get("study.dataset") and a.get("study.dataset") != a.get("study.preset_dataset"):
                preset = f"{preset} on {a['study.dataset']}"
            scaling = (f"{a.get('study.epochs_given', 0):.4g} -> {a.get('study.epochs_run')} "
                       f"(x{a.get('study.epochs_scale')}, cap {a.get('study.max_epochs')})")
            if a.get("study.not_applicable"):
                rows.append((preset, fw, "n/a", "", a["study.not_applicable"], "", "", "", "", name))
                grid[(preset, fw)] = None
                continue
            ok = _ok(d.results)
            if not d.results:
                rows.append((preset, fw, scaling, "", NOT_YET, "", "", "", "", name))
                continue
            acc = [r.test_accuracy for r in ok]
            size = f"{d.results[0].train_samples} / {d.results[0].test_samples}"
            rows.append((preset, fw, scaling, size, _statuses(d.results), _fmt_spread([r.train_time_s for r in ok]),
                         _fmt_spread(acc), _fmt_spread([r.best_accuracy for r in ok]),
                         _fmt_spread([r.peak_memory_mb for r in ok]), name))
            if ok:
                grid[(preset, fw)] = (statistics.median(acc), statistics.median(r.train_time_s for r in ok))
        self.parts.append(
            "Epochs are scaled to this machine: stock epochs x scale, rounded up, capped (column *epochs*); "
            "learning-rate schedules are not modelled. Timings are median [min-max], CV over the repeats.\n")
        self.parts.append(md_table(["preset", "framework", "epochs (stock -> run)", "train / test", "trials", "train s",
                                    "final accuracy", "best accuracy", "peak MiB", "study"], rows) + "\n")
        self.parts.append(self._defaults_figure(grid) + f"\n\nFigure from the table above; {self.render_cmd}.\n")

    def _defaults_figure(self, grid: dict[tuple[str, str], tuple[float, float] | None]) -> str:
        import matplotlib.pyplot as plt
        import numpy as np

        presets = sorted({p for p, _ in grid})
        fws = [f for f in FRAMEWORKS if any(k[1] == f for k in grid)]
        fig, axes = plt.subplots(1, 2, figsize=(11, 0.5 * len(presets) + 2))
        for ax, idx, title in ((axes[0], 0, "median final accuracy"), (axes[1], 1, "median train s")):
            m = np.full((len(presets), len(fws)), np.nan)
            for (p, f), v in grid.items():
                if v is not None:
                    m[presets.index(p), fws.index(f)] = v[idx]
            ax.imshow(m, aspect="auto", cmap="viridis" if idx == 0 else "magma_r")
            for i in range(len(presets)):
                for j in range(len(fws)):
                    v = grid.get((presets[i], fws[j]), ())
                    text = "n/a" if v is None else ("" if not v else f"{m[i, j]:.3g}")
                    ax.text(j, i, text, ha="center", va="center", fontsize=8, color="w")
            ax.set_xticks(range(len(fws)), fws)
            ax.set_yticks(range(len(presets)), presets)
            ax.set_title(title)
        return self.figure(fig, "defaults.png")

    # --- 2. knobs ---------------------------------------------------------------------------

    def knobs(self) -> None:
        studies = self.section(
            "knob", "## 2. One knob at a time",
            "From a fixed base (Adam, lr 1e-3, batch 64, oneDNN on, XLA off, ONNX Runtime sequential with all "
            "graph optimisations) one knob varies; each framework and dataset states its base, workload and cores "
            "below. Commands: "
            f"{_cmd('knobs.py', '--datasets mnist --cores 0 --repeats 2 --knobs batch_size,learning_rate,epochs,onednn,xla,execution_mode,graph_optimization')}, "
            f"{_cmd('knobs.py', '--datasets cifar10 --train-samples 2000 --test-samples 1000 --epochs 4 --epoch-values 1,2,4,8 --cores 1 --repeats 2 --knobs ...')} "
            "(the same knobs), and the threads sweeps on both cores, "
            f"{_cmd('knobs.py', '--cores 0,1 --knobs threads --repeats 2')} with the same dataset options. "
            "The training-recipe knobs (optimizer choices, schedule, weight decay, label smoothing, translate and "
            "flip augmentation, channels-last, bfloat16) on PyTorch, over MNIST, Fashion-MNIST and CIFAR-10: "
            f"{_cmd('knobs.py', '--frameworks torch --datasets mnist,fashion-mnist,cifar10 --knobs optimizer,schedule,weight_decay,label_smoothing,augment_translate,augment_flip,channels_last,bfloat16 --repeats 2 --cores 1')} "
            "(each knob only where the dataset honours it: no horizontal flip on MNIST digits). "
            "The single-core sweeps ran two at a time, each pinned to its own core. Studies "
            "`knob-<framework>-<dataset>-<knob>`. Each row: median [min-max], CV over the repeats.")
        if studies is None:
            return
        by_cell: dict[tuple[str, str], list[tuple[str, StudyData]]] = defaultdict(list)
        for name, d in studies.items():
            by_cell[(d.attrs["study.framework"], d.attrs["study.dataset"])].append((name, d))
        for (fw, ds), items in sorted(by_cell.items()):
            rows, panels = [], []
            for name, d in items:
                knob = d.attrs["study.knob"]
                groups: dict[Any, list[TrialResult]] = defaultdict(list)
                for r in d.results:
                    groups[getattr(r.config, knob)].append(r)
                points = []
                for value in d.attrs.get("study.values", sorted(groups, key=str)):
                    rs = groups.get(value, [])
                    ok = _ok(rs)
                    if not rs:
                        rows.append((knob, value, NOT_YET, "", "", "", name))
                        continue
                    rows.append((knob, value, _statuses(rs), _fmt_spread([r.train_time_s for r in ok]),
                                 _fmt_spread([r.test_accuracy for r in ok]),
                                 _fmt_spread([r.peak_memory_mb for r in ok]), name))
                    if ok:
                        times = [r.train_time_s for r in ok]
                        points.append((str(value), statistics.median(times), min(times), max(times),
                                       statistics.median(r.test_accuracy for r in ok)))
                panels.append((knob, points))
            self.parts.append(f"### {fw} on {ds}\n")
            self.parts.append(self._knob_setting(items) + "\n")
            self.parts.append(md_table(["knob", "value", "trials", "train s", "final accuracy", "peak MiB", "study"],
                                       rows) + "\n")
            self.parts.append(self._knob_figure(fw, ds, panels) + f"\n\nFigure from `knob-{fw}-{ds}-*`; "
                              f"{self.render_cmd}.\n")

    @staticmethod
    def _knob_setting(items: list[tuple[str, StudyData]]) -> str:
        """One line: the base config(s), the workload and the cores of a framework's sweeps."""
        bases: dict[str, list[str]] = defaultdict(list)
        for name, d in items:
            b = d.attrs.get("study.base") or {}
            desc = (f"{b.get('optimizer')} lr {b.get('learning_rate'):g}, batch {b.get('batch_size')}, "
                    f"{b.get('epochs')} epochs, {b.get('threads')} thread(s)") if b else "unknown base"
            bases[desc].append(str(d.attrs.get("study.knob", name)))
        work = next((r for _, d in items for r in d.results), None)
        wl = (f"{work.workload.dataset}/{work.workload.model}, train {work.train_samples}, test {work.test_samples}"
              if work else "no trials yet")
        granted = sorted({len(r.cores_granted) for _, d in items for r in d.results if r.cores_granted})
        base_txt = "; ".join(f"base {desc} (sweeps: {', '.join(knobs)})" for desc, knobs in bases.items())
        return f"Workload {wl}; {base_txt}; cores granted per trial: {', '.join(map(str, granted)) or 'n/a'}."

    def _knob_figure(self, fw: str, ds: str, panels: list[tuple[str, list[tuple[str, float, float, float, float]]]]) -> str:
        import matplotlib.pyplot as plt

        panels = [p for p in panels if p[1]]
        fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(3.2 * max(1, len(panels)), 3), squeeze=False)
        for ax, (knob, pts) in zip(axes[0], panels):
            x = range(len(pts))
            ax.errorbar(x, [p[1] for p in pts], yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                        fmt="o-", color="#4472c4", capsize=3)
            ax.set_xticks(list(x), [p[0] for p in pts], fontsize=7, rotation=30)
            ax.set_xlabel(knob)
            ax.set_ylabel("train s (median, min-max)", fontsize=7)
            ax2 = ax.twinx()
            ax2.plot(list(x), [p[4] for p in pts], "s--", color="#c00000")
            ax2.set_ylabel("accuracy", color="#c00000", fontsize=7)
        fig.suptitle(f"{fw}, {ds}: one knob at a time")
        return self.figure(fig, f"knobs-{fw}-{ds}.png")

    # --- 3. joint ---------------------------------------------------------------------------

    def joint(self) -> None:
        self.parts.append("## 3. Joint tuning against the best single-knob change\n")
        self.parts.append(
            "The seed study claims that tuning several hyper-parameters together beats tuning one. "
            f"Joint: {_cmd('joint.py', '--frameworks torch --datasets mnist --trials 20 --confirm 3 --cores 1')} and "
            "the same for each framework that has a row below (for CIFAR-10 with `--datasets cifar10 --train-samples "
            "2000 --test-samples 1000`), each under `taskset -c <its core>` "
            "so that the tuner's threads range is the one core the single-knob sweeps had "
            "(TPE over the framework's CPU search space, "
            "objectives train time and accuracy, same workload as the knob sweeps; study `joint-<fw>-<ds>`, "
            "the winner re-run in `joint-<fw>-<ds>-confirm`). Single knob: the knob studies of section 2. "
            "*Base accuracy* is the base config's lower-median final accuracy (a value its runs reached); "
            "*to base acc.* the lower-median training time until an epoch reached it (a repeat that never did counts "
            "as infinite; the lower median, since with 2 repeats the plain median would average a time with infinity). Hypervolume: (time, accuracy), time scaled by a common reference "
            "(1.1 x the slowest trial of either side), accuracy from 0; larger is better.\n")
        cells = {(d.attrs.get("study.framework"), d.attrs.get("study.dataset")) for d in self.studies.values()
                 if d.attrs.get("study.kind") in ("knob", "confirm")}
        cells |= {tuple(n.split("-")[1:3]) for n in self.studies if n.startswith("joint-")}  # type: ignore[misc]
        comps = [c for c in (compare(self.studies, fw, ds) for fw, ds in sorted(cells, key=str)) if c is not None]
        comps = [c for c in comps if c.joint or c.knob_groups]
        if not comps:
            self.parts.append(NOT_YET + "\n")
            return
        rows = [self._joint_row(c) for c in comps]
        self.parts.append(md_table(["framework", "dataset", "base acc.", "base s to base acc.",
                                    "best knob change to base acc. (s)", "best joint trial to base acc. (s)",
                                    "joint winner re-run (s)", "best knob acc.", "best joint acc.",
                                    "hypervolume knobs / joint", "verdict"], rows) + "\n")
        for c in comps:
            self.parts.append(self._joint_figure(c) + f"\n\nFigure from `knob-{c.framework}-{c.dataset}-*`, "
                              f"`joint-{c.framework}-{c.dataset}`; {self.render_cmd}.\n")

    def _joint_row(self, c: Comparison) -> tuple[Any, ...]:
        acc = c.base_accuracy
        base_t = c.base.median_time_to(acc) if c.base else math.nan
        knob = f"{c.best_knob_to_base.median_time_to(acc):.3g} ({c.best_knob_to_base.label}, " \
               f"n={len(c.best_knob_to_base.results)})" if c.best_knob_to_base else (NOT_YET if not c.knob_groups else "none reached it")
        reached = [(time_to(r, acc), r) for r in c.joint if math.isfinite(acc) and time_to(r, acc) is not None]
        best = min(reached, key=lambda p: p[0]) if reached else None
        joint = NOT_YET if not c.joint else ("none reached it" if best is None else f"{best[0]:.3g} ({best[1].trial_id}, n=1)")
        confirm = NOT_YET
        if c.confirm is not None:
            confirm = f"{c.confirm.median_time_to(acc):.3g} to base acc., acc. {_fmt_spread([r.test_accuracy for r in c.confirm.results])} (n={len(c.confirm.results)})"
        best_joint_acc = max((r.test_accuracy for r in c.joint if r.test_accuracy is not None), default=math.nan)
        verdict = "not yet measured"
        if c.joint and c.knob_groups:
            t_knob = c.best_knob_to_base.median_time_to(acc) if c.best_knob_to_base else math.inf
            t_joint = c.confirm.median_time_to(acc) if c.confirm else (best[0] if best else math.inf)
            faster = t_joint < t_knob
            more = (c.confirm.median("test_accuracy") if c.confirm else best_joint_acc) > c.knob_accuracy
            basis = "re-run medians" if c.confirm else "single joint runs (unconfirmed)"
            verdict = (f"joint {'faster' if faster else 'not faster'} to base acc., "
                       f"{'more' if more else 'not more'} accurate ({basis})")
        return (c.framework, c.dataset, acc, base_t, knob, joint, confirm,
                f"{c.knob_accuracy:.4g} ({c.best_knob_accuracy.label})" if c.best_knob_accuracy else "n/a",
                best_joint_acc, f"{c.hypervolume_knobs:.3g} / {c.hypervolume_joint:.3g}", verdict)

    def _joint_figure(self, c: Comparison) -> str:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        kr = [r for g in c.knob_groups for r in g.results]
        ax.scatter([r.train_time_s for r in kr], [r.test_accuracy for r in kr], s=12, c="#999999", label="single knob")
        if c.base:
            ax.scatter([r.train_time_s for r in c.base.results], [r.test_accuracy for r in c.base.results], s=30,
                       c="k", marker="D", label="base")
        ax.scatter([r.train_time_s for r in c.joint], [r.test_accuracy for r in c.joint], s=14, c="#4472c4",
                   label="joint (TPE)")
        if c.confirm:
            ax.scatter([r.train_time_s for r in c.confirm.results], [r.test_accuracy for r in c.confirm.results],
                       s=40, c="#c00000", marker="*", label="joint winner re-run")
        ax.set_xscale("log")
        ax.set_xlabel("train s")
        ax.set_ylabel("final test accuracy")
        ax.legend(fontsize=7)
        ax.set_title(f"{c.framework}, {c.dataset}: joint vs one knob")
        return self.figure(fig, f"joint-{c.framework}-{c.dataset}.png")

    # --- 4. profiles ------------------------------------------------------------------------

    def profiles(self) -> None:
        studies = self.section(
            "profile", "## 4. Resource profiles",
            f"Command: {_cmd('profiles.py')}; studies `profile-<framework>-<dataset>`. The harness keeps only "
            "each trial's peak RSS, mean busy cores and the number of monitor samples "
            "(`extra['monitor_samples']`), not the samples themselves, so profiles.py samples the trial's "
            "process tree from the parent (every 0.25 s) and stores the series with the trial "
            "(`study.profile`). Time is wall time since spawn: interpreter start, import and data loading come "
            "before training.")
        if studies is None:
            return
        rows, mem = [], defaultdict(list)
        for name, d in studies.items():
            for r, attrs in zip(d.results, d.trial_attrs):
                rows.append((d.attrs["study.framework"], d.attrs["study.dataset"], r.config.batch_size, r.status,
                             r.train_time_s, r.peak_memory_mb, r.cpu_utilization, r.import_time_s,
                             r.data_load_time_s, len((attrs.get(PROFILE_ATTR) or {}).get("t", [])), name))
                if r.peak_memory_mb is not None:
                    mem[(d.attrs["study.framework"], d.attrs["study.dataset"])].append((r.config.batch_size, r.peak_memory_mb))
        self.parts.append(md_table(["framework", "dataset", "batch", "status", "train s", "peak MiB", "busy cores",
                                    "import s", "data s", "samples", "study"], rows) + "\n")
        self.parts.append(self._memory_figure(mem) + f"\n\nFigure from `profile-*`; {self.render_cmd}.\n")
        for name, d in studies.items():
            if any(a.get(PROFILE_ATTR) for a in d.trial_attrs):
                self.parts.append(self._series_figure(name, d) + f"\n\nFigure from `{name}`; {self.render_cmd}.\n")

    def _memory_figure(self, mem: dict[tuple[str, str], list[tuple[int, float]]]) -> str:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for (fw, ds), pts in sorted(mem.items()):
            by: dict[int, list[float]] = defaultdict(list)
            for b, m in pts:
                by[b].append(m)
            xs = sorted(by)
            ax.plot(xs, [statistics.median(by[b]) for b in xs], "o-", label=f"{fw} {ds}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_ylabel("peak RSS of the trial's process tree (MiB)")
        ax.legend(fontsize=7)
        return self.figure(fig, "memory-vs-batch.png")

    def _series_figure(self, name: str, d: StudyData) -> str:
        import matplotlib.pyplot as plt

        fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
        for r, attrs in zip(d.results, d.trial_attrs):
            p = attrs.get(PROFILE_ATTR)
            if not p:
                continue
            a1.plot(p["t"], p["rss_mb"], label=f"batch {r.config.batch_size}")
            a2.plot(p["t"], p["cpu_cores"], label=f"batch {r.config.batch_size}")
        a1.set_ylabel("RSS (MiB)")
        a2.set_ylabel("busy cores")
        a2.set_xlabel("seconds since spawn")
        a1.legend(fontsize=7)
        a1.set_title(name)
        return self.figure(fig, f"{name}.png")

    # --- 5. seed comparison and targets ----------------------------------------------------

    def runs(self) -> list[Run]:
        out: dict[str, Run] = {}
        if self.kb_path is not None and self.kb_path.exists():
            from advisor import knowledge

            t = knowledge.read(self.kb_path)
            for row in t.rows:
                # The seed figures and our targets are CPU training times: a GPU trial is not one.
                if row["synthetic"] or row["status"] not in ("ok", "timeout", "pruned") or row["device_kind"] != "cpu":
                    continue
                times, accs, total = row["epoch_times"] or [], row["accuracy_curve"] or [], 0.0
                curve = []
                for dt, acc in zip(times, accs):
                    total += float(dt)
                    curve.append((total, float(acc) if acc is not None else math.nan))
                out[row["trial_id"]] = Run(row["trial_id"], f"{row['study'] or 'imported benchmark results'} (knowledge base)", row["framework"],
                                           row["dataset_name"], row["train_samples"] or 0, row["test_samples"] or 0,
                                           tuple(curve), bool(row["contended"]))
        for name, d in self.studies.items():
            for r in d.results:
                if r.synthetic or not r.epochs:
                    continue
                out[r.trial_id] = Run(r.trial_id, name, r.config.framework, r.dataset_name or r.workload.dataset,
                                      r.train_samples, r.test_samples,
                                      tuple((e.train_time_s, e.test_accuracy) for e in r.epochs), r.contended)
        return list(out.values())

    def seed(self) -> None:
        self.parts.append("## 5. Against the seed study\n")
        kb = f"`{self._shown(self.kb_path)}`" if self.kb_path else "no knowledge base"
        self.parts.append(
            "Seed: Server-1 CPU training time and accuracy with each framework's defaults "
            "(`reference/gtdlbench.md`, the seed study's own table). Ours: over every trial in the storage(s) "
            f"and in {kb}, the smallest training time at which an epoch reached the seed's accuracy on that "
            "dataset, with the trial id and where it is stored. The seed measured the full 10,000-image test sets; "
            "we show the best on the full test set and on any test subset separately, CPU trials only. Our CIFAR-10 is "
            "`cifar-10-batches-bin` with 3 of the 5 training batches (30,000 images). *contended*: other "
            f"processes used the granted cores during that trial, so its time is pessimistic. {self.render_cmd}\n")
        runs = self.runs()
        rows = []
        for ds, fw, seed_s, seed_acc in SEED:
            cells = []
            for full in (True, False):
                pool = [r for r in runs if r.dataset == ds and (r.test_samples >= FULL_TEST or not full)]
                hits = [(r.time_to(seed_acc / 100), r) for r in pool]
                hits = [h for h in hits if h[0] is not None]
                if not pool:
                    cells.append(NOT_YET)
                elif not hits:
                    cells.append(f"not reached in {len(pool)} trials")
                else:
                    t, r = min(hits, key=lambda h: h[0])
                    cells.append(f"{t:.3g} s ({r.framework}, {r.trial_id}, `{r.source}`, train {r.train_samples}, "
                                 f"test {r.test_samples}{', contended' if r.contended else ''}; {seed_s / t:.0f}x faster)")
            rows.append((ds, fw, seed_s, seed_acc, *cells))
        self.parts.append(md_table(["dataset", "seed framework", "seed train CPU s", "seed acc. %",
                                    "ours: best time to that acc. (full test set)", "ours: any test subset"],
                                   rows) + "\n")

    def targets(self) -> None:
        self.parts.append("## 6. Targets\n")
        self.parts.append(
            "MNIST: >= 99.0% test accuracy within 15 s of training; CIFAR-10: >= 70% within 300 s on the "
            "data in `cifar-10-batches-bin`. A config counts with the median of at least 3 repeats (same "
            "workload and config, training seeds differ) of its time to the accuracy on the full 10,000-image "
            "test set; a repeat that never reached it counts as infinitely slow. Contended runs (other processes "
            "used the granted cores) are left out. Over every study in the "
            f"storage(s); {self.render_cmd}.\n")
        rows = []
        for ds, (acc, budget, source) in TARGETS.items():
            groups: dict[str, list[tuple[str, TrialResult]]] = defaultdict(list)
            for name, d in self.studies.items():
                for r in d.results:
                    if (r.workload.dataset != ds or r.test_samples < FULL_TEST or r.contended
                            or source not in (r.workload.data_dir or "")):
                        continue
                    groups[r.workload.to_json() + config_key(r.config)].append((name, r))
            eligible = {k: v for k, v in groups.items() if len(v) >= 3}
            if not eligible:
                singles = [(time_to(r, acc), n, r) for v in groups.values() for n, r in v if time_to(r, acc) is not None]
                note = ""
                if singles:
                    t, n, r = min(singles, key=lambda s: s[0])
                    note = f"; fastest single trial: {t:.3g} s ({r.trial_id}, `{n}`)"
                rows.append((ds, f">= {acc:.0%} in <= {budget:g} s", NOT_YET + f" (no config with 3 repeats{note})",
                             "", "", ""))
                continue
            scored = []
            for v in eligible.values():
                times = [time_to(r, acc) for _, r in v]
                scored.append((statistics.median([math.inf if t is None else t for t in times]), v))
            med, v = min(scored, key=lambda s: s[0])
            r0 = v[0][1]
            c = r0.config
            desc = (f"{c.framework} {r0.workload.model} train {r0.train_samples}, {c.optimizer} lr {c.learning_rate:g} "
                    f"batch {c.batch_size} epochs {c.epochs} threads {c.threads}")
            met = "met" if med <= budget else "missed"
            rows.append((ds, f">= {acc:.0%} in <= {budget:g} s", desc,
                         f"{med:.3g}" if math.isfinite(med) else "not reached",
                         _fmt_spread([r.train_time_s for _, r in v]) + f" (n={len(v)}, `{v[0][0]}`)", f"**{met}**"))
        self.parts.append(md_table(["dataset", "target", "best config (median of repeats)", "median s to target",
                                    "train s of those runs", "verdict"], rows) + "\n")

    def knowledge(self) -> None:
        self.parts.append("## 7. Knowledge base\n")
        if self.kb_path is None or not self.kb_path.exists():
            self.parts.append(NOT_YET + "\n")
            return
        from advisor import knowledge

        s = knowledge.summarize(knowledge.read(self.kb_path))
        self.parts.append(f"`{self._shown(self.kb_path)}`: {s['rows']} trials from {s['studies']} studies; by status "
                          f"{s['by_status']}; by framework {s['by_framework']}; by dataset {s['by_dataset']}; "
                          f"{s['contended']} contended. Collected by `python benchmarks/study/collect.py`, "
                          "exported by `advisor knowledge export`.\n")

    def render(self) -> str:
        hw = sorted({r.hardware_id for d in self.studies.values() for r in d.results if r.hardware_id})
        head = (f"# The measurement study, re-run with `advisor`\n\nRendered by {self.render_cmd} at git "
                f"{git_rev()} from {', '.join(f'`{s}`' for s in self.storages)} "
                f"({len(self.studies)} studies, {sum(len(d.results) for d in self.studies.values())} trials; "
                f"hardware profiles {', '.join(hw) or 'none'}). Every trial ran in a fresh child process "
                "through `advisor.harness.run_trial`; train time excludes start-up, import, data loading "
                "and evaluation.\n")
        for part in (self.defaults, self.knobs, self.joint, self.profiles, self.seed, self.targets, self.knowledge):
            part()
        return head + "\n" + "\n".join(self.parts)


def main(argv: list[str] | None = None) -> int:
    from defaults import DEFAULT_STORAGE

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", action="append", default=None, help="study storage URL (repeatable)")
    ap.add_argument("--knowledge", default=str(REPO / "surrogate" / "knowledge.csv.gz"),
                    help="knowledge-base table ('' for none)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "study.md"))
    ap.add_argument("--figures", default=None, help="folder for the PNGs (default: <out folder>/study)")
    args = ap.parse_args(argv)
    storages = args.storage or [DEFAULT_STORAGE]
    studies: dict[str, StudyData] = {}
    for url in storages:
        for name, d in load_studies(url).items():
            if name in studies:
                studies[name].results.extend(d.results)
                studies[name].trial_attrs.extend(d.trial_attrs)
            else:
                studies[name] = d
    out = Path(args.out)
    figures = Path(args.figures) if args.figures else out.parent / "study"
    report = Report(studies, figures=figures, out=out, kb_path=Path(args.knowledge) if args.knowledge else None,
                    storages=storages)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.render())
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
