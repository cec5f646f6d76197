"""No unsafe deserialisation or shell execution anywhere in the package (issue 7)."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "advisor"

FORBIDDEN = {
    "pickle.load": re.compile(r"\bpickle\.loads?\("),
    "cPickle": re.compile(r"\bcPickle\b"),
    "yaml.load without SafeLoader": re.compile(r"\byaml\.(?:load|load_all)\((?![^)]*SafeLoader)"),
    "yaml.unsafe_load": re.compile(r"\byaml\.(?:unsafe_load|full_load)"),
    "eval(": re.compile(r"(?<![\w.])eval\("),
    "exec(": re.compile(r"(?<![\w.])exec\("),
    "shell=True": re.compile(r"shell\s*=\s*True"),
    "os.system": re.compile(r"\bos\.system\("),
    "allow_pickle=True": re.compile(r"allow_pickle\s*=\s*True"),
}


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.is_file())


def test_package_has_sources() -> None:
    assert len(_sources()) > 10


def test_no_forbidden_calls() -> None:
    hits = []
    for path in _sources():
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for name, pattern in FORBIDDEN.items():
                if pattern.search(code):
                    hits.append(f"{path.relative_to(PACKAGE.parent)}:{lineno}: {name}")
    assert hits == []


def test_grep_catches_a_planted_call(tmp_path: Path) -> None:
    # The patterns must match the real thing, or the test above proves nothing.
    samples = {
        "pickle.load": "data = pickle.load(fh)",
        "yaml.load without SafeLoader": "yaml.load(text)",
        "eval(": "x = eval(s)",
        "exec(": "exec(code)",
        "shell=True": "subprocess.run(cmd, shell=True)",
    }
    for name, code in samples.items():
        assert FORBIDDEN[name].search(code), name
    assert not FORBIDDEN["yaml.load without SafeLoader"].search("yaml.load(text, Loader=yaml.SafeLoader)")
    assert not FORBIDDEN["eval("].search("model.eval()")
