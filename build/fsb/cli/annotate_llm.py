"""`fsb annotate llm`: a language model takes the annotators' best-worst test through any OpenAI-compatible
endpoint, resumably (the request engine), and its answers become a judgments file like a human one.

Registered with the one CLI pattern: `commands` (a `_commands.Commands` registry) holds `llm`, which
cli.py installs under `fsb annotate` beside `export` and `import`. Nothing heavy at module level.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fsb.cli.argtypes import path_arg, pos_int, seed
from fsb.cli.engine_args import add_endpoint_options
from fsb.cli.registry import Commands

__all__ = ["commands"]

commands = Commands()


def _rotations(text: str) -> str:
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() and int(p) < 4 for p in parts) or len(set(parts)) != len(parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give distinct cyclic shifts 0..3, e.g. 0,2")
    return ",".join(parts)


def _llm_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        type=path_arg,
        required=True,
        help="output .jsonl (one row per presentation: the answer and its provenance); journal beside it",
    )
    p.add_argument(
        "--judgments",
        type=path_arg,
        help="the judgments CSV (Item1..Item4,BestItem,WorstItem,Annotator) for fsb score / reliability / build (default: OUT with .csv)",
    )
    p.add_argument(
        "--dataset", type=path_arg, help="dataset folder or Hub repo id (default: $FSB_DATASET, ./fifty_shades_of_bias, the last fsb build)"
    )
    p.add_argument("--sample", type=pos_int, help="a simple random sample of this many judged tuples (default: all)")
    p.add_argument("--per-bin", type=pos_int, help="a stratified sample: this many tuples per equispaced bin of the tuple's mean score")
    p.add_argument("--seed", type=seed, default=0, help="sampling seed (default 0)")
    p.add_argument("--rotations", type=_rotations, help="cyclic shifts each tuple is shown in (default: $FSB_BWS_ROTATIONS, else 0,2)")
    p.add_argument("--batch-file", type=path_arg, help="write the unfinished requests as OpenAI Batch API input instead of sending them")
    p.add_argument(
        "--collect", type=path_arg, metavar="FILE", help="merge an OpenAI Batch API output file into OUT instead of sending requests"
    )
    p.add_argument("--force", action="store_true", help="replace --judgments / --batch-file even if they are not earlier outputs")
    add_endpoint_options(p, "completion tokens per request (default 16)")


@commands.add(
    "llm",
    arguments=_llm_arguments,
    help="a model as a best-worst annotator: the judged tuples in fixed rotations through an OpenAI-compatible endpoint (resumable)",
    description="Shows the model every judged tuple (or a sample) in each rotation and asks for the most and the least "
    "negatively biased sentence (the lm-eval task fsb_bws's prompt and strict parser). Prints the requests and a token "
    "estimate first. Finished answers are journaled, so a run can be killed and rerun. The judgments file takes the "
    "parsed answers (unparsed ones are counted, never guessed) for fsb score, fsb reliability and fsb build.",
)
def _llm(args: argparse.Namespace) -> int:
    from fsb import engine
    from fsb.annotate.llm import build_bws_plan, judgments_csv, parse_rows, select_tuples
    from fsb.cli.generate import declare_run_outputs
    from fsb.engine import console

    modes = [m for m in ("dry_run", "batch_file", "collect") if getattr(args, m)]
    if len(modes) > 1:
        raise engine.EngineError(
            f"choose one of --dry-run, --batch-file and --collect (got {', '.join('--' + m.replace('_', '-') for m in modes)})"
        )
    if args.sample is not None and args.per_bin is not None:
        raise engine.EngineError("give --sample (a simple random sample) or --per-bin (a stratified one), not both")
    endpoint = None if modes else engine.resolve_endpoint(args.base_url)  # a missing key is the first thing to know
    judgments = args.judgments or str(Path(args.out).with_suffix(".csv"))
    inputs = {"--dataset": [args.dataset] if args.dataset and os.path.exists(args.dataset) else [], "--collect": [args.collect or ""]}
    declare_run_outputs("fsb annotate llm", args, inputs, {"--judgments": judgments})
    docs, source = select_tuples(args.dataset, sample=args.sample, per_bin=args.per_bin, seed=args.seed, rotations=args.rotations)
    plan = build_bws_plan(docs, args.model, console.sampling_from_args(args), source)
    todo = engine.pending(plan, engine.finished_ids(plan, args.out), args.limit)
    cost = engine.estimate_cost(todo)
    rotations = ",".join(map(str, plan.summary["rotations"]))
    print(
        f"plan: {len(plan.requests)} requests ({len(docs)} tuples x rotations {rotations}; {source['sample']}) -> {args.out}; "
        f"to send now: {cost.requests}, about {cost.prompt_tokens} prompt tokens (~4 characters a token) and at most "
        f"{cost.max_completion_tokens} completion tokens",
        file=sys.stderr,
    )
    side = [(judgments, judgments_csv)]
    if args.dry_run:
        console.print_dry_run(plan, args.out, args.limit)
        return 0
    if args.batch_file:
        written = engine.write_batch(plan, args.out, args.batch_file, args.limit, force=args.force)
        where = ", ".join(str(p) for p, _ in written) or "(nothing left to send)"
        print(
            f"wrote {sum(n for _, n in written)} requests for the Batch API -> {where}; merge its output with --collect FILE",
            file=sys.stderr,
        )
        return 0
    if args.collect:
        key = os.environ.get("OPENAI_API_KEY") or None  # only to scrub it, should a batch output quote it
        result = engine.collect_batch(
            plan, args.out, args.collect, side_outputs=side, base_url=args.base_url, api_key=key, force=args.force
        )
        code = console.report_run(result, args.out)
    else:
        code = console.run_plan(args, plan, endpoint, side)
    if Path(args.out).is_file():
        rows = [row for _, row in _rows(args.out)]
        parsed = parse_rows(rows)
        print(
            f"judgments: {len(parsed.rows)} parsed of {len(rows)} answers ({parsed.unparsed} unparsed, left out, never guessed) "
            f"-> {judgments}; score them with `fsb score {judgments}`",
            file=sys.stderr,
        )
    return code


def _rows(out: str) -> list[tuple[int, dict]]:
    from fsb.core.readers import iter_jsonl

    return list(iter_jsonl(out))
