"""Datasets: a registry of meta-features, canonical-format readers, download and loading.

Built in: ``digits`` (scikit-learn's 1,797 real 8x8 digits, no download) and
``synthetic:HxWxC`` (random data for timing only). Downloaded from their canonical URLs and
verified by SHA-256: ``mnist``, ``fashion-mnist`` and ``cifar10``; or read from a folder that
holds their canonical files (``Workload.data_dir``). The user's own data: an ``.npz`` with
``x_train``, ``y_train``, ``x_test`` and ``y_test``.

Every registry entry knows its meta-features without loading (:func:`get_info`), so predictions
need no data. :func:`load` returns float32 NHWC arrays standardised per channel with training
statistics, int64 labels, and a content-derived ``fingerprint`` with the ``variant`` of the copy.

Example:
    >>> from advisor.datasets import get_info
    >>> get_info("mnist").input_shape
    (28, 28, 1)
"""

from __future__ import annotations

from advisor._datasets.cache import cache_root
from advisor._datasets.download import RemoteFile, download_dataset, download_file
from advisor._datasets.load import LoadedDataset, SourceReport, inspect_source, load
from advisor._datasets.readers import read_cifar_binary, read_cifar_python, read_idx, read_npz
from advisor._datasets.registry import DatasetInfo, check_flip, get_info, list_datasets, refused_knobs
from advisor._datasets.sources import SourceFiles, find_files
from advisor._datasets.subset import standardise, stratified_indices

__all__ = [
    "DatasetInfo",
    "LoadedDataset",
    "list_datasets",
    "get_info",
    "check_flip",
    "refused_knobs",
    "load",
    "inspect_source",
    "SourceReport",
    "cache_root",
    "download_dataset",
    "download_file",
    "RemoteFile",
    "find_files",
    "SourceFiles",
    "read_idx",
    "read_cifar_binary",
    "read_cifar_python",
    "read_npz",
    "stratified_indices",
    "standardise",
]
