"""Benchmark: the floor that parsing alone puts under `fsb score` on string ids, against integer ids.

The judgments file with 40-character ids holds about 3.9x the bytes of the same judgments with integer ids,
and pyarrow's CSV reader must tokenise every byte. This script times pyarrow parsing the label columns of
each file and nothing else (the same options as fsb's block reader: 4 MiB blocks cut at a newline, one
thread, integers for the integer file and strings for the others), interleaved over `--rounds`, and
times `fsb score` on the integer file in the same rounds. The floor printed is

    (fsb score CPU on integer ids + parse CPU of file X - parse CPU of the integer file) / fsb score CPU on integer ids

the ratio `fsb score` on file X would reach if coding its labels cost nothing more than coding integers,
computed per round from that round's runs and printed as the median and range over the rounds.
CPU is user + system seconds of the child process (median over the rounds, with the range).

    python benchmarks/bench_parse_floor.py --folder /tmp/h23 --size 1000000 [--rounds 3]

The folder holds `annotations-N.csv`, `annotations-str-N.csv` and `annotations-hash-N.csv` as written by
`benchmarks/bench_from_file.py` (`make_files`).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PARSE = r"""
import sys
import pyarrow as pa, pyarrow.csv as pacsv
path, kind = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    names = f.readline().decode().strip().split(",")
    types = {c: pa.int64() if kind == "int" else pa.string() for c in names}
    options = (pacsv.ReadOptions(column_names=names, use_threads=False, block_size=1 << 24), pacsv.ParseOptions(),
               pacsv.ConvertOptions(column_types=types, strings_can_be_null=False))
    carry, rows = b"", 0
    while True:
        block = f.read(1 << 22)
        data = carry + block
        cut = data.rfind(b"\n") + 1 if block else len(data)
        if cut:
            rows += pacsv.read_csv(pa.BufferReader(data[:cut]), *options).num_rows
        carry = data[cut:]
        if not block:
            break
print(rows)
"""


def cpu_of(cmd: list[str]) -> float:
    """User + system CPU seconds of one child process running `cmd` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    suffixes = {"int": "", "str": "-str", "hash": "-hash"}
    files = {kind: args.folder / f"annotations{suffix}-{args.size}.csv" for kind, suffix in suffixes.items()}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        print(f"bench_parse_floor: missing {', '.join(missing)} (write them with bench_from_file.py's make_files)", file=sys.stderr)
        return 2
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as work:
        score = [sys.executable, "-m", "fsb", "score", str(files["int"]), "--out", str(Path(work) / "s.csv"), "--force"]
        for _ in range(args.rounds):
            times.setdefault("fsb score, integer ids", []).append(cpu_of(score))
            for kind, path in files.items():
                times.setdefault(f"parse {kind}", []).append(cpu_of([sys.executable, "-c", PARSE, str(path), kind]))
    med = {name: statistics.median(v) for name, v in times.items()}
    for name, v in times.items():
        print(f"{name:24s} CPU {med[name]:6.2f} s ({min(v):.2f}-{max(v):.2f}, {len(v)} rounds)")
    score = times["fsb score, integer ids"]
    for kind in ("str", "hash"):
        size = files[kind].stat().st_size / files["int"].stat().st_size
        # one floor per round (its own three runs), then their median and range
        floors = [(b + x - i) / b for b, x, i in zip(score, times[f"parse {kind}"], times["parse int"])]
        print(
            f"floor for {kind} ids: {statistics.median(floors):.2f}x ({min(floors):.2f}-{max(floors):.2f} over the rounds) "
            f"integer ids' CPU (the file is {size:.2f}x the bytes; goal 1.3x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
