"""The command tree is complete and every command's help shows an example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor.cli import app

REPO = Path(__file__).resolve().parents[1]
COMMANDS = [
    ["measure"], ["hardware"], ["datasets", "list"], ["datasets", "info"], ["datasets", "download"],
    ["spaces", "list"], ["spaces", "show"], ["spaces", "validate"], ["tune"], ["worker"],
    ["studies", "list"], ["pareto"], ["knowledge", "export"], ["knowledge", "merge"],
    ["surrogate", "fit"], ["surrogate", "evaluate"], ["recommend"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_exists_and_has_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_top_level_help_shows_an_example() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert "advisor recommend --dataset cifar10 --gpu" in result.output


def test_unknown_command_is_an_error() -> None:
    result = CliRunner().invoke(app, ["frobnicate"])
    assert result.exit_code != 0


def test_readme_starts_with_the_two_setup_commands() -> None:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)
    assert blocks[0].strip().endswith("advisor recommend --dataset cifar10 --gpu")
    assert blocks[1].strip().startswith("pip install torch==2.13.0")
    assert "pytest" in blocks[1]
    ci = (REPO / ".ci" / "run").read_text()
    assert "README.md" in ci and "pip install torch==2\\.13\\.0" in ci


def test_version_flag() -> None:
    out = subprocess.run([sys.executable, "-m", "advisor", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and re.match(r"\d+\.\d+\.\d+", out.stdout.strip())
