"""Benchmark: the commands users run, from the file (`fsb score` counting and MaxDiff, with and without
intervals, with integer and with string ids; `fsb reliability`; `fsb tuples`), interleaved with the NRC
Perl scripts when $FSB_PERL_BWS names their folder (never part of this repository) and, with
`--baseline SRC`, with another checkout of fsb (its `build/` folder) run the same way.

Why interleaved: on a shared machine the load moves by the minute. Every contestant of a size runs once
per round, in the order A, B, C in even rounds and C, B, A in odd ones, for `--rounds` rounds; the table
gives the median and the spread (min-max) over the rounds, CPU (user + system, from /usr/bin/time) beside
wall, peak resident memory, and the mean 1-minute load average sampled every 0.5 s during each
contestant's runs (the machine's load around them, not a figure of the run). Ratios against another
contestant (perl/fsb, baseline/fsb: > 1 means fsb is faster) are ratios of this run's medians (never a
figure from an earlier run). CPU is the fair measure on a loaded machine; wall includes the waiting.
Commands run one after another unless `--interleave-commands` puts all of a size's commands in the same
rounds: then a string-id command's "/integer ids" ratios (> 1 means string ids cost more) are taken round
by round, side by side, and given as the median and range of the rounds' ratios; without it, or when a
round failed, they compare medians and say so. Size N means N items: 2N tuples, 6N judgments.

Before timing, both checkouts' modules are compiled to bytecode (`python -m compileall -q <build folder>`,
as an installed wheel ships .pyc files): with PYTHONDONTWRITEBYTECODE=1, as on this machine, every run
would otherwise compile fsb's modules again (about 0.05 s of CPU per run, most of a small file's time).

Files (per size N): a 2N-tuple design (8 rounds of a random permutation cut into 4-tuples: each item in
8 tuples; made here, not by fsb, so that every checkout reads the same file), 3
judgments per tuple by Gumbel-noise (MaxDiff) judges, integer ids that are not 1..N (distinct random
ids below 2**31) and, for the `*-str` commands, the same file with 7-character base-36 string ids
(like Reddit comment ids, `cza1q49`).

    python benchmarks/bench_from_file.py --sizes 10000 100000 --rounds 3
    FSB_PERL_BWS=/path/to/scripts/BWS python benchmarks/bench_from_file.py --sizes 1000000 --rounds 1 \
        --commands score score-str maxdiff maxdiff-ci tuples --out docs/figures/speed.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).parent
COMMANDS = ["score", "score-str", "score-hash", "reliability", "tuples", "maxdiff", "maxdiff-str", "ci", "maxdiff-ci"]
LABELS = {
    "score": "score (counting)",
    "score-str": "score (counting), string ids",
    "score-hash": "score (counting), 40-character hash ids",
    "reliability": "reliability (100 trials)",
    "tuples": "tuples (2N 4-tuples, k=8)",
    "maxdiff": "score --method maxdiff",
    "maxdiff-str": "score --method maxdiff, string ids",
    "ci": "score --ci (200 resamples)",
    "maxdiff-ci": "maxdiff --ci (200 resamples)",
}
PERL = {  # command -> (script, uses the annotations file) of the NRC reference
    "score": ("get-scores-from-BWS-annotations-counting.pl", True),
    "reliability": ("SHR-BWS.pl", True),
    "tuples": ("generate-BWS-tuples.pl", False),
}


def make_files(folder: Path, n: int, seed: int = 0) -> dict[str, Path]:
    """The judgments file with integer ids, the same with 7-character base-36 ids (Reddit's comment ids; up to 8
    bytes fsb packs into integer keys) and with 40-character hex ids (SHA-1 digests: longer than 8 bytes, the
    hashed path), and an items list (for Perl's tuples)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    ids = rng.choice(2**31 - 1, size=n, replace=False).astype(np.int64) + 1
    alphabet = np.array(list("0123456789abcdefghijklmnopqrstuvwxyz"))
    sids = np.array(["".join(r) for r in alphabet[rng.integers(10, 36, size=(n, 1))].tolist()])  # a letter first
    sids = np.char.add(sids, np.array(["".join(r) for r in alphabet[rng.integers(0, 36, size=(n, 6))].tolist()]))
    while np.unique(sids).size < n:  # vanishingly rare at 36**6: re-draw duplicates
        dup = np.ones(n, bool)
        dup[np.unique(sids, return_index=True)[1]] = False
        sids[dup] = np.char.add("z", sids[dup])
    truth = rng.normal(size=n)
    design = np.concatenate([rng.permutation(n)[: n - n % 4].reshape(-1, 4) for _ in range(8)])  # fsb-independent
    ti = np.repeat(np.arange(design.shape[0]), 3)
    shown = design[ti]
    u = truth[shown] + rng.gumbel(size=shown.shape)
    rows = np.arange(ti.size)
    code = {f"Item{j + 1}": shown[:, j] for j in range(4)}
    code |= {"BestItem": shown[rows, u.argmax(1)], "WorstItem": shown[rows, u.argmin(1)]}
    out = {kind: folder / f"annotations{suffix}-{n}.csv" for kind, suffix in (("ann", ""), ("ann-str", "-str"), ("ann-hash", "-hash"))}
    opts = pacsv.WriteOptions(quoting_style="none")
    pacsv.write_csv(pa.table({k: ids[v] for k, v in code.items()}), out["ann"], write_options=opts)
    pacsv.write_csv(pa.table({k: pa.array(sids[v]) for k, v in code.items()}), out["ann-str"], write_options=opts)
    hexes = np.array([hashlib.sha1(str(i).encode()).hexdigest() for i in ids.tolist()])
    pacsv.write_csv(pa.table({k: pa.array(hexes[v]) for k, v in code.items()}), out["ann-hash"], write_options=opts)
    out["items"] = folder / f"items-{n}.txt"
    out["items"].write_text("\n".join(map(str, ids.tolist())) + "\n")
    return out


class LoadSampler:
    """Mean of the 1-minute load average, sampled every 0.5 s while the `with` block runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append(float(Path("/proc/loadavg").read_text().split()[0]))
            self._stop.wait(0.5)

    def __enter__(self) -> LoadSampler:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> dict[str, float] | None:
    """Wall, CPU (user+sys) seconds, peak RSS (MB) and mean load of one command, or None when it failed."""
    stats = cwd / "time.txt"
    full = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(stats), *cmd]
    with LoadSampler() as load:
        try:
            proc = subprocess.run(full, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
        except subprocess.TimeoutExpired:
            print(f"  ({' '.join(cmd[:4])}... timed out after {timeout:.0f} s)", file=sys.stderr)
            return None
    if proc.returncode != 0:
        print(f"  ({' '.join(cmd[:4])}... failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode})", file=sys.stderr)
        return None
    wall, user, system, rss = stats.read_text().split()[-4:]
    return {
        "wall": float(wall),
        "cpu": float(user) + float(system),
        "rss": int(rss) / 1024,
        "load": statistics.fmean(load.samples or [0.0]),
    }


def contestants(name: str, files: dict[str, Path], n: int, args: argparse.Namespace) -> dict[str, tuple[list[str], dict | None]]:
    """The variants of one command at one size: fsb (this checkout), the baseline checkout, the Perl script."""
    ann = str(files["ann-str" if name.endswith("-str") else "ann-hash" if name.endswith("-hash") else "ann"])
    argv = {
        "score": ["score", ann, "--out", "s.csv", "--force"],
        "score-str": ["score", ann, "--out", "s.csv", "--force"],
        "score-hash": ["score", ann, "--out", "s.csv", "--force"],
        "reliability": ["reliability", ann, "--trials", "100"],
        "tuples": ["tuples", str(n), "--out", "t.csv", "--force"],
        "maxdiff": ["score", ann, "--method", "maxdiff", "--out", "m.csv", "--force"],
        "maxdiff-str": ["score", ann, "--method", "maxdiff", "--out", "m.csv", "--force"],
        "ci": ["score", ann, "--ci", "--bootstrap", "200", "--out", "c.csv", "--force"],
        "maxdiff-ci": ["score", ann, "--method", "maxdiff", "--ci", "--bootstrap", "200", "--out", "c.csv", "--force"],
    }[name]
    main = [sys.executable, "-c", "import sys; from fsb.cli import main; sys.exit(main())"]
    out: dict[str, tuple[list[str], dict | None]] = {"fsb": ([*main, *argv], None)}
    if args.baseline and name in args.baseline_commands:
        out["baseline"] = ([*main, *argv], {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())})
    perl = os.environ.get("FSB_PERL_BWS")
    if perl and name in PERL and n <= args.perl_max.get(name, 0):
        script, on_file = PERL[name]
        out["perl"] = (["perl", "-I", perl, str(Path(perl) / script), ann if on_file else str(files["items"]), "p.csv"], None)
    return out


def package_folder() -> Path | None:
    """The folder holding this checkout's `fsb` package (its `build/`), found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("fsb")
    return Path(spec.origin).resolve().parent.parent if spec is not None and spec.origin else None


def compile_checkouts(args: argparse.Namespace) -> list[str]:
    """Compile this checkout's and the baseline's modules to bytecode (`compileall`, this interpreter), so
    that no timed run pays for compiling them; one line per folder saying what was done."""
    folders = [("fsb", package_folder()), ("baseline", Path(args.baseline).resolve() if args.baseline else None)]
    notes = []
    for variant, folder in folders:
        if folder is None:
            continue
        proc = subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder)], capture_output=True, text=True, check=False)
        done = "compiled" if proc.returncode == 0 else f"NOT compiled (compileall exit {proc.returncode}: every run compiles it)"
        notes.append(f"{variant}: `{folder}` {done}")
    return notes


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    """Medians and min-max spreads over the rounds."""
    out: dict[str, float] = {"rounds": len(runs)}
    for key in ("wall", "cpu", "rss", "load"):
        vals = [r[key] for r in runs]
        out[key], out[key + "_min"], out[key + "_max"] = statistics.median(vals), min(vals), max(vals)
    return out


