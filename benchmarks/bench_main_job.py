"""Benchmark: the main job's three model tasks (`fsb`, `fsb_ll`, `fsb_bws_ll`) with SmolLM2-135M-Instruct on this
machine's CPU, run as the checkout's own main job runs them, with every request and forward row counted.

Per task: the requests lm-eval sends to the model, the forward rows counted at lm-eval's `HFLM._model_call` /
`_model_generate` (rows = sequences in the batch; a generation's row also decodes its answer), the wall and CPU
seconds of the task (including what the checkout's main job does around it: model loads, its estimate), seconds
per row, the estimate the job printed and actual / estimate, and the 1-minute load average at start and end.

The checkout: this one by default, or another one's `build/` folder with `--build` (e.g. a snapshot of main at
a8cebb1: `git archive a8cebb1 build harness fifty_shades_of_bias.py | tar -x -C /tmp/base-a8c`). A checkout
whose mainjob has `first_request_timer` (before issue 33) loads the model per task through lm-eval's "hf" name
and times 8 requests on a second model load before `fsb` and before `fsb_ll` (as its main job did); a newer one
loads one `TimedHFLM` for the three tasks and estimates from lm-eval's plan of rows after the first batch.

    python benchmarks/bench_main_job.py [--sample 10] [--tuples 16] [--build PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _count(counts: dict[str, int]) -> None:
    """Count requests and rows at lm-eval's HFLM, whichever subclass or instance runs them."""
    from lm_eval.models.huggingface import HFLM

    call, generate = HFLM._model_call, HFLM._model_generate
    loglikelihood, generate_until = HFLM.loglikelihood, HFLM.generate_until

    def counted_call(self: Any, inps: Any, *a: Any, **k: Any) -> Any:
        counts["rows"] += int(inps.shape[0])
        return call(self, inps, *a, **k)

    def counted_generate(self: Any, context: Any, *a: Any, **k: Any) -> Any:
        counts["rows"] += int(context.shape[0])
        return generate(self, context, *a, **k)

    def counted_ll(self: Any, requests: list[Any], *a: Any, **k: Any) -> Any:
        counts["requests"] += len(requests)
        return loglikelihood(self, requests, *a, **k)

    def counted_gen(self: Any, requests: list[Any], *a: Any, **k: Any) -> Any:
        counts["requests"] += len(requests)
        return generate_until(self, requests, *a, **k)

    HFLM._model_call, HFLM._model_generate = counted_call, counted_generate
    HFLM.loglikelihood, HFLM.generate_until = counted_ll, counted_gen


def _before_estimate(line: str, requests: int) -> float | None:
    found = re.search(r"first (\d+) requests took ([\d.]+) s", line)
    return float(found.group(2)) / int(found.group(1)) * requests if found else None


def run(dataset: Path, sample: int, tuples: int) -> list[dict[str, Any]]:
    """The three tasks as the imported checkout's main job runs them; one record per task."""
    from fsb.evaluate import mainjob, runner
    from fsb.evaluate.models import smollm2_model

    counts = {"rows": 0, "requests": 0}
    _count(counts)
    model_dir = smollm2_model()
    before = hasattr(mainjob, "first_request_timer")
    t0, c0 = time.monotonic(), time.process_time()
    lm = None if before else runner.smollm2_lm(model_dir)
    estimator = mainjob.first_request_timer(model_dir, dataset) if before else None
    setup = (time.monotonic() - t0, time.process_time() - c0)
    records = []
    for task in ("fsb", "fsb_ll", "fsb_bws_ll"):
        n = tuples if task == "fsb_bws_ll" else sample
        counts.update(rows=0, requests=0)
        load0, t0, c0 = os.getloadavg()[0], time.monotonic(), time.process_time()
        if before:
            # the old job's order: the estimate (a timing run on a second model load, once per kind), then the task
            planned = {"fsb": n * 5, "fsb_ll": n * 55, "fsb_bws_ll": n * 16}[task]
            line = estimator(task, planned)  # its timing run calls model.generate itself: not counted as the task's rows
            print(line, flush=True)
            runner.run_eval(
                "hf", f"pretrained={model_dir},dtype=float32", [task], sample=n, dataset=str(dataset), batch_size=8, device="cpu"
            )
            estimate = _before_estimate(line, planned)
        else:
            lm.clock.start(task)
            runner.run_eval(lm, f"pretrained={model_dir},dtype=float32", [task], sample=n, dataset=str(dataset), device="cpu")
            estimate = lm.clock.estimate
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
        rows = counts["rows"]
        records.append(
            {
                "task": task,
                "items": n,
                "requests": counts["requests"],
                "rows": rows,
                "wall": round(wall, 2),
                "cpu": round(cpu, 2),
                "s_per_row": round(wall / rows, 3) if rows else None,
                "estimate": round(estimate, 1) if estimate else None,
                "actual_over_estimate": round(wall / estimate, 2) if estimate else None,
                "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
            }
        )
        print(json.dumps(records[-1]), flush=True)
    records.insert(0, {"task": "model load (and the old estimator's timing)", "wall": round(setup[0], 2), "cpu": round(setup[1], 2)})
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=10, help="sentences of the rating tasks (x 5 few-shot sets)")
    ap.add_argument("--tuples", type=int, default=16, help="tuples of the best-worst task (x 2 rotations)")
    ap.add_argument("--build", type=Path, default=ROOT / "build", help="the checkout's build/ folder (default: this one)")
    ap.add_argument("--release", default=str(ROOT.parent / "shared" / "data" / "fsb-upstream"))
    ap.add_argument("--json", action="store_true", help="print the records as one JSON document at the end")
    args = ap.parse_args()
    sys.path.insert(0, str(args.build.resolve()))
    sys.path.insert(0, str(args.build.resolve().parent))  # fifty_shades_of_bias.py beside it
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import fsb

    assert Path(fsb.__file__).resolve().is_relative_to(args.build.resolve()), f"fsb imported from {fsb.__file__}, not {args.build}"
    from fsb.data.dataset import build_dataset

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "fifty_shades_of_bias"
        release = Path(args.release)
        build_dataset(release / "FSB" / "FSB_text.csv", release / "FSB" / "fsb-tuples-annotations.csv", data, record=False)
        records = run(data, args.sample, args.tuples)
    doc = {
        "started": started,
        "build": str(args.build),
        "sample": args.sample,
        "tuples": args.tuples,
        "cores": os.cpu_count(),
        "tasks": records,
    }
    if args.json:
        print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
