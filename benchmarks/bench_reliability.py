"""Reliability and security benchmark: faults, full-size load, long fuzzing; writes reliability.md.

    python benchmarks/bench_reliability.py                    # everything (about 30 minutes)
    python benchmarks/bench_reliability.py --load-trials 208 --fuzz-examples 20000

1. Runs the CI cases (tests/test_reliability_faults.py, tests/test_reliability_hostile.py,
   tests/test_security_grep.py) under pytest; each case appends its numbers (trials before and
   after, lost, duplicated, the error line) to a JSON-lines file named by
   ``$ADVISOR_RELIABILITY_REPORT``, and pytest's JUnit XML says which cases pass.
2. Runs the full load: 8 ``advisor worker`` processes on one SQLite study and on one PostgreSQL
   study (``$ADVISOR_TEST_POSTGRES_URL``), 200+ one-epoch synthetic trials each, as fast as they go.
3. Fuzzes the search-space loader (three generators) and the dataset readers of
   tests/test_datasets_hostile.py with many more examples than CI runs.
4. Writes benchmarks/results/reliability.md (and the raw records next to it).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "tests")]

from common import REPO, RESULTS, command_line, git_rev, machine_line, md_table, read_jsonl  # noqa: E402

CASE_FILES = ["tests/test_reliability_faults.py", "tests/test_reliability_hostile.py", "tests/test_reliability_load.py",
              "tests/test_security_grep.py"]

# Failing cases this benchmark knows the cause of: (test-id fragment, defect and fix).
KNOWN_DEFECTS = [
    ("test_knowledge_export_on_a_full_disk", "advisor/cli/_common.py `user_errors`: an OSError (ENOSPC, EFBIG, "
     "EACCES) escapes as a traceback; catch OSError and `fail(f\"{exc.strerror}: {exc.filename}\")`. The write "
     "itself is atomic (previous file intact, no temporary left)."),
    ("test_pareto_export_on_a_full_disk", "same cause and fix as the knowledge export (advisor/cli/_common.py)."),
    ("test_trial_folder_on_a_full_disk", "advisor/harness/parent.py `run_trial`: `_trial_dir()` and the "
     "`trial.json` write raise OSError; wrap them and return `build_result(log, {'spawned': False}, ...)` with "
     "`log.decide('failed', f'cannot write the trial folder {trial_dir}: {exc.strerror}')`."),
    ("enormous-int", "advisor/space.py `_number`: `math.isfinite(10**400)` raises OverflowError; treat an int "
     "that does not fit a float as out of range (`try: finite = math.isfinite(value) except OverflowError`)."),
    ("laughs-in-a-printed-value", "advisor/space.py: error messages print the offending value with `{x!r}`, "
     "which expands YAML aliases: a 1.3 KB file gives a 1.9 MB error line (a 50-way, 5-level one exhausts "
     "2 GB). Print values through a bounded `reprlib.Repr(maxlevel=2, maxlist=4, maxstring=40)`."),
    ("relative_dataset_path", "advisor/cli/measure.py and advisor/cli/tune.py: a relative `--dataset x.npz` or "
     "`--data-dir` is resolved in the trial's own folder and reported missing; resolve both with "
     "`Path(...).resolve()` before building the Workload (or have run_trial resolve them)."),
    ("files-a-list", "advisor/surrogate/io.py `load`: a meta.json whose `files` is not a mapping of mappings "
     "raises AttributeError; check the shape and raise SurrogateError('Surrogate meta ... is corrupt: ...')."),
    ("files-names-not-maps", "same as files-a-list (advisor/surrogate/io.py `load`)."),
    ("model-garbage-text", "advisor/surrogate/io.py `load`: LightGBM's C++ code prints `[LightGBM] [Fatal] ...` "
     "straight to fd 2 before raising, so stderr has two lines; redirect fd 2 to /dev/null around "
     "`lgb.Booster(model_str=...)` (os.dup/os.dup2) or pre-check the text (`tree` header, `end of trees`)."),
    ("model-empty", "same as model-garbage-text."),
    ("deeply-nested-json-cell", "advisor/knowledge.py `_read`/`_bad_cell`: a JSON cell nested 60,000 deep raises "
     "RecursionError from json.loads; catch RecursionError with ValueError and report the cell."),
    ("zero-times-huge", "advisor/_datasets/readers.py `_parse_idx`: found by the long fuzz run. A header with a "
     "zero dimension beside huge ones declares 0 bytes, passes the size checks, and numpy's reshape raises "
     "ValueError('array is too big'); refuse any zero dimension (or check each dimension against the file "
     "size) with a DatasetFileError."),
    ("test_fuzz_regression_idx_zero_dimension", "same as zero-times-huge (the library-level regression test)."),
    ("test_gzip_bomb", "advisor/knowledge.py `_read`: `gzip.decompress(path.read_bytes())` inflates a 3 MB file to "
     "3 GiB; decompress with `zlib.decompressobj(31)` and a cap (e.g. 1 GiB), refusing larger tables in one line."),
]

SQLITE_LIMITS = """\
- **One machine.** A SQLite study is a file; only processes that can open that file (one host, or
  a network filesystem with working POSIX locks, which NFS often lacks) can join it. Several
  machines need PostgreSQL.
