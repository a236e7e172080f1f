"""Benchmark: the test suite's own time (issue 21: the full suite under 8 minutes on a quiet 2-core machine,
the fast tier under 2). Runs pytest the way `make test` and `make check` do, each tier once per `--workers`
value given, one after the other, and writes the page of measured figures (docs/figures/test-suite.md).

Each row: the pytest command, its wall time, its CPU (user + system of pytest and every process it started,
servers and subprocesses included), the 1-minute load average sampled every 0.5 s while it ran (mean and
range: the machine is shared; a loaded run says so), and pytest's own summary line. Runs in the same
invocation are comparable with each other; a row from another day or machine is not. The tiny models, Label
Studio's initialised data and the converted SmolLM2 are cached in ~/.cache/fsb-tests: the page says whether
the cache was warm when the run started (a cold cache adds the one-time builds; CI starts cold).

    python benchmarks/bench_suite.py [--workers 2 0] [--tiers full fast] [--out docs/figures/test-suite.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_from_file import LoadSampler

REPO = Path(__file__).resolve().parents[1]
FAST = "not (slow or release or model or server or labelstudio)"


def pytest_command(tier: str, workers: int) -> list[str]:
    """The pytest command of `make test` (tier full) or `make check` (tier fast), on `workers` xdist workers
    (0: one process, as before issue 21)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if workers:
        cmd += ["-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder"]
    if tier == "fast":
        cmd += ["-m", FAST]
    return cmd


def cache_state() -> str:
    root = Path(os.environ.get("FSB_TEST_CACHE") or Path.home() / ".cache" / "fsb-tests")
    built = sorted(p.name.split("-")[0] for p in root.glob("*") if (p / ".complete").is_file()) if root.is_dir() else []
    return f"warm ({', '.join(sorted(set(built)))})" if built else "cold (nothing cached)"


def timed(cmd: list[str]) -> dict[str, object]:
    """Wall and CPU seconds, load samples and pytest's last line of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with LoadSampler() as load:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    lines = [line for line in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    summary = lines[-1].strip("= ") if lines else f"exit {proc.returncode}"
    return {"wall": wall, "cpu": cpu, "load": load.samples or [0.0], "summary": summary}


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2], help="xdist workers per run (make's TEST_WORKERS); 0 = one process")
    parser.add_argument("--tiers", nargs="+", default=["full", "fast"], choices=["full", "fast"])
    parser.add_argument("--out", type=Path, help="write the page here, e.g. docs/figures/test-suite.md")
    args = parser.parse_args()
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    cache = cache_state()
    rows = []
    for tier in args.tiers:
        for workers in args.workers:
            cmd = pytest_command(tier, workers)
            print(f"[bench_suite] {tier}, {workers or 1} process(es): {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
            got = timed(cmd)
            load = got["load"]
            rows.append(
                f"| {tier} | {workers or 'none (one process)'} | {minutes(got['wall'])} | {got['cpu']:.0f} s | "
                f"{sum(load) / len(load):.2f} ({min(load):.2f}-{max(load):.2f}) | {got['summary']} |"
            )
            print(rows[-1], flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()
    page = "\n".join(
        [
            "# The test suite's time, measured",
            "",
            f"Written by `benchmarks/bench_suite.py` (started {started}, commit {commit}) on {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, {platform.machine()}. Test cache at the start: {cache}.",
            "Wall is what a developer waits; CPU is user + system seconds of pytest and every process it started; load",
            "is the 1-minute load average while the run went (mean and range over samples every 0.5 s): on a shared",
            "machine a loaded run's wall time says as much about the load as about the suite. `full` is `make test`'s",
            "pytest command (without the lint that precedes it), `fast` is `make check`'s tier; workers are pytest-xdist",
            "processes (`--dist loadfile`: a module at a time, costliest first, tests/conftest.py), as `make`'s TEST_WORKERS.",
            "",
            "| tier | xdist workers | wall | CPU | load | pytest's summary |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    if args.out:
        args.out.write_text(page, encoding="utf-8")
        print(f"[bench_suite] wrote {args.out}", file=sys.stderr)
    else:
        print(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
