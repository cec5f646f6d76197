"""Every knob and every framework, declared once.

A :class:`Knob` is one training or runtime setting (batch size, learning-rate schedule, label
smoothing, oneDNN, ...). Its entry states what everything else derives from it:

- :class:`advisor.records.Config` validation (type, bounds or choices, nullability, which
  frameworks and targets it applies to, which value is "off");
- search-space bounds (:mod:`advisor.space`): a file may search a knob within its limits only,
  and only in a space of a framework and target it applies to;
- the knowledge base's ``cfg_<name>`` columns and the default a table written before the knob
  existed reads (:mod:`advisor.knowledge`);
- the surrogate's config features (``encoding``; :mod:`advisor.surrogate.features`);
- the CLI options of ``advisor measure`` (flag, help);
- the child's environment (``env``; :mod:`advisor.harness.env`).

A :class:`Framework` entry states the backend's module and class, its pip extra, the library
versions it reports and its limits (the optimizers its runtime has, which of them take weight
decay).

Adding a knob: its entry in :data:`KNOBS` plus its typed field on :class:`~advisor.records.Config`
(a test checks that the two agree), each backend's setter, the search-space files that search it,
and tests. Nothing here imports anything heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "Knob",
    "Framework",
    "KNOBS",
    "KNOB_NAMES",
    "THREAD_VARIABLES",
    "knob_environment",
    "measure_argv",
    "FRAMEWORK_INFO",
    "FRAMEWORKS",
    "OPTIMIZERS",
    "SCHEDULES",
    "TARGETS",
    "get_knob",
    "knob_applies",
    "forced_by_model",
]

TARGETS = ("cpu", "gpu")
FRAMEWORKS = ("torch", "tensorflow", "onnxruntime", "sklearn")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
#: ``inv`` is Caffe's policy, ``lr * (1 + 1e-4 * step) ** -0.75``, kept for the seed-study presets.
SCHEDULES = ("constant", "step", "cosine", "onecycle", "inv", "restarts", "probes")


@dataclass(frozen=True)
class Knob:
    """One configuration setting.

    Attributes:
        name: The :class:`~advisor.records.Config` field, the ``cfg_<name>`` column and the
            search-space parameter name.
        type: ``int``, ``float``, ``bool``, ``choice`` or ``str`` (``str``: free text such as the
            device, never searched).
        default: The value a config (and a table written before the knob existed) gets.
        help: One line for ``--help``.
        low, high: Inclusive limits of a numeric knob (``low_open``: ``low`` itself excluded).
        log: Searched and encoded on a log scale.
        choices: Values of a ``choice`` knob.
        nullable: ``None`` is accepted and means "the framework's own default".
        frameworks: Frameworks whose runtime honours it (``None``: all of them).
        targets: Targets it applies to (``gpu`` only: refused on a CPU space).
        off: The value that leaves the knob out of play; any other value on a framework outside
            ``frameworks`` is refused by ``Config``.
        env: Environment variables it sets in the trial child, per framework (``"*"``: all).
        encoding: How the surrogate sees it: ``num`` (the value; ``log`` makes nearest-trial
            distances use its log), ``log10`` (a ``log10_<name>`` feature), ``cat``, or ``none``.
        flag: CLI flag of ``advisor measure`` (``None``: not an option there).
        searchable: Whether a search space may search or fix it.
        cpu_speed: Chosen for a CPU's speed alone (what is learnt does not depend on it): a recipe
            measured or collected on a CPU and answered for a GPU takes the framework's default.
    """

    name: str
    type: str
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    log: bool = False
    choices: tuple[Any, ...] = ()
    nullable: bool = False
    frameworks: tuple[str, ...] | None = None
    targets: tuple[str, ...] = TARGETS
    off: Any = None
    env: Mapping[str, tuple[str, ...]] | None = None
    encoding: str = "num"
    flag: str | None = None
    searchable: bool = True
    cpu_speed: bool = False

    def accepted(self) -> str:
        """What a value must be, in the words of an error message."""
        null = " or null" if self.nullable else ""
        if self.type == "bool":
            return f"true or false{null}"
        if self.type == "choice":
            return "one of " + ", ".join(map(repr, self.choices)) + null
        if self.type == "str":
            return "a string"
        kind = "an integer" if self.type == "int" else "a finite number"
        op = ">" if self.low_open else ">="
        return f"{kind} {op} {self.low:g} and <= {self.high:g}{null}"

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` is a legal value of this knob (framework rules aside)."""
        if value is None:
            return self.nullable
        if self.type == "bool":
            return isinstance(value, bool)
        if self.type == "choice":
            return any(type(value) is type(c) and value == c for c in self.choices)
        if self.type == "str":
            return isinstance(value, str)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.type == "int" and not isinstance(value, int):
            return False
        if value != value or value in (float("inf"), float("-inf")):
            return False
        assert self.low is not None and self.high is not None
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    def is_off(self, value: Any) -> bool:
        """Whether ``value`` leaves this framework-specific knob out of play."""
        return value is None or value == self.off


