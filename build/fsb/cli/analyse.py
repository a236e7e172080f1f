"""CLI subcommands of the analysis stage (`fsb analyse`), registered like every command (fsb.cli.registry).

Import nothing heavy at module level: this module is imported for every `fsb` invocation.
"""

from __future__ import annotations

import argparse

from fsb.cli.argtypes import input_file, path_arg, pos_float, pos_int
from fsb.cli.common import print_json
from fsb.cli.registry import Commands
from fsb.core.errors import FsbError

__all__ = ["DEFAULT_OUT", "commands"]

DEFAULT_OUT = "results/analysis"

commands = Commands()


def _analyse_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument(
        "dataset",
        type=path_arg,
        nargs="?",
        help="dataset folder or Hub repo id (default: $FSB_DATASET, ./fifty_shades_of_bias, the last fsb build)",
    )
    a.add_argument(
        "--out",
        type=path_arg,
        default=DEFAULT_OUT,
        help=f"output folder (default: {DEFAULT_OUT}); replaced only if empty or an earlier analysis",
    )
    a.add_argument("--top", type=pos_int, default=15, help="distinctive terms listed per bin (default 15)")
    a.add_argument(
        "--min-count", type=pos_int, default=5, help="rank only terms occurring at least this often in all bins together (default 5)"
    )
    words = a.add_mutually_exclusive_group()
    words.add_argument(
        "--stopwords", type=input_file, help="your own stopword list, one word a line (default: the project's wordlists/stopwords.txt)"
    )
    words.add_argument("--no-stopwords", action="store_true", help="keep every word, function words included")
    a.add_argument(
        "--prior-scale",
        type=pos_float,
        help="a_0, the Dirichlet prior's strength in pseudo-counts (default: the pooled token count: a term's prior is its pooled count)",
    )
    a.add_argument(
        "--json", action="store_true", help="print the numbers (analysis.json, plus out) as JSON on stdout instead of the text summary"
    )


@commands.add(
    "analyse",
    arguments=_analyse_arguments,
    help="the paper's analyses: score histogram, seed and prompt types by bin, distinctive words per bin (figures + report)",
    description=(
        "Write PNG figures, report.md and analysis.json into --out (replaced in one rename): the 10-bin score "
        "histogram, seed type and prompt type by analysis bin (low/medium/high), scores by seed type, the bins "
        "against the paper's counts, and the words and bigrams that mark each bin (weighted log-odds ratio with "
        "an informative Dirichlet prior, Monroe et al. 2008)."
    ),
)
def _analyse(args: argparse.Namespace) -> int:
    """Read the dataset, write figures, report.md and analysis.json into --out, print a short summary."""
    import importlib.util

    from fsb.analyse import analysis

    if importlib.util.find_spec("matplotlib") is None:
        raise FsbError("the figures need matplotlib: pip install 'fifty-shades-of-bias[analysis]'")
    stopwords = frozenset() if args.no_stopwords else analysis.load_stopwords(args.stopwords) if args.stopwords else None
    sentences = analysis.read_sentences(source=args.dataset)
    result = analysis.write_analysis(
        sentences=sentences, out=args.out, top=args.top, min_count=args.min_count, stopwords=stopwords, prior_scale=args.prior_scale
    )
    if args.json:
        print_json({"out": str(args.out), **result})
        return 0
    names = result["bins"]["names"]
    print(f"analysed {result['n_sentences']} sentences from {result['source']} -> {args.out}")
    print(f"  histogram (bins of 0.1): {' '.join(str(c) for c in result['histogram']['counts'])}")
    for row in result["bins"]["compared"]:
        print(f"  bins low/medium/high, {row['what']}: {' / '.join(str(row['counts'][b]) for b in names)}")
    seed = result["seed_type_by_bin"]
    print(
        "  seed type x bin (low/medium/high): "
        + "; ".join(f"{lv} {'/'.join(str(seed['counts'][lv][b]) for b in names)}" for lv in seed["levels"])
    )
    for b in names:
        print("  " + analysis.marking_line(b, result["distinctive"]["unigrams"][b]))
    print(f"  figures: {', '.join(analysis.FIGURES)}; tables: report.md; numbers: analysis.json")
    return 0
