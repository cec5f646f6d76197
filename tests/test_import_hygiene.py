"""`import advisor` and `advisor --help` must not load heavy libraries (DESIGN.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "tensorflow", "onnxruntime", "lightgbm", "optuna", "keras", "onnx")

PROBE = """
import json, sys
{body}
heavy = {heavy!r}
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def _loaded(body: str) -> list[str]:
    code = PROBE.format(body=body, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_advisor_loads_no_heavy_library() -> None:
    assert _loaded("import advisor, advisor.records, advisor.models, advisor.errors") == []


def test_cli_help_loads_no_heavy_library() -> None:
    body = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from advisor.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "assert 'recommend' in r.output or 'measure' in r.output\n"
    )
    assert _loaded(body) == []


@pytest.mark.parametrize("module", ["advisor.datasets", "advisor.hardware", "advisor.harness",
                                    "advisor.space", "advisor.pareto", "advisor.knowledge",
                                    "advisor.recommend"])
def test_library_modules_load_no_dl_framework(module: str) -> None:
    loaded = _loaded(f"import {module}")
    assert [m for m in loaded if m in ("torch", "tensorflow", "onnxruntime", "keras", "onnx")] == []


def test_console_script_help_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "advisor", "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Usage" in out.stdout