- **Writes serialise.** SQLite takes one database-wide write lock; every trial start, heartbeat,
  attribute write and finish of every worker waits for it. The storage opens SQLite with a 60 s
  busy timeout, so workers queue instead of failing with "database is locked", but throughput is
  bounded by one writer at a time (heartbeats add a write per running trial every 10 s).
- **File locking.** A worker killed inside a write transaction leaves a hot journal; the next
  opener rolls it back (the SIGKILL case above shows nothing is lost). Do not put the file on a
  filesystem without byte-range locks.
- **When to switch.** Beyond a handful of local workers, or with trials shorter than a second, or
  with more than one machine, use PostgreSQL (`--storage postgresql://...`), where each worker
  holds its own connection and rows lock individually."""

DOWNLOADS = """\
Covered by tests/test_datasets.py against a local HTTP server (not repeated here):
`test_download_checksum_mismatch_deletes_and_names_everything` (mismatch deletes the partial file,
the message names URL and both hashes), `test_interrupted_download_resumes_with_a_range_request`,
`test_download_restarts_when_the_server_ignores_range`, `test_bad_partial_file_is_restarted_from_scratch`
(interrupted downloads resume or restart), `test_concurrent_downloads_fetch_once` (concurrent
processes share one verified file), `test_download_verifies_and_writes_atomically`; the CLI's exit
code on a mismatch: tests/test_cli_datasets.py `test_download_checksum_mismatch_exits_1`."""


# ------------------------------------------------------------------------------------ cases


def run_cases(raw_dir: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], float]:
    records_path = raw_dir / "reliability-cases.jsonl"
    records_path.unlink(missing_ok=True)
    junit = raw_dir / "reliability-junit.xml"
    env = dict(os.environ, ADVISOR_RELIABILITY_REPORT=str(records_path))
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", *CASE_FILES, "-q", "-p", "no:cacheprovider",
                    f"--junitxml={junit}"], cwd=REPO, env=env)
    elapsed = time.monotonic() - started
    outcomes: dict[str, dict[str, Any]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        status = "pass" if failure is None and skipped is None else "skip" if failure is None else "FAIL"
        message = (failure.get("message") if failure is not None else skipped.get("message")
                   if skipped is not None else "") or ""
        outcomes[case.get("name", "")] = {"file": case.get("classname", ""), "status": status,
                                          "seconds": float(case.get("time", 0)),
                                          "message": " ".join(message.split())[:220]}
    return read_jsonl(records_path), outcomes, elapsed


# ------------------------------------------------------------------------------------- load


def run_loads(trials: int, workers: int) -> list[dict[str, Any]]:
    from test_reliability_load import run_load

    reports = []
    storages = [("sqlite", None)]
    if os.environ.get("ADVISOR_TEST_POSTGRES_URL"):
        storages.append(("postgresql", os.environ["ADVISOR_TEST_POSTGRES_URL"]))
    for kind, url in storages:
        with tempfile.TemporaryDirectory(prefix="advisor-load-") as folder:
            storage = url or f"sqlite:///{Path(folder) / 'load.db'}"
            print(f"load: {workers} workers, {trials} trials on {kind} ...", file=sys.stderr, flush=True)
            report = run_load(storage, workers=workers, n_trials=trials, folder=Path(folder), storage_kind=kind,
                              timeout_s=3600)
            reports.append(report.to_dict())
            print(f"  {report.finished} finished in {report.elapsed_s:.0f} s, {report.lock_errors} lock errors",
                  file=sys.stderr, flush=True)
    if len(storages) == 1:
        reports.append({"storage_kind": "postgresql", "skipped": "ADVISOR_TEST_POSTGRES_URL is not set"})
    return reports


# ------------------------------------------------------------------------------------- fuzz


def _fuzz_targets() -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    from hypothesis import strategies as st

    import test_datasets_hostile as tdh
    import test_reliability_hostile as trh

    docs = st.fixed_dictionaries({}, optional={k: trh._DOCS for k in
                                               ("framework", "target", "description", "params", "fixed")}) | trh._DOCS
    inner = {name: getattr(tdh, name).hypothesis.inner_test for name in (
        "test_idx_reader_never_misbehaves", "test_truncated_gzip_idx_never_misbehaves",
        "test_cifar_binary_reader_never_misbehaves", "test_cifar_python_reader_never_misbehaves")}
    return {
        "space loader: random text": (trh.check_space_text, {"text": st.text(max_size=400)}),
        "space loader: random documents": (trh.check_space_document, {"document": docs}),
        "space loader: mutated built-in files": (trh.check_space_text, {"text": trh.mutated_space()}),
        "IDX reader: random/truncated/mutated": (inner["test_idx_reader_never_misbehaves"],
                                                 {"data": tdh.idx_like(), "compress": st.booleans()}),
        "IDX reader: truncated gzip": (inner["test_truncated_gzip_idx_never_misbehaves"],
                                       {"prefix": st.integers(0, 400), "valid": st.booleans()}),
        "CIFAR-10 binary reader": (inner["test_cifar_binary_reader_never_misbehaves"], {"data": tdh.cifar_like()}),
        "CIFAR-10 python reader (restricted unpickler)": (inner["test_cifar_python_reader_never_misbehaves"],
                                                          {"data": tdh.pickle_like()}),
    }


def run_fuzz(examples: int) -> list[dict[str, Any]]:
    from hypothesis import HealthCheck, given, reporting, settings

    out = []
    for name, (check, strategies) in _fuzz_targets().items():
        count = {"n": 0, "outcomes": {}}

        def body(**kwargs: Any) -> None:
            count["n"] += 1
            kind = check(**kwargs)
            if isinstance(kind, str):
                count["outcomes"][kind] = count["outcomes"].get(kind, 0) + 1

        test = settings(max_examples=examples, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck))(given(**strategies)(body))
        notes: list[str] = []
        started = time.monotonic()
        print(f"fuzz: {name} ({examples} examples) ...", file=sys.stderr, flush=True)
        with reporting.with_reporter(notes.append):
            try:
                test()
                failure = ""
            except Exception as exc:  # noqa: BLE001 - a falsified property is the finding
                failure = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                notes.extend(str(n) for n in getattr(exc, "__notes__", ()))  # Hypothesis's falsifying example
        out.append({"target": name, "examples": count["n"], "seconds": time.monotonic() - started,
                    "outcomes": count["outcomes"], "failure": failure,
                    "falsifying": " ".join(" ".join(notes).split())[:400] if failure else ""})
    return out


# ----------------------------------------------------------------------------------- report


def _lookup(outcomes: dict[str, dict[str, Any]], fragment: str) -> list[tuple[str, dict[str, Any]]]:
    return [(k, v) for k, v in outcomes.items() if fragment in k]


def write_report(records: list[dict[str, Any]], outcomes: dict[str, dict[str, Any]], cases_s: float,
                 loads: list[dict[str, Any]], fuzz: list[dict[str, Any]], path: Path) -> None:
    lines = ["# Reliability and security: faults, load and hostile input", "",
             f"Generated by `{command_line()}` on {_dt.date.today().isoformat()} at commit {git_rev()}",
             f"(plus uncommitted work). Machine: {machine_line().split('. ')[0]}.", "",
             "Two knowledge-base collectors (and other engineers' tests) ran on the same two cores throughout,",
             "so rates are lower bounds and durations are upper bounds.", ""]

    passed = sum(v["status"] == "pass" for v in outcomes.values())
    failed = [k for k, v in outcomes.items() if v["status"] == "FAIL"]
    skipped = [k for k, v in outcomes.items() if v["status"] == "skip"]
    unexplained = [k for k in failed if not any(f in k for f, _ in KNOWN_DEFECTS)]
    lost = sum(int(r.get("lost", 0)) for r in records) + sum(int(r.get("duplicated", 0)) for r in records)
    lost += sum(int(r.get("duplicated", 0)) for r in loads if "skipped" not in r)
    lines += ["## Summary", "",
              f"CI cases ({', '.join(CASE_FILES)}): {len(outcomes)} run in {cases_s:.0f} s, {passed} pass, "
              f"{len(failed)} fail, {len(skipped)} skipped. "
              + ("Every failure is a defect found in a module outside this issue's files; each is listed with "
                 "its fix under *Open defects*. " if failed and not unexplained else
                 f"{len(unexplained)} failures are not analysed (listed under *Open defects*). " if failed else "")
              + ("Nothing was lost or duplicated in any fault or load case." if lost == 0 else
                 f"{lost} trials were lost or duplicated: see the tables."), ""]

    # faults with trial counts
    fault_rows = []
    for r in records:
        if "before" in r:
            fault_rows.append([r["case"], r["action"], r["outcome"], r["before"], r["after"], r["lost"],
                               r["duplicated"]])
    lines += ["## Faults during tuning", "",
              "`before`: finished trials in the storage just before the fault (for the garbage case, none);",
              "`after`: finished trials after recovery/resume; `lost`: trials complete before the fault that",
              "are missing after; `duplicated`: trial ids recorded twice.", "",
              md_table(["case", "what was done", "outcome", "before", "after", "lost", "duplicated"], fault_rows),
              ""]
    refs = [("SIGTERM to a one-worker `advisor tune`", "tests/test_tuning.py::test_sigterm_keeps_finished_trials_and_the_study_resumes"),
            ("SIGKILL of a worker mid-trial on PostgreSQL", "tests/test_distributed.py::test_two_workers_one_killed_mid_trial"),
            ("SIGKILL of run_trial's parent: no orphan", "tests/test_harness.py::test_child_dies_when_the_parent_is_killed"),
            ("garbage / huge lines on the progress channel", "tests/test_harness.py::test_hostile_event_channel_fails_the_trial_with_bounded_memory")]
    lines += ["Covered by other suites (outcome asserted there, not repeated):", ""]
    lines += [f"- {what}: `{where}`" for what, where in refs] + [""]

    disk = [r for r in records if r["case"].startswith("disk full")]
    if disk:
        rows = []
        for r in disk:
            if "previous_intact" in r:
                rows.append([r["case"], r["exit_code"], "yes" if r["previous_intact"] else "NO",
                             ", ".join(r["leftovers"]) or "none", r["stderr_lines"], r["last_line"]])
            else:
                rows.append([r["case"], "-", "-", "-", "-", r.get("raised") or f"status {r.get('status')}: "
                             f"{r.get('error')}"])
        lines += ["### Disk full", "",
                  "`rlimit`: RLIMIT_FSIZE of 512 bytes in the subprocess (writes fail with EFBIG); `tmpfs`: a",
                  "256 KiB tmpfs filled to the last byte (ENOSPC). Trial counts do not apply; what matters is",
                  "that the previous file survives and nothing partial is left.", "",
                  md_table(["case", "exit", "previous intact", "left beside it", "stderr lines", "last stderr line"],
                           rows), ""]

    # load
    load_rows, notes = [], []
    for r in loads:
        if "skipped" in r:
            notes.append(f"- {r['storage_kind']}: skipped ({r['skipped']}).")
            continue
        load_rows.append([r["storage_kind"], r["workers"], r["n_trials"], r["finished"], r["complete"], r["pruned"],
                          r["failed"], r["trials"], r["distinct_numbers"], r["distinct_ids"], r["duplicated"],
                          r["overshoot"], r["lock_errors"], f"{r['elapsed_s']:.0f}", r["trials_per_minute"],
                          " ".join(map(str, r["exit_codes"]))])
    ci = [r for r in records if r["case"].startswith("load:")]
    lines += ["## Load", "",
              "Eight `advisor worker` processes on one study; each trial is `synthetic:8x8x1`, scikit-learn MLP,",
              "one epoch, 64 training samples, one thread (about 1.5 CPU-seconds, most of it the trial process",
              "importing scikit-learn). Random sampler. `finished` = complete + pruned + failed; `trials` = rows",
              "in the storage; `numbers`/`ids` = distinct Optuna numbers / distinct `advisor.result` trial ids;",
              "`over` = finished beyond the budget (workers that saw one trial missing at the same moment);",
              "lock errors are occurrences of \"database is locked\" in the worker logs.", "",
              md_table(["storage", "workers", "budget", "finished", "complete", "pruned", "failed", "trials",
                        "numbers", "ids", "duplicated", "over", "lock errors", "seconds", "trials/min", "exit codes"],
                       load_rows)]
    lines += notes + [""]
    if ci:
        lines += ["The CI version (tests/test_reliability_load.py) ran in the same session. With a budget this",
                  "small, several of the eight workers reach the last trials together, which shows the budget",
                  "overshoot described under *Open defects* (nothing is duplicated: the extra trials are new ones):",
                  "",
                  md_table(["storage", "workers", "budget", "finished", "over", "duplicated", "lock errors",
                            "trials/min"],
                           [[r["storage_kind"], r["workers"], r["n_trials"], r["finished"], r["overshoot"],
                             r["duplicated"], r["lock_errors"], r["trials_per_minute"]] for r in ci]), ""]
    lines += ["### Limits of SQLite", "", SQLITE_LIMITS, ""]

    # hostile
    host = [r for r in records if "first_line" in r]
    rows, seen = [], set()
    for r in host:
        status = outcomes.get(r["case"], {}).get("status", "?")
        command = " ".join(r["argv"].split()[:2])
        line = re.sub(r"/tmp/pytest-of-\w+/pytest-\w+/[^/ ]+", "TMP", r["first_line"])
        key = (r["case"], command, line)
        if key in seen:
            continue
        seen.add(key)
        case = re.sub(r"-<lambda>-.*\]$", "]", r["case"]).replace("|", "/")
        rows.append([case, command, status, r["exit_code"], r["stderr_lines"], "yes" if r["traceback"] else "no",
                     f"{r['longest_line']:,}", line[:100].replace("|", "/")])
    lines += ["## Hostile input", "",
              "Each row is one command run on a hostile input (several per case). Required: exit != 0, one",
              "stderr line, no traceback, no marker file from a payload, previous files unchanged (the tests",
              "assert the last two; a row here shows what the command printed).", "",
              md_table(["case", "command", "test", "exit", "stderr lines", "traceback", "longest line",
                        "first stderr line (TMP = the test's folder)"], rows), "",
              "Shell metacharacters (`;`, `$(...)`, backticks, `&&`, `|`) in `--storage` and `--study` never reach",
              "a shell: names and URLs travel only in argv lists. A URL with them either names a folder that",
              "does not exist (one-line error) or a file literally called `$(touch pwned).db`; a study called",
              "`$(touch pwned); ...` is stored under that literal name. No marker file was created in any case.",
              "",
              "`tests/test_security_grep.py` (run above: "
              + ", ".join(f"{k} {v['status']}" for k, v in outcomes.items() if "forbidden" in k or "planted" in k)
              + ") proves there is no pickle.load, yaml.load without SafeLoader, eval/exec, os.system,",
              "shell=True or allow_pickle=True in advisor/.", ""]

    # fuzz
    rows = [[f["target"], f["examples"], f"{f['seconds']:.0f}",
             ", ".join(f"{k} {v}" for k, v in sorted(f["outcomes"].items())) or "-",
             f["failure"] or "none"] for f in fuzz]
    lines += ["## Fuzzing", "",
              "Hypothesis, no example database, a fresh random seed. Property: the loader returns a valid",
              "SearchSpace (which then samples configs that build) or raises one SearchSpaceError line of at",
              "most 2,000 characters naming the file; the readers return arrays no larger than the file or",
              "raise one DatasetFileError line naming the file, without a large allocation. CI runs the same",
              "properties with 200 derandomised examples each.", "",
              md_table(["target", "examples", "seconds", "outcomes", "failure"], rows), ""]
    for f in fuzz:
        if f["failure"]:
            lines += [f"- falsifying input for {f['target']}: `{f['falsifying']}`"]
    lines += ["", "## Downloads", "", DOWNLOADS, ""]

    # defects
    lines += ["## Open defects (failing tests) and their fixes", ""]
    explained = set()
    for fragment, text in KNOWN_DEFECTS:
        hits = [k for k in failed if fragment in k]
        if hits:
            explained.update(hits)
            lines.append(f"- `{'`, `'.join(hits)}`: {text}")
    for k in failed:
        if k not in explained:
            lines.append(f"- `{k}` (not analysed here): {outcomes[k]['message']}")
    if not failed:
        lines.append("None: every case passes.")
    lines += ["", "Found without a failing test (the tests allow it, bounded):", "",
              "- Budget overshoot: docs/tuning.md says a study ends with exactly N counted trials, but workers",
              "  that check the count at the same moment each start the one missing trial, so a study can end",
              "  with up to workers - 1 extra (seen when two workers resume a study one trial short; the `over`",
              "  column above shows it under load). Fix in advisor/_tuning/_study.py `make_objective`: on entry,",
              "  count finished + running trials with a lower number (superseded retries excluded); if that",
              "  meets the budget, record the trial FAIL with `advisor.surplus = true` before training, and have",
              "  `_read.count_trials` leave surplus trials out of `finished` (as it does retried ones).",
              "", "Fixed during this work (advisor/_tuning/, after its owner finished): a PostgreSQL restart",
              "used to kill `advisor worker` with a 60-line traceback (Optuna's `_run_trial` ends in",
              "UnboundLocalError when the database is down) and to end the heartbeat thread. Now trial",
              "results are written with retries, the worker loop waits up to 120 s for the database and then",
              "stops with one line, and a failed heartbeat is logged and retried. And a worker started by a",
              "parent that ignores SIGINT (nohup, a background job) now still stops on the parent's SIGINT",
              "instead of being killed mid-trial after 30 s, which left its trial RUNNING.", ""]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-trials", type=int, default=208, help="trials per load study (200+)")
    parser.add_argument("--load-workers", type=int, default=8)
    parser.add_argument("--fuzz-examples", type=int, default=20000, help="examples per fuzz target")
    parser.add_argument("--skip-cases", action="store_true", help="reuse the last case records")
    parser.add_argument("--reuse-load-fuzz", action="store_true", help="reuse the last load and fuzz results")
    parser.add_argument("--out", type=Path, default=RESULTS / "reliability.md")
    args = parser.parse_args()

    raw = RESULTS / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    if args.skip_cases:
        saved = json.loads((raw / "reliability-cases.json").read_text())
        records, outcomes, cases_s = saved["records"], saved["outcomes"], saved["seconds"]
    else:
        records, outcomes, cases_s = run_cases(raw)
        (raw / "reliability-cases.json").write_text(json.dumps(
            {"records": records, "outcomes": outcomes, "seconds": cases_s}, indent=1, default=str))
    if args.reuse_load_fuzz:
        saved = json.loads((raw / "reliability-load-fuzz.json").read_text())
        loads, fuzz = saved["load"], saved["fuzz"]
    else:
        loads = run_loads(args.load_trials, args.load_workers) if args.load_trials > 0 else []
        fuzz = run_fuzz(args.fuzz_examples) if args.fuzz_examples > 0 else []
        (raw / "reliability-load-fuzz.json").write_text(json.dumps({"load": loads, "fuzz": fuzz}, indent=1,
                                                                   default=str))
    write_report(records, outcomes, cases_s, loads, fuzz, args.out)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