def bench_size(n: int, work: Path, args: argparse.Namespace) -> list[dict]:
    """Every contestant of every command at size n, interleaved over the rounds; one row each. With
    `--interleave-commands`, the commands' contestants all run in one interleaved round (so a ratio between
    commands, string ids against integer ids, is measured side by side too)."""
    files = make_files(work, n)
    rounds = args.rounds if n < 1_000_000 else args.rounds_1e6
    groups = [args.commands] if args.interleave_commands else [[name] for name in args.commands]
    rows: list[dict] = []
    for group in groups:
        variants = {(name, v): spec for name in group for v, spec in contestants(name, files, n, args).items()}
        runs: dict[tuple[str, str], list[dict[str, float]]] = {key: [] for key in variants}
        failed = dict.fromkeys(variants, 0)
        order = list(variants)
        for r_index in range(rounds):
            # A, B, C then C, B, A: no contestant always runs first (a warm page cache, a quieter minute)
            for key in order if r_index % 2 == 0 else order[::-1]:
                cmd, env = variants[key]
                # each contestant writes in a folder of its own: fsb's records (.fsb-files.json) carry a mark since
                # issue 32, and an older fsb's unmarked record beside them is refused, not trusted
                (work / key[1]).mkdir(exist_ok=True)
                r = run(cmd, work / key[1], args.timeout, env)
                if r is None:
                    failed[key] += 1
                else:
                    runs[key].append(r)
        together = len(group) > 1
        new = [
            {"n": n, "command": name, "variant": v, **summary(rs), "cpus": [r["cpu"] for r in rs], "interleaved": together}
            | {"failed": failed[(name, v)]}
            for (name, v), rs in runs.items()
            if rs
        ]
        for (name, v), rs in runs.items():  # a contestant that never finished is a row too: a missing reference is visible
            if not rs:
                new.append({"n": n, "command": name, "variant": v, "failed": failed[(name, v)]})
        rows += new
        for row in new:
            print(_line(row, rows), flush=True)
    for f in files.values():
        f.unlink()
    return rows


