"""Every bad input of docs/cli.md gets one `error:` line on stderr and exit 1, run as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"

CASES = [
    ("measure --framework pytorch --dataset digits --model mlp", "Did you mean 'torch'?"),
    ("measure --framework torch --dataset mnistt --model mlp", "Did you mean 'mnist'?"),
    ("measure --framework torch --dataset digits --model lenet", "Did you mean 'lenet5'?"),
    ("measure --framework torch --dataset mnist --model mlp --data-dir /missing", "/missing: is not a folder"),
    ("measure --framework torch --dataset digits --model mlp --lr -1", "--lr must be a finite number > 0"),
    ("measure --framework torch --dataset digits --model mlp --optimizer adm", "Did you mean 'adam'?"),
    ("recommend --dataset mnist --verify 1 --data-dir /missing", "/missing: is not a folder"),
    ("recommend --dataset mnist --min-accuracy 2", "'--min-accuracy' option must be a fraction"),
    ("recommend --dataset mnist --max-time -5", "'--max-time' option must be a positive number"),
    ("recommend --dataset mnist --top 0", "Invalid value for '--top'"),
    ("recommend --datset mnist", "No such option: --datset"),
    ("recommend --dataset mnist --frameworks pytorch", "Did you mean 'torch'?"),
    ("recommend --dataset mnist --target-accuracy 0.99999", "--target-accuracy 0.99999"),
    ("recommend --dataset mnist --budget 1s", "too small for one trial"),
    # a target well within reach (predictions read the host's hardware: on an Intel host 0.99 was called
    # out of reach at 60%, the error a target gets before the budget is looked at; 0.98 is not, there or on AMD)
    ("recommend --dataset mnist --target-accuracy 0.98 --budget 1s", "too small for one trial"),
    ("tune --framework torch --dataset digits --trials 0", "Invalid value for '--trials'"),
    ("pareto --study x --storage sqlite:///missing.db", "No storage at sqlite:///missing.db"),
    ("studies list --storage sqlite:///missing.db", "No storage at sqlite:///missing.db"),
    ("knowledge merge missing.csv.gz --out merged.csv.gz", "Knowledge base missing.csv.gz does not exist"),
]


def test_the_doc_table_lists_every_case() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert len(CASES) >= 15
    for command, _ in CASES:
        assert f"`advisor {command}`" in text, command


@pytest.mark.parametrize("command, needle", CASES, ids=[c for c, _ in CASES])
def test_bad_input_is_one_error_line_and_exit_1(command: str, needle: str, tmp_path: Path) -> None:
    env = dict(os.environ, ADVISOR_HOME=str(tmp_path / "home"), COLUMNS="120")
    done = subprocess.run([sys.executable, "-m", "advisor", *command.split()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a bad input must not create files"


def test_optuna_conventions_storage_variable_and_study_name(tmp_path: Path) -> None:
    """ADVISOR_STORAGE stands in for --storage and --study-name for --study (as in Optuna's CLI)."""
    env = dict(os.environ, ADVISOR_HOME=str(tmp_path / "home"), ADVISOR_STORAGE="sqlite:///from-env.db")
    done = subprocess.run([sys.executable, "-m", "advisor", "pareto", "--study-name", "x"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "No storage at sqlite:///from-env.db" in done.stderr, done.stderr
