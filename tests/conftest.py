"""Fixtures shared by the whole suite.

Every test runs with its own ``ADVISOR_HOME`` and ``ADVISOR_DATA`` so nothing touches the user's
cache or knowledge base, and so tests do not see each other's files.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("advisor-home")
    monkeypatch.setenv("ADVISOR_HOME", str(home))
    monkeypatch.setenv("ADVISOR_DATA", str(home / "data"))
    return home


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def requires(module: str) -> pytest.MarkDecorator:
    """Skip with a stated reason when an optional framework is not installed."""
    return pytest.mark.skipif(
        not has_module(module), reason=f"{module} is not installed (pip install 'advisor[all]')"
    )


@pytest.fixture
def postgres_url() -> str:
    url = os.environ.get("ADVISOR_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("ADVISOR_TEST_POSTGRES_URL is not set: .ci/run starts PostgreSQL and sets it")
    return url
