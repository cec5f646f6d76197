"""The dataset registry: meta-features of every dataset, known without loading any data."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import DatasetError, UnknownNameError, invalid_parameter

__all__ = [
    "DatasetInfo",
    "list_datasets",
    "get_info",
    "canonical_name",
    "is_npz_path",
    "parse_synthetic",
    "SYNTHETIC_TRAIN",
    "SYNTHETIC_TEST",
]

SYNTHETIC_TRAIN = 2_000
SYNTHETIC_TEST = 500
SYNTHETIC_CLASSES = 10
_SYNTHETIC_RE = re.compile(r"^synthetic:(\d+)x(\d+)x(\d+)$")
_MAX_SIDE = 4096
_MAX_CHANNELS = 64


@dataclass(frozen=True)
class DatasetInfo:
    """Meta-features of a dataset, known without loading it.

    Attributes:
        name: Registry name (``mnist``), ``synthetic:HxWxC``, or the ``.npz`` path as given.
        input_shape: One sample's shape, ``(height, width, channels)``.
        num_classes: Number of classes; labels are ``0 .. num_classes - 1``.
        train_size: Training samples in the full dataset.
        test_size: Test samples in the full dataset.
        synthetic: True when the data is random (timing only: accuracy has no meaning).
        source: Where the data comes from (a URL, a package, a path).
        description: One line for humans.
        landmark: Test accuracy of the fixed landmark classifier (ridge on random convolutional features)
            (:func:`advisor._datasets.landmark.landmark_score`), measured once on the real data and
            recorded here; ``None`` where it was not measured (no data at hand) or has no meaning
            (synthetic data).
        flip_preserves_label: Whether a horizontal mirror image keeps its class (clothes and
            CIFAR-10's objects yes; digits no), which decides whether ``augment_flip`` is offered;
            ``None`` where it is the user's call (their own ``.npz``, synthetic data).
    """

    name: str
    input_shape: tuple[int, int, int]
    num_classes: int
    train_size: int
    test_size: int
    synthetic: bool
    source: str
    description: str
    landmark: float | None = None
    flip_preserves_label: bool | None = None

    def __post_init__(self) -> None:
        shape = self.input_shape
        if (not isinstance(shape, tuple) or len(shape) != 3
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape)):
            raise invalid_parameter("input_shape", "DatasetInfo", "a tuple of 3 positive integers (H, W, C)", shape)
        for field_name, low in (("num_classes", 2), ("train_size", 1), ("test_size", 1)):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise invalid_parameter(field_name, "DatasetInfo", f"an integer >= {low}", value)
        mark = self.landmark
        if mark is not None and (isinstance(mark, bool) or not isinstance(mark, (int, float)) or not 0 <= mark <= 1):
            raise invalid_parameter("landmark", "DatasetInfo", "a number in [0, 1] or None", mark)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (``input_shape`` as a list)."""
        return {
            "name": self.name, "input_shape": list(self.input_shape), "num_classes": self.num_classes,
            "train_size": self.train_size, "test_size": self.test_size, "synthetic": self.synthetic,
            "source": self.source, "description": self.description, "landmark": self.landmark,
        }


# ``landmark``: measured with ``advisor datasets landmark NAME --data-dir DIR`` (digits needs no
# data) on the official files, except where noted.
_REGISTRY: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo(
            name="digits", input_shape=(8, 8, 1), num_classes=10, train_size=1_437, test_size=360,
            synthetic=False, source="scikit-learn (sklearn.datasets.load_digits, ships with the package)",
            description="1,797 real 8x8 handwritten digits, split 1,437/360 stratified with a fixed seed",
            landmark=1.0, flip_preserves_label=False,
        ),
        DatasetInfo(
            name="mnist", input_shape=(28, 28, 1), num_classes=10, train_size=60_000, test_size=10_000,
            synthetic=False, source="https://ossci-datasets.s3.amazonaws.com/mnist/",
            description="MNIST handwritten digits, 28x28 grey (IDX files)",
            landmark=0.947, flip_preserves_label=False,
        ),
        # MIT licence, (c) 2017 Zalando SE; cite Xiao, Rasul and Vollgraf (2017), arXiv:1708.07747.
        DatasetInfo(
            name="fashion-mnist", input_shape=(28, 28, 1), num_classes=10, train_size=60_000,
            test_size=10_000, synthetic=False,
            source="http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
            description="Zalando Fashion-MNIST clothing images, 28x28 grey (IDX files)",
            landmark=0.861, flip_preserves_label=True,
        ),
        DatasetInfo(
            name="cifar10", input_shape=(32, 32, 3), num_classes=10, train_size=50_000, test_size=10_000,
            synthetic=False, source="https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
            description="CIFAR-10 colour images, 32x32x3 (binary or python version)",
            landmark=0.481,  # measured on a copy with 3 of the 5 training batches
            flip_preserves_label=True,
        ),
    )
}
_ALIASES = {"cifar-10": "cifar10", "cifar_10": "cifar10", "fashion_mnist": "fashion-mnist",
            "fashionmnist": "fashion-mnist", "fmnist": "fashion-mnist"}


