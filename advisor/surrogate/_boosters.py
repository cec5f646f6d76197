"""One quantile booster: its LightGBM parameters and its training.

The caller passes LightGBM in (:func:`~advisor.surrogate._compat.import_lightgbm`), so importing
this module does not import it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from advisor.surrogate.features import FeatureSchema

__all__ = ["lgb_params"]


def lgb_params(*, alpha: float, n_rows: int, seed: int, num_threads: int) -> dict[str, Any]:
    """LightGBM parameters for one quantile model (leaf sizes scale with small tables)."""
    min_leaf = max(2, min(20, n_rows // 25))
    return {
        "objective": "quantile",
        "alpha": alpha,
        "learning_rate": 0.1,
        "num_leaves": 31,
        "min_data_in_leaf": min_leaf,
        "min_data_per_group": min_leaf,
        "cat_smooth": 1.0,
        "min_data_in_bin": 1,
        "feature_pre_filter": False,
        "deterministic": True,
        "force_col_wise": True,
        "seed": seed,
        "num_threads": num_threads,
        "verbosity": -1,
    }


def _train_one(lgb: Any, x: np.ndarray, y: np.ndarray, schema: FeatureSchema, *, alpha: float, seed: int,
               num_threads: int, num_boost_round: int, weight: np.ndarray | None = None) -> Any:
    data = lgb.Dataset(
        x, label=y, weight=weight, feature_name=schema.names, categorical_feature=schema.categorical_indices,
        free_raw_data=True, params={"verbosity": -1, "min_data_in_bin": 1, "feature_pre_filter": False},
    )
    params = lgb_params(alpha=alpha, n_rows=len(y), seed=seed, num_threads=num_threads)
    return lgb.train(params, data, num_boost_round=num_boost_round)
