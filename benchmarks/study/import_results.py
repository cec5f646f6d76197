"""Turn trial results kept as JSON lines (a benchmark's raw file) into a knowledge table to merge.

Benchmarks such as ``bench_recipes.py`` run real trials through the harness and keep each full
``TrialResult`` in their raw JSONL (under a ``result`` key, or as the line itself). Those are
measurements like any other: this writes them as knowledge-base rows, with this machine's hardware
profile where its id matches the trial's, ready for ``advisor knowledge merge``.

Usage:
    python benchmarks/study/import_results.py benchmarks/results/raw/recipes.jsonl --out /tmp/recipes.csv.gz
"""

from __future__ import annotations

import argparse
import json
import sys

from advisor import hardware, knowledge


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="JSONL files of trial results")
    ap.add_argument("--out", required=True, help="table to write (.csv.gz)")
    args = ap.parse_args(argv)
    profile = hardware.load_cached()
    rows, skipped = [], 0
    for path in args.inputs:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                result = record.get("result", record)
                try:
                    rows.append(knowledge.row_from_result(result, profile))
                except knowledge.KnowledgeBaseError as exc:
                    print(f"{path}:{n}: skipped: {exc}", file=sys.stderr)
                    skipped += 1
    written = knowledge.write(rows, args.out)
    print(f"wrote {written} trials to {args.out} ({skipped} lines without a readable result)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
