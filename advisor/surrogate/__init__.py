"""The surrogate: LightGBM quantile models that predict time, accuracy and memory from the table.

Importing this package does not import LightGBM; fitting or loading a model does.
"""

from __future__ import annotations

from advisor.surrogate.evaluate import SCHEMES, Evaluation, Figures, device_holdout, evaluate, model_card, spearman
from advisor.surrogate.features import FEATURES, Feature, FeatureSchema, encode, feature_values, schema_from_columns
from advisor.surrogate.io import (
    file_sha256,
    fit_file,
    load,
    save,
    shipped_dir,
    shipped_model_dir,
    shipped_table,
    table_warning,
)
from advisor.surrogate.model import LOG_OBJECTIVES, OBJECTIVES, QUANTILES, Band, Surrogate, fit, training_columns

__all__ = [
    "SCHEMES",
    "Evaluation",
    "Figures",
    "evaluate",
    "device_holdout",
    "model_card",
    "spearman",
    "FEATURES",
    "Feature",
    "FeatureSchema",
    "encode",
    "feature_values",
    "schema_from_columns",
    "file_sha256",
    "fit_file",
    "load",
    "save",
    "shipped_dir",
    "shipped_model_dir",
    "shipped_table",
    "table_warning",
    "LOG_OBJECTIVES",
    "OBJECTIVES",
    "QUANTILES",
    "Band",
    "Surrogate",
    "fit",
    "training_columns",
]
