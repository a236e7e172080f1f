"""Benchmark: the best-worst task by log-likelihood (`fsb_bws_ll`) with SmolLM2-135M-Instruct on this
machine's CPU: requests and wall time per tuple, extrapolated to every judged tuple of the release.

It runs the measured command, `fsb eval --model hf --tasks fsb_bws_ll` (lm-eval's hf backend, fp32,
batch 8, CPU) on a simple random sample of `--tuples` tuples, each in the default 2 rotations: per
presentation 8 log-likelihood requests on 2 prompts ("Most:" and "Least:"), which the hf backend's
logits cache turns into 2 forward passes (one per prompt; the 4 labels are one token each). The wall
time includes loading the model and the dataset once, so the per-tuple figure is an upper bound.

    python benchmarks/bench_bws_task.py [--tuples 40] [--batch-size 8]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent

from fsb.evaluate.models import smollm2_model  # noqa: E402

RELEASE_TUPLES = 2000
REQUESTS_PER_TUPLE = 2 * 8  # 2 rotations x (4 "Most" labels + 4 "Least" labels)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuples", type=int, default=40)
    ap.add_argument("--batch-size", default="8")
    ap.add_argument("--release", default=str(ROOT.parent / "shared" / "data" / "fsb-upstream"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = smollm2_model()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "fifty_shades_of_bias"
        env = {**os.environ, "FSB_HOME": str(Path(tmp) / "home")}
        subprocess.run(
            [str(BIN / "fsb"), "build", "--raw-dir", args.release, "--out", str(data), "--no-record"],
            env=env,
            check=True,
            capture_output=True,
        )
        cmd = [str(BIN / "fsb"), "eval", "--model", "hf", "--model-args", f"pretrained={model},dtype=float32", "--device", "cpu"]
        cmd += ["--tasks", "fsb_bws_ll", "--dataset", str(data), "--batch-size", args.batch_size, "--output-path", str(Path(tmp) / "out")]
        meta_cmd = [*cmd, "--sample", str(args.tuples)]
        t0 = time.perf_counter()
        proc = subprocess.run(meta_cmd, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        from fsb.evaluate.results import load_run
        from fsb.evaluate.runner import bws_statement

        statement = bws_statement(load_run(Path(tmp) / "out"))
    requests = args.tuples * REQUESTS_PER_TUPLE
    per_tuple = wall / args.tuples
    print(f"command: {' '.join(meta_cmd).replace(str(model), 'SMOLLM2_DIR').replace(str(data), 'DATASET')}")
    print(f"{args.tuples} tuples x 2 rotations: {requests} log-likelihood requests ({REQUESTS_PER_TUPLE} a tuple) in {wall:.1f} s")
    print(f"  {per_tuple:.2f} s a tuple, {wall / requests * 1000:.0f} ms a request (model and dataset loading included)")
    full = RELEASE_TUPLES * per_tuple
    print(f"full release: {RELEASE_TUPLES} tuples, {RELEASE_TUPLES * REQUESTS_PER_TUPLE} requests, about {full / 60:.0f} min at this rate")
    print(statement)


if __name__ == "__main__":
    main()
