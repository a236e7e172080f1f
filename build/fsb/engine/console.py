"""The engine at the command line: engine objects from parsed options (`fsb.cli.engine_args`), a progress bar,
the dry run (requests and cost, nothing sent), the end-of-run report, and a run with SIGTERM treated as
Ctrl-C. Shared by every command that asks a model (`fsb generate`, `fsb explain`, `fsb annotate llm`)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = [
    "ProgressBar",
    "print_dry_run",
    "report_run",
    "run_options_from_args",
    "run_plan",
    "sampling_from_args",
    "terminate_as_interrupt",
]


def sampling_from_args(args: argparse.Namespace) -> Any:
    """The `Sampling` of the parsed endpoint options (`fsb.cli.engine_args.add_endpoint_options`)."""
    from fsb.engine import Sampling

    return Sampling(
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        top_p=args.top_p,
        frequency_penalty=args.frequency_penalty,
        presence_penalty=args.presence_penalty,
        seed=args.api_seed,
        stop=tuple(args.stop),
    )


def run_options_from_args(args: argparse.Namespace) -> Any:
    """The `RunOptions` of the parsed running options (concurrency, retries, timeout, backoff, limit)."""
    from fsb.engine import RunOptions

    return RunOptions(concurrency=args.concurrency, retries=args.retries, timeout=args.timeout, backoff=args.backoff, limit=args.limit)


def terminate_as_interrupt() -> None:
    """Make SIGTERM (kill, `timeout`, container stops) end a run like Ctrl-C: the outputs are written first."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


class ProgressBar:
    """The engine's progress as a tqdm bar with the rate, tokens, retries and failures."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.started = time.monotonic()

    def start(self, total: int, kind: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=kind, unit="req", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
        self.started = time.monotonic()

    def update(self, result: Any) -> None:
        if self.bar is None:
            return
        elapsed = max(1e-9, time.monotonic() - self.started)
        tokens = result.prompt_tokens + result.completion_tokens
        postfix = {"tok/s": f"{tokens / elapsed:.0f}", "tokens": tokens, "retries": result.retries, "failed": result.failed}
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def print_dry_run(plan: Any, out: str, limit: int | None) -> None:
    """Print the requests a run would send (all messages) and their cost; send and write nothing. Each
    request is labelled by the fields named in `plan.summary["label_fields"]` (default seed and prompt type)."""
    from fsb.engine import estimate_cost, estimate_tokens, finished_ids, pending

    done = finished_ids(plan, out)
    todo = pending(plan, done, limit)
    for r in todo:
        label = " ".join(f"{k}={r.fields[k]}" for k in plan.summary.get("label_fields", ("seed_type", "prompt_type")) if k in r.fields)
        print(f"### uid {r.uid} {label} request {r.request_id[:16]} (~{estimate_tokens(r.body['messages'])} prompt tokens)")
        for m in r.body["messages"]:
            print(f"[{m['role']}] {m['content']}")
        print()
    cost = estimate_cost(todo)
    print(
        f"dry run: {cost.requests} requests to send ({len(done)} of {len(plan.requests)} already finished); "
        f"about {cost.prompt_tokens} prompt tokens (~4 characters a token) and at most {cost.max_completion_tokens} completion tokens. "
        "Nothing was sent."
    )


def report_run(result: Any, out: str) -> int:
    """What the run repaired, the one-line summary, where the files are; the exit code."""
    from fsb.engine import journal_path

    journal = journal_path(out)
    if result.repaired_bytes:
        print(f"journal {journal}: cut off a torn last line ({result.repaired_bytes} bytes) left by an interrupted run", file=sys.stderr)
    if result.recovered:
        print(f"journal {journal}: had lost {result.recovered} finished rows; took them back from {out}", file=sys.stderr)
    if result.fatal:
        print(f"stopped: {result.fatal}", file=sys.stderr)
    print(result.summary_line(), file=sys.stderr)
    outs = result.outputs
    if outs.get("out"):
        print(f"wrote {outs['rows']} rows -> {outs['out']}", file=sys.stderr)
    if outs.get("failures_file"):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(result.failures.items())) or "from earlier runs"
        where = outs["failures_file"]
        print(f"{outs['failures']} requests failed ({kinds}); reasons in {where}; rerun the same command to retry them", file=sys.stderr)
    return int(result.exit_code)


def run_plan(args: argparse.Namespace, plan: Any, endpoint: Any, side_outputs: list[Any]) -> int:
    """Run the plan with the parsed options (a progress bar unless --no-progress), report it; the exit code."""
    from fsb.engine import runner

    terminate_as_interrupt()
    progress = None if args.no_progress else ProgressBar()
    result = runner.run(
        plan,
        args.out,
        endpoint,
        run_options_from_args(args),
        side_outputs=side_outputs,
        progress=progress,
        force=getattr(args, "force", False),
    )
    return report_run(result, args.out)