def _ratio(row: dict, rows: list[dict], variant: str) -> str:
    ref = next((r for r in rows if r["n"] == row["n"] and r["command"] == row["command"] and r["variant"] == variant), None)
    if ref is None or row["variant"] == variant or "cpu" not in ref:
        return ""
    return f"{variant}/fsb CPU {ref['cpu'] / row['cpu']:.2f}x, wall {ref['wall'] / row['wall']:.2f}x"


def _against_integer_ids(row: dict, rows: list[dict]) -> str:
    """A string-id row's CPU and peak memory over the integer-id row of its variant (> 1: string ids cost
    more): per round when they ran interleaved and every round finished (median and range of the rounds'
    ratios), else the ratio of medians, said so."""
    base = {"score-str": "score", "score-hash": "score", "maxdiff-str": "maxdiff"}.get(row["command"])
    ref = next((r for r in rows if r["n"] == row["n"] and r["command"] == base and r["variant"] == row["variant"] and "cpu" in r), None)
    if ref is None or "cpu" not in row:
        return ""
    mine, theirs = row.get("cpus", []), ref.get("cpus", [])
    memory = f"peak memory {row['rss'] / ref['rss']:.2f}x"
    if row.get("interleaved") and len(mine) == len(theirs) > 0:
        per_round = [a / b for a, b in zip(mine, theirs)]
        spread = f"{min(per_round):.2f}-{max(per_round):.2f}"
        return f"/integer ids: CPU {statistics.median(per_round):.2f}x ({spread}, {len(per_round)} rounds side by side), {memory}"
    return f"/integer ids: CPU {row['cpu'] / ref['cpu']:.2f}x (medians, not side by side), {memory}"


def _failures(row: dict) -> str:
    return f" ({row['failed']} failed or timed out)" if row.get("failed") else ""


