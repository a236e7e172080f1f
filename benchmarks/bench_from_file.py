"""Benchmark: the commands users run, from the file: `fsb score`, `fsb reliability`, `fsb tuples` and
`fsb build` at 1e3..1e6 items, each against a floor measured in the same run on the same file, and
against the NRC Perl scripts when $FSB_PERL_BWS names their folder (never part of this repository).

Files (per size N): a 2N-tuple design (each item in exactly 8 4-tuples, made by `fsb.bws.bws_design`),
3 judgments per tuple by Gumbel-noise (MaxDiff) judges, integer ids that are not 1..N (random distinct
ids below 2**31), and a generations file with one sentence per id (for `fsb build`).

Every command runs in its own subprocess under /usr/bin/time: wall, CPU (user + system) and peak
resident memory of that process. The floor is a separate process that reads the same CSV with
pyarrow (ids as int64, all cores) and tallies best, worst and appearances per id with Arrow's hash
counting: parsing is in both, so "x floor" is the price of validation, coding and output.
Growth is printed per decade (time at 10N / time at N; linear = 10).

    python benchmarks/bench_from_file.py                                   # 1e3 1e4 1e5 1e6
    FSB_PERL_BWS=/path/to/scripts/BWS python benchmarks/bench_from_file.py --sizes 1000 100000
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).parent
FLOOR = """
import sys, numpy as np, pyarrow as pa, pyarrow.csv as c, pyarrow.compute as pc
t = c.read_csv(sys.argv[1], convert_options=c.ConvertOptions(column_types={k: pa.int64() for k in
    ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"]}))
best, worst = pc.value_counts(t["BestItem"]), pc.value_counts(t["WorstItem"])
n = pc.value_counts(pa.chunked_array([ch for k in ["Item1", "Item2", "Item3", "Item4"] for ch in t[k].chunks]))
print(len(n), len(best), len(worst))
"""


def make_files(folder: Path, n: int, seed: int = 0) -> dict[str, Path]:
    """The judgments file (Item1..4,BestItem,WorstItem), the generations file and an items list for Perl."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from fsb import bws

    rng = np.random.default_rng(seed)
    ids = rng.choice(2**31 - 1, size=n, replace=False).astype(np.int64) + 1
    truth = rng.normal(size=n)
    design = bws.bws_design(n, seed=seed)
    ti = np.repeat(np.arange(design.shape[0]), 3)
    shown = design[ti]
    u = truth[shown] + rng.gumbel(size=shown.shape)
    rows = np.arange(ti.size)
    cols = {f"Item{j + 1}": ids[shown[:, j]] for j in range(4)}
    cols |= {"BestItem": ids[shown[rows, u.argmax(1)]], "WorstItem": ids[shown[rows, u.argmin(1)]]}
    ann = folder / f"annotations-{n}.csv"
    pacsv.write_csv(pa.table(cols), ann, write_options=pacsv.WriteOptions(quoting_style="none"))
    gen = folder / f"generations-{n}.csv"
    kinds = np.array(["explicit", "implicit", "neutral", "random"])
    prompts = np.array(["completion", "conversion"])
    gens = {
        "uid": ids,
        "prompt_type": prompts[np.arange(n) % 2],
        "seed_type": kinds[np.arange(n) % 4],
        "query": pa.array([f"seed {i}" for i in range(n)]),
        "response": pa.array([f"sentence number {i}" for i in range(n)]),
    }
    pacsv.write_csv(pa.table(gens), gen)
    items = folder / f"items-{n}.txt"
    items.write_text("\n".join(map(str, ids.tolist())) + "\n")
    return {"ann": ann, "gen": gen, "items": items}


def run(cmd: list[str], cwd: Path, timeout: float) -> dict[str, float] | None:
    """Wall, CPU (user+sys) seconds and peak RSS (MB) of one command, or None when it failed."""
    stats = cwd / "time.txt"
    full = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(stats), *cmd]
    try:
        proc = subprocess.run(full, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        print(f"  ({' '.join(cmd[:3])}... failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode})", file=sys.stderr)
        return None
    wall, user, system, rss = stats.read_text().split()[-4:]
    return {"wall": float(wall), "cpu": float(user) + float(system), "rss": int(rss) / 1024}


def best_of(cmd: list[str], cwd: Path, repeat: int, timeout: float) -> dict[str, float] | None:
    runs = [r for _ in range(repeat) if (r := run(cmd, cwd, timeout)) is not None]
    if not runs:
        return None
    best = min(runs, key=lambda r: r["wall"])
    return {**best, "rss": max(r["rss"] for r in runs)}


def _fmt(r: dict[str, float] | None) -> str:
    return "      --" if r is None else f"{r['wall']:7.2f}s {r['cpu']:7.2f}s {r['rss']:6.0f}MB"


GOALS = [  # (label, size, command, field, limit, kind): issue 14's goals, checked on this run's figures
    ("fsb score on 10 rows under 0.3 s", 10, "score", "wall", 0.3, "max"),
    ("fsb score at 1e5 at least 5x faster than Perl (wall)", 100_000, "score", "perl_ratio", 5.0, "min"),
    ("fsb score at 1e6 within 2x of the file floor (wall)", 1_000_000, "score", "floor_ratio", 2.0, "max"),
    ("fsb score at 1e6 under 2 GB peak", 1_000_000, "score", "rss", 2048, "max"),
    ("fsb reliability --trials 100 at 1e5 under 10 s (wall)", 100_000, "reliability", "wall", 10, "max"),
    ("fsb reliability --trials 100 at 1e6 under 2 minutes (wall)", 1_000_000, "reliability", "wall", 120, "max"),
    ("fsb reliability at 1e6 under 2 GB peak", 1_000_000, "reliability", "rss", 2048, "max"),
    ("fsb tuples at 1e6 under 60 s CPU", 1_000_000, "tuples", "cpu", 60, "max"),
    ("fsb tuples at 1e6 under 2 GB peak", 1_000_000, "tuples", "rss", 2048, "max"),
]


def print_goals(results: dict[int, dict[str, dict[str, float] | None]], tiny: dict[str, float] | None) -> None:
    """Say, goal by goal, whether this run met it; goals whose size or command was not run are skipped."""
    print("\ngoals (issue 14), on this run's figures; wall times include waiting on a loaded machine, CPU does not:")
    for label, n, name, field, limit, kind in GOALS:
        res = {"score": tiny} if n == 10 else results.get(n, {})
        r = res.get(name)
        if r is None:
            continue
        if field == "perl_ratio":
            if not res.get("perl score"):
                continue
            value, cpu = res["perl score"]["wall"] / r["wall"], res["perl score"]["cpu"] / r["cpu"]
            shown = f"{value:.1f}x (CPU {cpu:.1f}x)"
        elif field == "floor_ratio":
            if not res.get("floor"):
                continue
            value, cpu = r["wall"] / res["floor"]["wall"], r["cpu"] / res["floor"]["cpu"]
            shown = f"{value:.2f}x (CPU {cpu:.2f}x)"
        else:
            value = r[field]
            shown = f"{value:.0f} MB" if field == "rss" else f"{value:.2f} s" + (f" (CPU {r['cpu']:.2f} s)" if field == "wall" else "")
        met = value >= limit if kind == "min" else value <= limit
        print(f"  {'met   ' if met else 'MISSED'} {label}: {shown}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs (wall) per command below 1e6 items; 1 at 1e6")
    parser.add_argument("--trials", type=int, default=100, help="split-half trials for fsb reliability")
    parser.add_argument("--commands", nargs="+", default=["score", "reliability", "tuples", "build", "maxdiff", "ci", "maxdiff-ci"])
    parser.add_argument("--perl-max", type=int, default=100_000, help="run Perl counting up to this many items (its tuples at 1e3 only)")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    perl_dir = os.environ.get("FSB_PERL_BWS")
    perl = Path(perl_dir) if perl_dir else None
    fsb = str(BIN / "fsb")
    results: dict[int, dict[str, dict[str, float] | None]] = {}
    header = f"{'items':>8} {'command':<26} {'wall':>8} {'CPU':>8} {'peak':>8}  ratio"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tiny = work / "tiny.csv"
        tiny.write_text(
            "Item1,Item2,Item3,Item4,BestItem,WorstItem\n" + "".join(f"{i},{i + 1},{i + 2},{i + 3},{i},{i + 3}\n" for i in range(10))
        )
        r_tiny = best_of([fsb, "score", str(tiny)], work, 5, args.timeout)
        r_perl_tiny = (
            best_of(["perl", str(perl / "get-scores-from-BWS-annotations-counting.pl"), str(tiny), "o.csv"], work, 5, 60) if perl else None
        )
        print(f"{10:>8} {'fsb score (10 rows)':<26} {_fmt(r_tiny)}" + (f"  Perl {r_perl_tiny['wall']:.2f}s" if r_perl_tiny else ""))
        for n in args.sizes:
            files = make_files(work, n)
            repeat = 1 if n >= 1_000_000 else args.repeat
            res: dict[str, dict[str, float] | None] = {}
            res["floor"] = best_of([sys.executable, "-c", FLOOR, str(files["ann"])], work, repeat, args.timeout)
            cmds = {
                "score": [fsb, "score", str(files["ann"]), "--out", "s.csv"],
                "reliability": [fsb, "reliability", str(files["ann"]), "--trials", str(args.trials)],
                "tuples": [fsb, "tuples", str(n), "--out", "t.csv"],
                "build": [
                    fsb,
                    "build",
                    "--generations",
                    str(files["gen"]),
                    "--annotations",
                    str(files["ann"]),
                    "--out",
                    "ds",
                    "--no-record",
                ],
                "maxdiff": [fsb, "score", str(files["ann"]), "--method", "maxdiff", "--out", "m.csv"],
                "ci": [fsb, "score", str(files["ann"]), "--ci", "--bootstrap", "200", "--out", "c.csv"],
                "maxdiff-ci": [fsb, "score", str(files["ann"]), "--method", "maxdiff", "--ci", "--bootstrap", "200", "--out", "mc.csv"],
            }
            for name in args.commands:
                res[name] = best_of(cmds[name], work, repeat, args.timeout)
            if perl and n <= args.perl_max:
                res["perl score"] = best_of(
                    ["perl", str(perl / "get-scores-from-BWS-annotations-counting.pl"), str(files["ann"]), "p.csv"],
                    work,
                    repeat,
                    args.timeout,
                )
            if perl and n <= 1_000 and "tuples" in args.commands:  # 18.6 s at 1e4, 286 s at 1e5, measured once on this kind of machine
                res["perl tuples"] = best_of(["perl", str(perl / "generate-BWS-tuples.pl"), str(files["items"])], work, 1, args.timeout)
            results[n] = res
            floor = res["floor"]
            for name, r in res.items():
                ratio = ""
                if r is not None and floor is not None and name in ("score", "build", "reliability"):
                    ratio = f"{r['wall'] / floor['wall']:.2f}x floor"
                if name == "score" and r is not None and res.get("perl score"):
                    ratio += f", Perl/fsb {res['perl score']['wall'] / r['wall']:.1f}x"
                if name == "tuples" and r is not None and res.get("perl tuples"):
                    ratio += f"Perl/fsb {res['perl tuples']['wall'] / r['wall']:.1f}x"
                if name in ("maxdiff", "ci", "maxdiff-ci") and r is not None and res.get("score"):
                    ratio = f"{r['wall'] / res['score']['wall']:.2f}x fsb score (counting)"
                label = {
                    "ci": "score --ci (200 boot)",
                    "maxdiff": "score --method maxdiff",
                    "maxdiff-ci": "maxdiff --ci (200 boot)",
                    "floor": "floor (pyarrow + counts)",
                }.get(name, name)
                print(f"{n:>8.0e} {label:<26} {_fmt(r)}  {ratio}", flush=True)
            for f in files.values():
                f.unlink()
            for name in ("s.csv", "t.csv", "m.csv", "c.csv", "mc.csv", "p.csv", ".fsb-files.json"):  # each size starts clean
                (work / name).unlink(missing_ok=True)
            for d in ("ds",):
                shutil.rmtree(work / d, ignore_errors=True)
    print_goals(results, r_tiny)
    sizes = sorted(results)
    if len(sizes) > 1:
        print("\ngrowth per decade (wall at 10N / wall at N; linear = 10):")
        names = [k for k in results[sizes[0]] if all(results[s].get(k) for s in sizes)]
        for a, b in itertools.pairwise(sizes):
            if b == 10 * a:
                cells = ", ".join(f"{k} {results[b][k]['wall'] / results[a][k]['wall']:.1f}" for k in names)  # type: ignore[index]
                print(f"  {a:.0e} -> {b:.0e}: {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
