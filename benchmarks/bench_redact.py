"""Benchmark: redaction (`fsb.core.secrets.redact`) of long log lines, this checkout against another.

Every log line, warning and error fsb prints goes through `redact`, so its cost on long lines (an HTTP error
echoing a body, a base64 blob, a header, an id with a long prefix) is what a run pays when things go wrong.
The key is in each case in a form `redact` removes (docs/reproducibility.md, "What is redacted"). Each case
runs in a fresh process per checkout (this one, and `--baseline BUILD`, another checkout's `build/` folder),
interleaved over `--rounds`; the CPU time of the `redact` call alone (after a warm-up call) is timed in the
child. Each line gives the median and range over the rounds and the ratio baseline/fsb (> 1: this checkout is
faster), and says whether the key is gone from the output. A run over `--timeout` seconds is shown as such.

    python benchmarks/bench_redact.py --baseline /tmp/c84043a/build [--rounds 3] [--timeout 60]

(`git archive c84043a build | tar -x -C /tmp/c84043a` makes such a folder.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

KEY = "sk-fsbADVERSARY123456"

# (name, Python expression building the text from `b` (the key's base64), `basic` (base64 of user:key), `rng`,
# base64, json, quote): long lines of the kinds fsb prints when things go wrong, the key in a form it redacts.
WORDS = '" ".join(base64.b64encode(rng.randbytes({size})).decode() for _ in range({n}))'
CASES = [
    ("64 base64 words, then the key in base64", WORDS.format(size=150, n=64) + ' + " " + b'),
    ("100 kB base64 words, then a Basic auth header", WORDS.format(size=1500, n=50) + ' + " Authorization: Basic " + basic'),
    ("100 kB base64 blob holding the key", "base64.b64encode(rng.randbytes(75000) + KEY.encode()).decode()"),
    (
        "100 kB JSON error body, the key escaped and URL-encoded",
        'json.dumps({"e": "x" * 100000, "k": KEY.replace("-", "\\u002d"), "u": quote(KEY)})',
    ),
    ("100 kB of hex, then the key in hex", 'rng.randbytes(50000).hex() + " " + KEY.encode().hex()'),
    ('"x-" * 2000 + the key in base64', '"x-" * 2000 + b'),
    ('"ab-" * 5000 + the key in base64', '"ab-" * 5000 + b'),
    ("100 kB of prose, then the key", '"the cat sat on a mat, " * 4500 + KEY'),
]

CHILD = r"""
import base64, json, random, sys, time
from urllib.parse import quote
from fsb.core.secrets import redact
KEY = sys.argv[1]
b = base64.b64encode(KEY.encode()).decode()
basic = base64.b64encode(b"user:" + KEY.encode()).decode()
rng = random.Random(1)
text = eval(sys.argv[2])
redact("warm up", [KEY])
start = time.process_time()
out = redact(text, [KEY])
gone = not any(f in out for f in (KEY, b, basic[8:], KEY.encode().hex(), quote(KEY), KEY.replace("-", "\\u002d")))
print(json.dumps({"cpu": time.process_time() - start, "chars": len(text), "gone": gone}))
"""


def run(expr: str, build: Path | None, timeout: float) -> dict | None:
    """One child process timing `redact` on the text `expr` builds; None when it ran over `timeout`."""
    env = dict(os.environ)
    if build is not None:
        env["PYTHONPATH"] = str(build)
    try:
        command = [sys.executable, "-c", CHILD, KEY, expr]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=True)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout's build/ folder, timed in the same rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / "fsb").is_dir():
        print(f"bench_redact: {args.baseline} holds no fsb package (give a checkout's build/ folder)", file=sys.stderr)
        return 2
    variants = {"fsb": None, **({"baseline": args.baseline} if args.baseline else {})}
    print(f"redact() CPU per call, median (min-max) over {args.rounds} interleaved rounds; baseline = {args.baseline}")
    for name, expr in CASES:
        got: dict[str, list] = {v: [] for v in variants}
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for variant in order:
                got[variant].append(run(expr, variants[variant], args.timeout))
        cells, medians = [], {}
        for variant, results in got.items():
            done = [x for x in results if x is not None]
            if len(done) < len(results):
                cells.append(f"{variant} > {args.timeout:.0f} s in {len(results) - len(done)} of {len(results)} rounds")
                continue
            cpu = [x["cpu"] for x in done]
            medians[variant] = statistics.median(cpu)
            gone = "key gone" if all(x["gone"] for x in done) else "KEY LEFT"
            cells.append(f"{variant} {medians[variant]:.3f} s ({min(cpu):.3f}-{max(cpu):.3f}), {gone}")
        ratio = f"; baseline/fsb {medians['baseline'] / medians['fsb']:.1f}x" if len(medians) == 2 and medians["fsb"] > 0 else ""
        chars = next((x["chars"] for x in got["fsb"] if x is not None), 0)
        print(f"{name} ({chars:,} characters): {'; '.join(cells)}{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
