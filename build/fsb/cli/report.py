"""CLI subcommands that place scorers against the human scores: `fsb baseline` (write a built-in
baseline's id,score file) and `fsb report` (one page over lm-eval runs and prediction files).

Registered with the one CLI pattern (a `Commands` registry, /work/notes/CLI-PATTERN.md); nothing heavy
is imported at module level.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fsb.cli.argtypes import input_file, path_arg, resamples, trials
from fsb.cli.common import print_json
from fsb.cli.registry import Commands

__all__ = ["commands"]

commands = Commands()


def _baseline_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument("name", choices=("mean", "lexicon", "probe", "classifier"))
    b.add_argument(
        "--dataset", type=path_arg, help="dataset folder or Hub repo id (default: $FSB_DATASET, ./fifty_shades_of_bias, the last fsb build)"
    )
    b.add_argument(
        "--out", type=path_arg, required=True, help="output file: CSV id,score (or JSON lines if it ends in .jsonl); provenance in OUT.json"
    )
    b.add_argument(
        "--words", type=input_file, help="lexicon: your own word list (one word a line; default: fsb's wordlists/bias_lexicon.txt)"
    )
    b.add_argument("--checkpoint", type=path_arg, help="classifier: a local Hugging Face text-classification checkpoint folder")
    b.add_argument("--label", help="classifier: the label (name or index) whose probability is the score (default: the last)")
    b.add_argument(
        "--force",
        action="store_true",
        help="replace --out and OUT.json even if they are not an earlier baseline's files unchanged since fsb wrote them",
    )
    b.add_argument("--json", action="store_true", help="print the summary as JSON on stdout: name, out, provenance and its figures")


@commands.add(
    "baseline",
    arguments=_baseline_arguments,
    help="write a built-in baseline's scores (id,score) for every sentence of the dataset",
    description=(
        "mean: the training folds' mean score (the mse reference); lexicon: a documented word list, no training; "
        "probe: all-MiniLM-L6-v2 embeddings + ridge, out-of-fold over a fixed 10-fold split, penalty by inner CV; "
        "classifier: a local text-classification checkpoint, the probability of one label. Place the file beside "
        "models with `fsb report --predictions FILE`."
    ),
)
def _baseline(args: argparse.Namespace) -> int:
    from fsb.evaluate.baselines import check_output, run_baseline

    check_output(args.out, force=args.force, inputs=[args.words])
    info = run_baseline(args.name, args.out, args.dataset, words=args.words, checkpoint=args.checkpoint, label=args.label, force=args.force)
    if args.json:
        print_json({"name": args.name, "out": str(args.out), "provenance": f"{args.out}.json", **info})
        return 0
    print(f"baseline {args.name}: {info['sentences']} sentences -> {args.out} ({info['seconds']:.1f} s; provenance in {args.out}.json)")
    return 0


def _report_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("runs", type=path_arg, nargs="*", help="lm-eval --output_path folders or results_*.json files, or prediction files")
    r.add_argument(
        "--predictions", type=path_arg, action="append", default=[], metavar="FILE", help="a prediction file (id,score); repeatable"
    )
    r.add_argument(
        "--dataset", type=path_arg, help="the dataset scored (default: what loaders find); gives gold scores, breakdowns, human figures"
    )
    r.add_argument("--bootstrap", type=resamples, default=1000, help="bootstrap draws (default 1000)")
    r.add_argument("--trials", type=trials, default=100, help="split-half trials for the human reference (default 100)")
    r.add_argument(
        "--compare",
        nargs=2,
        action="append",
        metavar=("A", "B"),
        help="paired difference of rows A and B: their number as given (inputs in command-line order, the table's # column) or label",
    )
    r.add_argument("--out", type=path_arg, help="also write report.md, report.json, forest.png and scatter PNGs into this folder")
    r.add_argument("--json", action="store_true", help="print JSON instead of Markdown")


@commands.add(
    "report",
    arguments=_report_arguments,
    help="one table of every scorer (lm-eval runs, prediction files) with 95%% intervals, the human reference and the paper's rows",
    description=(
        "Reads lm-eval output folders (made with --log_samples) and prediction files (CSV or JSON lines id,score) and "
        "reports each the same way: pearson, spearman, mse with bootstrap intervals, parse rate, breakdowns by seed type, "
        "prompt type and analysis bin, calibration; the human split-half r, full-panel reliability and noise ceiling on "
        "the sentences scored; the paper's Table 6 (quoted). --compare A B gives a paired bootstrap difference."
    ),
)
def _report(args: argparse.Namespace) -> int:
    from fsb.core.errors import FsbError
    from fsb.evaluate import report as compare

    paths = [*args.runs, *args.predictions]
    if not paths:
        raise FsbError("give lm-eval output folders (RUN ...) and/or --predictions FILE")
    if args.out:
        compare.check_out(Path(args.out))
    report, entries = compare.build(
        paths, dataset=args.dataset, n_boot=args.bootstrap, compare=[(a, b) for a, b in args.compare or []], reference_trials=args.trials
    )
    if args.out:
        written = compare.write_outputs(report, entries, Path(args.out))
        print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    print(compare.to_json(report) if args.json else compare.render_markdown(report))
    return 0
