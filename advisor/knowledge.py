"""The knowledge base: a flat table with one row per trial, exported from any number of studies.

The table is a gzip-compressed CSV (``*.csv.gz``) written with the standard library only. Every
file starts with a header row; the first column, ``schema_version``, repeats :data:`SCHEMA_VERSION`
on every row so that any CSV reader can tell which schema it holds. An empty cell means "unknown"
(``None``); for ``str`` columns an empty cell reads back as ``""``. Non-finite floats are written as
empty cells. ``bool`` cells are ``true`` / ``false``; ``json`` cells hold compact JSON.

Schema version 1 (column: type, meaning):

=============================  =======  =========================================================
schema_version                 int      :data:`SCHEMA_VERSION` of the file
trial_id                       str      unique id of the trial (the merge key)
study                          str      Optuna study name ("" outside a study)
trial_number                   int      Optuna trial number
started_at                     str      ISO-8601 start time
advisor_version                str      advisor version that ran the trial
framework                      str      torch | tensorflow | onnxruntime | sklearn
framework_version              str      version of the framework
library_versions               json     {library: version} seen in the trial child
threadpools                    str      threadpoolctl summary, e.g. ``openblas=2,openmp=2``
threads_applied                json     thread settings the framework reported back
hardware_id                    str      hardware profile id
device_kind                    str      cpu | gpu
gpu_model                      str      GPU name ("" on the CPU)
cores_granted                  int      number of CPU cores the trial was pinned to
dataset_name                   str      registry name or file name of the dataset
dataset_fingerprint            str      sha256 of the exact source files and subset
dataset_variant                str      e.g. ``official``, ``synthetic``
synthetic                      bool     synthetic data: timing only, no accuracy meaning
seed                           int      seed of the data-subset draw (training seed: cfg_seed)
model                          str      model name (:mod:`advisor.models`)
input_h, input_w, input_c      int      input shape (NHWC, without the batch)
num_classes                    int      classes
train_samples, test_samples    int      samples actually used
flops_per_sample               float    training FLOPs of one sample (forward + backward)
params                         int      trainable parameters
cfg_<knob>                     various  one column per knob of :mod:`advisor.knobs` (every
                                        :class:`~advisor.records.Config` field except
                                        ``framework``), e.g. cfg_batch_size, cfg_schedule;
                                        a file without a newer knob's column reads that
                                        knob's default
status                         str      ok | failed | timeout | oom | diverged | pruned
train_time_s                   float    training time (no start-up, import, loading, eval)
epochs_completed               int      epochs that finished
epoch_times                    json     per-epoch training seconds
time_to_accuracy               json     {accuracy: seconds to reach it}
test_accuracy, best_accuracy   float    final and best test accuracy
accuracy_curve                 json     test accuracy after each epoch
final_loss                     float    last epoch's mean training loss
eval_time_s                    float    evaluation seconds
inference_throughput           float    samples per second at inference
peak_memory_mb                 float    peak RSS of the trial's process tree (MiB)
gpu_peak_memory_mb             float    peak GPU memory (MiB)
cpu_utilization                float    mean busy cores of the process tree
cpu_utilization_granted        float    the same as a fraction of the cores granted
contention_cpu_s               float    CPU seconds used by other processes meanwhile
contended                      bool     the timing was disturbed; kept out of time models
import_time_s                  float    framework import seconds
data_load_time_s               float    data loading seconds
wall_time_s                    float    whole trial, from spawn
error                          str      error text of a failed trial
hw_gemm_gflops_1               float    calibrated GEMM GFLOP/s on 1 thread (joined at export)
hw_gemm_gflops_threads         float    the same at the trial's thread count
hw_gemm_gflops_max             float    the best calibrated GEMM GFLOP/s
hw_cores                       int      physical cores of the machine
hw_memory_gb                   float    memory of the machine
=============================  =======  =========================================================
"""

from __future__ import annotations

# MAX_TABLE_BYTES and KnowledgeBaseError stay importable from here, outside __all__ as before.
from advisor._knowledge._export import ExportCount, export
from advisor._knowledge._io import MAX_TABLE_BYTES, read, write
from advisor._knowledge._merge import (MergeStats, append_to_user_knowledge, merge, merge_into_user_knowledge,
                                       user_knowledge_path)
from advisor._knowledge._rows import config_from_row, gflops_at, row_from_result
from advisor._knowledge._schema import COLUMNS, RESULT_ATTR, SCHEMA_VERSION, Table, summarize
from advisor.errors import KnowledgeBaseError

__all__ = [
    "SCHEMA_VERSION",
    "COLUMNS",
    "RESULT_ATTR",
    "Table",
    "MergeStats",
    "ExportCount",
    "row_from_result",
    "config_from_row",
    "gflops_at",
    "write",
    "read",
    "merge",
    "export",
    "summarize",
    "user_knowledge_path",
    "append_to_user_knowledge",
    "merge_into_user_knowledge",
]
