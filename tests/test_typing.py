"""The package type-checks (STYLE.md: mypy runs in CI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import requires

REPO = Path(__file__).resolve().parents[1]


@requires("mypy")
@pytest.mark.timeout(900)
def test_mypy_is_clean() -> None:
    out = subprocess.run([sys.executable, "-m", "mypy", "advisor"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