#: Every parallel library reads its own thread-count variable; all of them get ``threads``.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
_TORCH, _TF, _ORT = ("torch",), ("tensorflow",), ("onnxruntime",)

#: Every knob, in ``Config`` field order (after ``framework``).
KNOBS: tuple[Knob, ...] = (
    Knob("batch_size", "int", 64, "Mini-batch size.", low=1, high=1_000_000, log=True,
         flag="--batch-size"),
    Knob("learning_rate", "float", 0.01, "Peak learning rate (the schedule scales it per step).",
         low=0.0, high=1e4, low_open=True, log=True, encoding="log10", flag="--lr"),
    Knob("epochs", "int", 1, "Training epochs (a schedule spans all of them).", low=1, high=100_000,
         log=True, flag="--epochs"),
    Knob("optimizer", "choice", "sgd", "Optimizer; adamw is Adam with decoupled weight decay.",
         choices=OPTIMIZERS, encoding="cat", flag="--optimizer"),
    Knob("momentum", "float", 0.0, "Momentum of optimizer 'momentum'.", low=0.0, high=0.999,
         flag="--momentum"),
    Knob("nesterov", "bool", False, "Nesterov momentum (optimizer 'momentum').",
         frameworks=("torch", "tensorflow", "sklearn"), off=False, flag="--nesterov"),
    Knob("weight_decay", "float", 0.0, "Weight decay: L2 (sgd, momentum, adam) or decoupled (adamw).",
         low=0.0, high=1.0, flag="--weight-decay"),
    Knob("schedule", "choice", "constant",
         "Learning-rate schedule, applied per step: constant, step (x0.1 at 50% and 75%), cosine, "
         "onecycle (warm-up then linear decay to 0), inv (Caffe's), restarts (cosine cycles that double, "
         "the first an epoch or more, the last ending with the run) or probes (two short cosine cycles, "
         "1/15 and 2/15 of the run, then one over the last 4/5).",
         choices=SCHEDULES, encoding="cat", flag="--schedule"),
    Knob("warmup_fraction", "float", 0.0, "Share of the steps spent warming the rate up linearly.",
         low=0.0, high=0.5, flag="--warmup"),
    Knob("label_smoothing", "float", 0.0, "Label smoothing of the cross-entropy loss.", low=0.0, high=0.5,
         frameworks=("torch", "tensorflow"), off=0.0, flag="--label-smoothing"),
    Knob("augment_translate", "int", 0,
         "Random translation in pixels (pad and crop) of each training image, every epoch.",
         low=0, high=8, flag="--augment-translate"),
    Knob("augment_flip", "bool", False,
         "Random horizontal flip of training images (refused where it changes labels, e.g. digits).",
         flag="--augment-flip"),
    Knob("threads", "int", 1, "Intra-op / BLAS / OpenMP threads; also the number of cores granted.",
         low=1, high=4096, env={"*": (*THREAD_VARIABLES, "TF_NUM_INTRAOP_THREADS")}, flag="--threads"),
    Knob("inter_op_threads", "int", 1, "Inter-op threads (torch, tensorflow, onnxruntime).",
         low=1, high=4096, env={"*": ("TF_NUM_INTEROP_THREADS",)}, flag="--inter-op-threads"),
    Knob("onednn", "bool", None, "oneDNN on or off; default: the framework's.", nullable=True,
         frameworks=("torch", "tensorflow"), env={"tensorflow": ("TF_ENABLE_ONEDNN_OPTS",)},
         flag="--onednn", cpu_speed=True),
    Knob("xla", "bool", None, "XLA JIT compilation of the train step.", nullable=True,
         frameworks=_TF, flag="--xla"),
    Knob("execution_mode", "choice", None, "ONNX Runtime execution mode.",
         choices=("sequential", "parallel"), nullable=True, frameworks=_ORT, encoding="cat",
         flag="--execution-mode"),
    Knob("graph_optimization", "choice", None, "ONNX Runtime graph optimisation level.",
         choices=("disable", "basic", "extended", "all"), nullable=True, frameworks=_ORT,
         encoding="cat", flag="--graph-optimization", cpu_speed=True),
    Knob("channels_last", "bool", False, "Channels-last (NHWC) memory format for convolutions.",
         frameworks=_TORCH, off=False, flag="--channels-last"),
    Knob("compile", "bool", False,
         "torch.compile the model; compile time is reported apart from the steady-state steps.",
         frameworks=_TORCH, off=False, flag="--compile"),
    Knob("bfloat16", "bool", False,
         "bfloat16 mixed precision (torch autocast, Keras mixed_bfloat16); needs CPU or GPU support.",
         frameworks=("torch", "tensorflow"), off=False, flag="--bfloat16"),
    Knob("device", "str", "cpu", "cpu, cuda or cuda:<index>.", encoding="none", flag="--device",
         searchable=False),
    Knob("mixed_precision", "bool", False, "float16 mixed precision (CUDA only).",
         frameworks=("torch", "tensorflow"), targets=("gpu",), off=False, flag="--mixed-precision"),
    Knob("cudnn_benchmark", "bool", False, "cuDNN autotuning (CUDA only).", frameworks=_TORCH,
         targets=("gpu",), off=False, flag="--cudnn-benchmark"),
    Knob("seed", "int", 0, "Seed for initialisation, shuffling, augmentation and subsets.",
         low=0, high=2**63 - 1, encoding="none", flag="--seed", searchable=False),
    Knob("time_budget_s", "float", 0.0,
         "Seconds of training to fill (0: off): whole epochs run while the next is projected to fit, the "
         "schedule re-spans the epochs projected after each one, and --epochs caps them.",
         low=0.0, high=1e7, encoding="none", flag="--time-budget", searchable=False),
    Knob("stop_at_accuracy", "float", 0.0,
         "Stop after the first epoch whose test accuracy reaches this (0: off), as time-to-accuracy "
         "benchmarks do; the schedule still spans --epochs.",
         low=0.0, high=1.0, encoding="none", flag="--stop-at-accuracy", searchable=False),
)