def _line(row: dict, rows: list[dict]) -> str:
    if "cpu" not in row:
        return (
            f"| {row['n']:.0e} | {LABELS[row['command']]} | {row['variant']} | failed or timed out "
            f"in all {row['failed']} rounds (see the command's --timeout) | | | | 0 | |"
        )
    ratios = "; ".join(x for x in (_ratio(row, rows, "perl"), _ratio(row, rows, "baseline")) if x) if row["variant"] == "fsb" else ""
    ratios = "; ".join(x for x in (ratios, _against_integer_ids(row, rows)) if x)
    return (
        f"| {row['n']:.0e} | {LABELS[row['command']]} | {row['variant']} | "
        f"{row['cpu']:.2f} ({row['cpu_min']:.2f}-{row['cpu_max']:.2f}) | {row['wall']:.2f} ({row['wall_min']:.2f}-{row['wall_max']:.2f}) | "
        f"{row['rss']:.0f} | {row['load']:.2f} ({row['load_min']:.2f}-{row['load_max']:.2f}) | {row['rounds']}{_failures(row)} | {ratios} |"
    )


def machine() -> str:
    """What the run was on: CPU model, cores, memory, OS, Python and numpy versions."""
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")), "?")
    mem = next((ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")), "0")
    return (
        f"{model}, {os.cpu_count()} cores, {int(mem) / 2**20:.1f} GB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )


def write_table(path: Path, rows: list[dict], args: argparse.Namespace, started: str, compiled: list[str]) -> None:
    """The page of measured figures: what was run, on what machine, when, and the table."""
    head = [
        "# Speed: fsb from the file, measured",
        "",
        f"Run {started} to {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {machine()}.",
        f"Command: `{' '.join(shlex.quote(a) for a in sys.argv)}`"
        + (" with FSB_PERL_BWS set (the NRC Perl scripts)" if os.environ.get("FSB_PERL_BWS") else ""),
        "",
        f"Items N: 2N tuples, 6N judgments. Contestants of a size run interleaved for the rounds shown (A, B, C, then "
        f"C, B, A, ...); cells are the median and (min-max) over the rounds. CPU = user + system seconds of the process; "
        f"peak = max resident MB (median); load = mean 1-minute load average during the runs ({os.cpu_count()} cores: "
        f"the machine around them, not a figure of the run). Ratios against another contestant are ratios of this "
        f"run's medians: perl/fsb or baseline/fsb > 1 means fsb is faster. `baseline` = {args.baseline or 'not run'}. "
        + (
            "All commands of a size ran in the same rounds (--interleave-commands): '/integer ids' (> 1: string ids cost "
            "more) gives CPU as the median and range of the rounds' ratios, and peak memory as a ratio of medians."
            if args.interleave_commands
            else "Commands ran one after another: '/integer ids' (> 1: string ids cost more) compares medians taken minutes apart."
        ),
        "",
        "Before timing, each checkout's modules were compiled to bytecode with this interpreter "
        f"(`python -m compileall -q <build folder>`, as an installed wheel ships .pyc): {'; '.join(compiled) or 'no folder found'}. "
        "PYTHONDONTWRITEBYTECODE=1 would otherwise make every run compile them again.",
        "",
        "| items | command | variant | CPU s | wall s | peak MB | load | rounds | ratio (same run) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(head + [_line(r, rows) for r in rows]) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark the commands users run, from the file, interleaved with the NRC Perl scripts and another checkout.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="items N (2N tuples, 6N judgments)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds below 1e6 items")
    parser.add_argument("--rounds-1e6", type=int, default=1, help="interleaved rounds at 1e6 items and more")
    parser.add_argument("--commands", nargs="+", default=COMMANDS, choices=COMMANDS)
    parser.add_argument("--baseline", help="a `build/` folder of another fsb checkout, run interleaved as 'baseline'")
    parser.add_argument("--baseline-commands", nargs="+", default=COMMANDS, choices=COMMANDS, help="commands the baseline runs")
    parser.add_argument("--perl-score-max", type=int, default=1_000_000, help="largest size for the Perl counting script")
    parser.add_argument("--perl-shr-max", type=int, default=10_000, help="largest size for the Perl SHR script (60 s at 1e4)")
    parser.add_argument("--perl-tuples-max", type=int, default=10_000, help="largest size for the Perl tuple script")
    parser.add_argument(
        "--interleave-commands",
        action="store_true",
        help="run all commands' contestants of a size in the same rounds, so that string ids are compared with integer ids "
        "round by round (without it the commands run one after another and the '/integer ids' ratio compares medians taken "
        "minutes apart)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before one run counts as failed")
    parser.add_argument("--out", type=Path, help="write the table (markdown) here, e.g. docs/figures/speed.md")
    args = parser.parse_args()
    args.perl_max = {"score": args.perl_score_max, "reliability": args.perl_shr_max, "tuples": args.perl_tuples_max}
    started = f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M}"
    compiled = compile_checkouts(args)
    print("bytecode before timing: " + ("; ".join(compiled) or "no folder found"))
    print("| items | command | variant | CPU s | wall s | peak MB | load | rounds | ratio (same run) |")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            rows += bench_size(n, Path(tmp), args)
            if args.out:
                write_table(args.out, rows, args, started, compiled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