def check_flip(info: DatasetInfo, flip: bool) -> None:
    """Refuse ``augment_flip`` on a dataset whose mirrored images change class.

    Raises:
        InvalidParameterError: One line naming the dataset.
    """
    if flip and info.flip_preserves_label is False:
        raise invalid_parameter("augment_flip", f"a trial on {info.name!r}",
                                "false (a mirrored image of this dataset can change its class)", flip)


def refused_knobs(dataset: str) -> frozenset[str]:
    """Knobs a search must not draw on this dataset (they keep their defaults): ``augment_flip``
    where mirroring changes the class. Unknown or unreadable names refuse nothing here; they
    fail where the data is loaded."""
    try:
        info = get_info(dataset)
    except Exception:  # noqa: BLE001 - reported by the trial that loads it
        return frozenset()
    return frozenset({"augment_flip"}) if info.flip_preserves_label is False else frozenset()


def _unknown(name: str) -> UnknownNameError:
    choices = ", ".join(list(_REGISTRY) + ["synthetic:HxWxC (e.g. synthetic:28x28x1)"])
    from advisor.errors import did_you_mean

    return UnknownNameError(f"Unknown dataset {name!r}: choose one of {choices} or give a path to an .npz file."
                            + did_you_mean(name, list(_REGISTRY), {"fmnist": "fashion-mnist", "cifar": "cifar10"}))


def is_npz_path(name: str) -> bool:
    """Whether ``name`` names a user ``.npz`` file rather than a registry entry."""
    return name.lower().endswith(".npz")


def canonical_name(name: str) -> str:
    """The registry key for ``name`` (aliases and case folded); ``.npz`` paths pass unchanged.

    Raises:
        UnknownNameError: When ``name`` is neither a registry name, ``synthetic:HxWxC`` nor ``.npz``.
    """
    if not isinstance(name, str) or not name.strip():
        raise _unknown(str(name))
    if is_npz_path(name):
        return name
    key = name.strip().lower()
    if key.startswith("synthetic"):
        h, w, c = parse_synthetic(key)
        return f"synthetic:{h}x{w}x{c}"
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise _unknown(name)
    return key


def parse_synthetic(name: str) -> tuple[int, int, int]:
    """Parse ``synthetic:HxWxC`` into ``(H, W, C)``.

    Raises:
        DatasetError: When the shape is malformed or out of range.
    """
    match = _SYNTHETIC_RE.match(name.strip().lower())
    if match is None:
        raise DatasetError(
            f"The dataset {name!r} must be written synthetic:HxWxC, for example synthetic:28x28x1 or "
            "synthetic:32x32x3."
        )
    h, w, c = (int(g) for g in match.groups())
    if not (1 <= h <= _MAX_SIDE and 1 <= w <= _MAX_SIDE and 1 <= c <= _MAX_CHANNELS):
        raise DatasetError(
            f"The shape of {name!r} must have 1 <= H, W <= {_MAX_SIDE} and 1 <= C <= {_MAX_CHANNELS}; "
            "pick a smaller shape such as synthetic:32x32x3."
        )
    return h, w, c


def list_datasets() -> list[DatasetInfo]:
    """The built-in datasets, plus the default synthetic one (``synthetic:28x28x1``)."""
    return [*_REGISTRY.values(), get_info("synthetic:28x28x1")]


def get_info(name_or_path: str) -> DatasetInfo:
    """Meta-features of a registry name, ``synthetic:HxWxC`` or ``.npz`` path, without loading it.

    For an ``.npz`` file only the array headers and the (small) label arrays are read.

    Raises:
        UnknownNameError: For an unknown name.
        DatasetFileError: For a missing or malformed ``.npz`` file.
    """
    key = canonical_name(name_or_path)
    if is_npz_path(key):
        from advisor._datasets.readers import npz_info

        return npz_info(Path(key))
    if key.startswith("synthetic:"):
        h, w, c = parse_synthetic(key)
        return DatasetInfo(
            name=key, input_shape=(h, w, c), num_classes=SYNTHETIC_CLASSES, train_size=SYNTHETIC_TRAIN,
            test_size=SYNTHETIC_TEST, synthetic=True, source="generated (numpy, seeded)",
            description="random images with random labels: timing only, accuracy has no meaning",
        )
    return _REGISTRY[key]