KNOB_NAMES = tuple(k.name for k in KNOBS)
_BY_NAME = {k.name: k for k in KNOBS}


def get_knob(name: str) -> Knob:
    """The knob called ``name`` (``KeyError`` when there is none)."""
    return _BY_NAME[name]


def knob_applies(knob: Knob, framework: str, target: str | None = None) -> bool:
    """Whether ``knob`` is honoured by ``framework`` (on ``target``, when given)."""
    return (knob.frameworks is None or framework in knob.frameworks) and (
        target is None or target in knob.targets)


def forced_by_model(framework: str, model: str) -> dict[str, Any]:
    """Knob values a model forces on a framework: a search or a recommendation sets them instead of
    drawing a value the backend refuses. ONNX Runtime's parallel executor does not update batch
    norm's running statistics, so models with batch norm train there with ``sequential``."""
    if framework != "onnxruntime":
        return {}
    from advisor.models import get_model, walk_layers

    try:
        spec = get_model(model)
    except Exception:  # noqa: BLE001 - an unknown model fails where it is built, not here
        return {}
    return {"execution_mode": "sequential"} if any(layer.kind == "bn" for layer in walk_layers(spec.layers)) else {}


def knob_environment(config: Any) -> dict[str, str]:
    """The environment variables a config's knobs set in its trial child (``env`` entries).

    Booleans become ``1`` / ``0``; a knob left at ``None`` sets nothing.
    """
    out: dict[str, str] = {}
    for knob in KNOBS:
        if not knob.env:
            continue
        value = getattr(config, knob.name)
        names = knob.env.get(config.framework, ()) + knob.env.get("*", ())
        if value is None or not names:
            continue
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        out.update(dict.fromkeys(names, text))
    return out


