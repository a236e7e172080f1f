"""CLI subcommands of the evaluation stage: `fsb eval` (lm-eval through its Python API) and `fsb main` (the
README's main job). Import nothing heavy at module level."""

from __future__ import annotations

import argparse

from fsb.cli.argtypes import batch_size, path_arg, pos_int, seed
from fsb.cli.registry import Commands

__all__ = ["commands"]

commands = Commands()


def _eval_arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("--model", default="hf", help="lm-eval model type (hf, local-completions, local-chat-completions, ...)")
    e.add_argument("--model-args", default="", help="lm-eval model_args, e.g. pretrained=PATH,dtype=float32")
    e.add_argument(
        "--tasks",
        default="fsb",
        help="comma-separated: fsb, fsb_ll, fsb_upstream (chat models), fsb_0shot, or single variants (default fsb)",
    )
    e.add_argument("--limit", type=float, help="first N sentences per variant (a smoke test; --per-bin is the stratified sample)")
    e.add_argument("--per-bin", type=pos_int, help="a stratified sample: this many sentences per equispaced score bin")
    e.add_argument("--sample", type=pos_int, help="a simple random sample of this many sentences (judged tuples for fsb_bws*)")
    e.add_argument(
        "--dataset", type=path_arg, help="dataset folder or Hub repo id (default: $FSB_DATASET, ./fifty_shades_of_bias, the last fsb build)"
    )
    e.add_argument("--output-path", type=path_arg, default="results/eval", help="where results and samples go (default results/eval)")
    e.add_argument("--batch-size", type=batch_size, default=1, help="lm-eval batch size (int, auto or auto:N)")
    e.add_argument("--device", help="cpu, cuda, ... (default: cuda if torch sees a GPU, else cpu)")
    e.add_argument("--apply-chat-template", action="store_true")
    e.add_argument("--fewshot-as-multiturn", action="store_true")
    e.add_argument("--gen-kwargs", help="override generation settings, e.g. temperature=0")
    e.add_argument("--seed", type=seed, default=0)


@commands.add(
    "eval", arguments=_eval_arguments, help="run the lm-eval tasks through lm-eval's Python API (fast start), then print the report"
)
def _eval(args: argparse.Namespace) -> int:
    from fsb.evaluate.report import render_runs
    from fsb.evaluate.results import load_runs
    from fsb.evaluate.runner import run_eval

    run_eval(
        model=args.model,
        model_args=args.model_args,
        tasks=[t.strip() for t in args.tasks.split(",") if t.strip()],
        output_path=args.output_path,
        limit=args.limit,
        per_bin=args.per_bin,
        sample=args.sample,
        dataset=args.dataset,
        batch_size=args.batch_size,
        device=args.device,
        apply_chat_template=args.apply_chat_template,
        fewshot_as_multiturn=args.fewshot_as_multiturn,
        gen_kwargs=args.gen_kwargs,
        seed=args.seed,
    )
    print(render_runs(runs=load_runs(paths=args.output_path), dataset=args.dataset))
    return 0


def _main_arguments(m: argparse.ArgumentParser) -> None:
    m.add_argument("--out", type=path_arg, default="fifty_shades_of_bias", help="dataset folder (default: ./fifty_shades_of_bias)")
    m.add_argument("--raw-dir", type=path_arg, help="release folder (default: a local copy, else the pinned download)")
    m.add_argument("--skip-eval", action="store_true", help="build, load and run the analyses; skip the model evaluation")
    m.add_argument(
        "--per-bin",
        type=pos_int,
        default=None,
        help="evaluate a stratified sample of this many sentences per equispaced score bin "
        "(default: a simple random sample of 10; a stratified one inflates correlations)",
    )
    m.add_argument("--results", type=path_arg, default="results/main", help="where lm-eval writes results and samples")
    m.add_argument(
        "--force",
        action="store_true",
        help="replace RESULTS' report.txt, timings.json, main-job.md and baseline files even if not unchanged since fsb wrote them",
    )
    m.add_argument(
        "--record",
        action="store_true",
        help="maintainers: write the measured page to docs/figures/main-job.md and README.md's total-time line together "
        "(default: RESULTS/main-job.md only; no tracked file changes)",
    )


@commands.add(
    "main",
    arguments=_main_arguments,
    help="the main job: build from the release, load it back, run the paper's analyses, evaluate the default model "
    "on a sample and the baselines, report",
)
def _main_job(args: argparse.Namespace) -> int:
    from fsb.evaluate.mainjob import run

    return run(
        raw_dir=args.raw_dir,
        out=args.out,
        results=args.results,
        skip_eval=args.skip_eval,
        per_bin=args.per_bin,
        force=args.force,
        record=args.record,
    )
