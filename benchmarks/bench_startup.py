"""Benchmark: start-up cost of `fsb eval` (lm-eval's Python API with a TaskManager over this project's
tasks only) against `lm_eval` (its CLI, which indexes every built-in task), on the same tiny run.

Both run the same task on one sentence with lm-eval's `dummy` model, so the wall time is almost all
start-up: imports, task indexing, loading the dataset. Each is timed `--repeat` times alternately, and
the best of each is printed with their ratio (same machine, same minutes).

    python benchmarks/bench_startup.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def _time(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as cwd:
        common = ["--limit", "1"]
        fsb = [str(BIN / "fsb"), "eval", "--model", "dummy", "--tasks", "fsb_set0", "--output-path", f"{cwd}/a", *common]
        cli = [str(BIN / "lm_eval"), "--model", "dummy", "--tasks", "fsb_set0", "--output_path", f"{cwd}/b", "--log_samples", *common]
        t_fsb, t_cli = [], []
        for _ in range(args.repeat):
            t_fsb.append(_time(fsb, env, cwd))
            t_cli.append(_time(cli, env, cwd))
    print(f"fsb eval (own tasks only):      best {min(t_fsb):6.2f} s  of {args.repeat}")
    print(f"lm_eval CLI (all built-in tasks): best {min(t_cli):6.2f} s  of {args.repeat}")
    print(f"ratio lm_eval / fsb eval:        {min(t_cli) / min(t_fsb):6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