#: ``advisor measure`` picks its own optimizer, rate and momentum when they are not given, so a
#: command that reproduces a config always states them.
_ALWAYS_STATED = ("optimizer", "learning_rate", "momentum")


def measure_argv(config: Any, *, dataset: str, model: str, data_dir: str | None = None,
                 train_samples: int | None = None, test_samples: int | None = None) -> list[str]:
    """The ``advisor measure`` command (as argv) that runs exactly ``config`` on this workload.

    Knobs at their defaults are left out, except those ``advisor measure`` chooses itself.
    """
    argv = ["advisor", "measure", "--framework", config.framework, "--dataset", dataset, "--model", model]
    if data_dir:
        argv += ["--data-dir", str(data_dir)]
    if train_samples is not None:
        argv += ["--train-samples", str(train_samples)]
    if test_samples is not None:
        argv += ["--test-samples", str(test_samples)]
    for knob in KNOBS:
        value = getattr(config, knob.name)
        if knob.flag is None or (value == knob.default and knob.name not in _ALWAYS_STATED):
            continue
        if knob.name == "momentum" and value == knob.default and config.optimizer != "momentum":
            continue  # measure gives only optimizer 'momentum' a momentum of its own choosing
        if knob.type == "bool":
            argv.append(knob.flag if value else "--no-" + knob.flag[2:])
        else:
            argv += [knob.flag, repr(value) if isinstance(value, float) else str(value)]  # repr: exact
    return argv


@dataclass(frozen=True)
class Framework:
    """One backend.

    Attributes:
        name: ``--framework`` value.
        module, trainer: Where the :class:`~advisor.frameworks.base.Trainer` lives.
        extra: The pip extra that installs it (``None``: the core install has it).
        library: What it is, for people.
        version_keys: Keys of ``library_versions`` that identify its runtime.
        optimizers: The optimizers its runtime has.
        decay_optimizers: Those that accept a non-zero weight decay.
        cuda: Whether it has a CUDA path.
    """

    name: str
    module: str
    trainer: str
    extra: str | None
    library: str
    version_keys: tuple[str, ...]
    optimizers: tuple[str, ...] = OPTIMIZERS
    decay_optimizers: tuple[str, ...] = OPTIMIZERS
    cuda: bool = True


FRAMEWORK_INFO: dict[str, Framework] = {f.name: f for f in (
    Framework("torch", "advisor.frameworks.torch", "TorchTrainer", "torch", "PyTorch eager",
              ("torch", "mkl", "onednn", "cuda", "cudnn")),
    Framework("tensorflow", "advisor.frameworks.tensorflow", "TensorFlowTrainer", "tensorflow",
              "TensorFlow 2 / Keras 3", ("tensorflow", "keras", "cuda", "cudnn")),
    # ONNX Runtime's training API has plain SGD (no momentum, no weight decay) and AdamW; its
    # 'adam' is that AdamW, so its decay is decoupled there too.
    Framework("onnxruntime", "advisor.frameworks.onnxruntime", "OnnxRuntimeTrainer", "onnx",
              "ONNX Runtime training API", ("onnxruntime", "onnx"),
              optimizers=("sgd", "adam", "adamw"), decay_optimizers=("adam", "adamw")),
    Framework("sklearn", "advisor.frameworks.sklearn", "SklearnTrainer", None,
              "scikit-learn MLPClassifier / numpy im2col", ("sklearn", "numpy"),
              optimizers=("sgd", "momentum", "adam"), cuda=False),
)}
assert tuple(FRAMEWORK_INFO) == FRAMEWORKS
