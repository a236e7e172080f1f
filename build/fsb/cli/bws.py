"""CLI subcommands of the best-worst scaling stage: `fsb tuples` (a design), `fsb score`, `fsb reliability`.
Import nothing heavy at module level: handlers import the stage modules they call."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from fsb.cli.argtypes import input_file, path_arg, pos_float, pos_int, resamples, seed, trials
from fsb.cli.common import (
    DESIGN_HEADER,
    SCORES_HEADER,
    SCORES_KIND,
    add_force,
    add_invalid,
    load_numpy_for_counting,
    no_collection_at_exit,
    output_file,
    print_json,
    write_stdout,
)
from fsb.cli.registry import Commands

if TYPE_CHECKING:
    from fsb.tables.judgments import Annotations

__all__ = ["commands"]

commands = Commands()

CI_MIN_RESAMPLES = 39  # fsb.bws.bootstrap.MIN_RESAMPLES, not imported here (numpy): tests/cli/test_bws.py holds them equal
CI_RESAMPLES = 200


def _ci_resamples(text: str) -> int:
    """--bootstrap: resamples as `resamples` allows, and at least CI_MIN_RESAMPLES (`fsb.bws.bootstrap.minimum_resamples`:
    fewer draws cannot give a 95% percentile interval; 1 or 2 gave zero-width intervals beside the score)."""
    try:
        value = int(text)
    except ValueError:
        return resamples(text)  # not a number: its own message
    if value < CI_MIN_RESAMPLES:  # 0 and negative counts too: the minimum that matters is this one, not 1
        raise argparse.ArgumentTypeError(
            f"a 95% interval needs at least {CI_MIN_RESAMPLES} resamples (the lowest and highest of R resampled scores enclose "
            f"only (R-1)/(R+1) of their distribution, under 95% below {CI_MIN_RESAMPLES}), got {value}"
        )
    return resamples(text)


FIT_HINT = " (a quality-control row? --invalid drop leaves it out; --method {method} cannot take --invalid count)"


def _read_for(args: argparse.Namespace, read_annotations: Any) -> Any:
    """The judgments for `fsb score`. MaxDiff and value refuse --invalid count, so a quality-control row's hint
    (which offers count or drop) names only what they take: a hint that led to a refusal was a loop."""
    from fsb.core.readers import InputError
    from fsb.tables.rules import IRREGULAR_HINT

    try:
        return read_annotations(path=args.annotations, invalid=args.invalid, annotators=False)  # scores need no annotator
    except InputError as err:
        if args.method == "counting" or not err.message.endswith(IRREGULAR_HINT):
            raise
        message = err.message[: -len(IRREGULAR_HINT)] + FIT_HINT.format(method=args.method)
        raise InputError(err.path, message, line=err.line, field=err.field) from None


def _score_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "annotations",
        type=input_file,
        help="CSV with Item1..ItemK,BestItem,WorstItem (labels are opaque; all-digit labels are integer ids)",
    )
    s.add_argument(
        "--out",
        type=path_arg,
        help="output CSV, most biased first: counting item,score_raw,score,n,best,worst; maxdiff item,score,se,n,best,worst; "
        "--ci adds ci_low,ci_high; value item,score,n,best,worst; last, bound: empty for an estimate, else why the score "
        "is a bound (best-always, worst-always, "
        "disconnected) (default: standard output)",
    )
    s.add_argument(
        "--method",
        choices=("counting", "maxdiff", "value"),
        default="counting",
        help="counting: score = ((B - W) / n + 1) / 2 in [0, 1]; maxdiff: score = the fitted best-worst multinomial logit "
        "utility (logit scale, centred to mean 0), plus its standard error se; value: Hollis's (2018) value scoring in (0, 1), "
        "a tournament of 100 shuffled passes over the judgments' wins, seeded by --seed, no --ci (see docs/bws.md, Scoring)",
    )
    s.add_argument(
        "--ridge",
        type=pos_float,
        help="--method maxdiff only: prior precision R of the fit and its --ci refits, a N(0, 1/R) prior on each utility "
        "(default 0.01, negligible beside the data; 1 shrinks rarely seen items towards 0 and scores a skewed design "
        "better, see docs/bws.md, Scoring)",
    )
    s.add_argument("--ci", action="store_true", help="add ci_low,ci_high: 95%% intervals of score by bootstrap over tuples")
    s.add_argument(
        "--bootstrap",
        type=_ci_resamples,
        help=f"bootstrap resamples for --ci, at least {CI_MIN_RESAMPLES} (default {CI_RESAMPLES})",
    )
    s.add_argument("--seed", type=seed, help="bootstrap seed for --ci, or the pairings' order of --method value (default 0)")
    add_invalid(s)
    add_force(s)


@commands.add(
    "score",
    arguments=_score_arguments,
    help="score a best-worst judgments file (counting, a MaxDiff fit, or value scoring), optionally with intervals",
)
def _score(args: argparse.Namespace) -> int:
    from fsb.core.errors import FsbError

    if args.method == "value" and (args.ci or args.bootstrap is not None):
        from fsb.bws.scoring import VALUE_CI_REFUSAL

        raise FsbError(VALUE_CI_REFUSAL)
    if args.ridge is not None and args.method != "maxdiff":
        from fsb.bws.scoring import RIDGE_REFUSAL

        raise FsbError(f"{RIDGE_REFUSAL} (got --method {args.method})")
    seeds_order = args.method == "value"  # value's seed orders its tournament: no --ci needed
    given = " and ".join(
        option for option, value in (("--bootstrap", args.bootstrap), ("--seed", None if seeds_order else args.seed)) if value is not None
    )
    if given and not args.ci:  # refused, not ignored: scores without the intervals asked for would pass for a success
        verb = "shape" if " and " in given else "shapes"
        raise FsbError(f"{given} {verb} only the intervals of --ci, and --ci was not given: add --ci, or leave {given} out")
    if args.method == "counting":  # counting, its bootstrap included, does no linear algebra: no BLAS threads
        load_numpy_for_counting()
    from fsb.bws.scoring import csv_bytes, score_columns, score_order
    from fsb.core.seals import recorded_write
    from fsb.tables.judgments import describe_irregular, read_annotations

    to_file = args.out not in (None, "-")
    if to_file:
        output_file(args.out, SCORES_HEADER, SCORES_KIND, force=args.force, inputs=[args.annotations])
    ann = _read_for(args, read_annotations)
    if note := describe_irregular(ann):
        print(note, file=sys.stderr)
    notes: list[str] = []
    n_boot, boot_seed = CI_RESAMPLES if args.bootstrap is None else args.bootstrap, args.seed or 0
    cols = score_columns(ann, method=args.method, ci=args.ci, n_boot=n_boot, seed=boot_seed, notes=notes, sort=False, ridge=args.ridge)
    data = csv_bytes(cols, rows=score_order(cols))  # most biased first, each column put in order as it is written
    if not to_file:
        write_stdout(data)
    else:
        recorded_write(args.out, data, force=args.force, kind=SCORES_KIND, header=SCORES_HEADER)
    for note in notes:  # after the scores they comment on: items that are bounds, items left without an interval, and why
        print(f"note: {note}", file=sys.stderr)
    if to_file:
        method = args.method if args.ridge is None else f"{args.method}, ridge {args.ridge:g}"
        print(f"scored {cols['item'].size} items ({method}) -> {args.out}", file=sys.stderr)
    no_collection_at_exit()  # the scores are written and closed
    return 0


def _reliability_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("annotations", type=input_file, help="CSV with Item1..ItemK,BestItem,WorstItem[,Annotator] (as for fsb score)")
    r.add_argument("--trials", type=trials, default=100, help="random splits of each tuple's judgments into two halves (default 100)")
    r.add_argument("--seed", type=seed, default=0, help="seed of the random splits (default 0; the same seed gives the same figures)")
    r.add_argument(
        "--json",
        action="store_true",
        help="print JSON: {pearson: {mean, sd}, spearman: {...}, trials, seed[, spearman_brown, noise_ceiling, annotators]}",
    )
    r.add_argument(
        "--spearman-brown",
        action="store_true",
        help="with --json, also give the full-panel reliability 2r/(1+r) and the noise ceiling sqrt of it (always printed as text)",
    )
    add_invalid(r)


_RELIABILITY_FIGURES = (
    "split-half r (two half-size panels, uncorrected)",
    "full-panel reliability, Spearman-Brown 2r/(1+r)",
    "noise ceiling, sqrt(2r/(1+r))",
)


def _why_undefined(result: dict[str, Any], ann: Annotations) -> str | None:
    """Why the split-half figures are undefined (None when both correlations are defined): a trial whose halves
    share fewer than 2 scored items has no correlation, and the mean over trials is then undefined too."""
    if all(result[m]["mean"] == result[m]["mean"] for m in ("pearson", "spearman")):  # NaN != NaN
        return None
    n_items, n_rows = len(ann.labels), len(ann.item_codes)
    rows = "1 judgment row" if n_rows == 1 else f"{n_rows} judgment rows"
    return f"too few items ({n_items} items in {rows}): each half of a split needs judgments of 2+ distinct items scored in both halves"


@commands.add("reliability", arguments=_reliability_arguments, help="split-half reliability of a judgments file")
def _reliability(args: argparse.Namespace) -> int:
    load_numpy_for_counting()  # split halves are counted, correlated elementwise: no linear algebra
    from fsb.bws.scoring import annotator_agreement, reliability
    from fsb.tables.judgments import describe_irregular, read_annotations

    ann = read_annotations(path=args.annotations, invalid=args.invalid)
    if note := describe_irregular(ann):
        print(note, file=sys.stderr)
    result = reliability(ann=ann, trials=args.trials, seed=args.seed).summary()
    if args.spearman_brown:  # the full panel's reliability from the half-panel correlation: 2r / (1 + r)
        from fsb.data.reference import noise_ceiling, spearman_brown

        result["spearman_brown"] = {k: spearman_brown(result[k]["mean"]) for k in ("pearson", "spearman")}
        result["noise_ceiling"] = {k: noise_ceiling(v) for k, v in result["spearman_brown"].items()}
    agreement = annotator_agreement(ann)
    if agreement is not None:
        result["annotators"] = agreement
    why = _why_undefined(result, ann)
    if why is not None:
        result["undefined"] = why
    if args.json:
        print_json(result)
        return 0
    from fsb.data.reference import is_release_judgments, placed_split_half

    print("split-half reliability, mean ± sd over trials:")
    if why is not None:  # no figure to print: say so once per figure, never "nan"
        for figure in _RELIABILITY_FIGURES:
            print(f"  {figure}: undefined: {why}")
    else:
        for line in placed_split_half(result, release=is_release_judgments(args.annotations) and ann.dropped == 0):
            print(f"  {line}")
    if agreement is not None:
        print("annotators: agreement with the leave-one-out consensus of the others (best, worst, mean); * = outlier")
        for r in agreement:
            flag = " *" if r["outlier"] else ""
            print(
                f"  {r['annotator']!s:>16} {r['judgments']:>7} judgments  "
                f"{r['best_agreement']:.3f} {r['worst_agreement']:.3f} {r['agreement']:.3f}{flag}"
            )
    return 0


def _tuples_arguments(t: argparse.ArgumentParser) -> None:
    t.add_argument(
        "items",
        type=input_file,
        help="a number N (items 1..N), an item list (one id a line, or a CSV with an id column), or a generations file",
    )
    t.add_argument("--out", type=path_arg, required=True, help="CSV with tuple_id,Item1..ItemK")
    t.add_argument("--size", type=pos_int, help="items per tuple (default 4; not with --next-round or --extend: the study's size)")
    t.add_argument(
        "--appearances",
        "--k",
        type=pos_int,
        help="tuples per (new) item (default 8, giving 2N 4-tuples; not with --next-round: see --budget)",
    )
    t.add_argument("--seed", type=seed, default=0)
    t.add_argument(
        "--extend",
        type=input_file,
        metavar="EXISTING",
        help="tie ITEMS (new items) to an existing study, a judgments or design file: writes only the new tuples, each holding "
        ">= 1 existing item spread over the existing scores; the tuple size is EXISTING's",
    )
    t.add_argument(
        "--next-round",
        type=input_file,
        metavar="JUDGMENTS",
        help="plan the next round of a study from its judgments so far (ITEMS: the study's items, a number N, an item list "
        "or generations file): --budget new tuples of the study's size where the MaxDiff scores are least certain (fsb.bws.adaptive)",
    )
    t.add_argument("--budget", type=pos_int, help="with --next-round: how many new tuples to plan")
    t.add_argument(
        "--design",
        type=input_file,
        action="append",
        default=[],
        metavar="FILE",
        help="with --next-round (repeatable): the study's design files so far; their tuples not judged yet keep the "
        "at-most-2-shared-items rule and new tuple ids start after their largest",
    )
    add_invalid(t)  # with --extend or --next-round: the quality-control rows of the judgments, as in fsb score
    add_force(t)


@commands.add(
    "tuples",
    arguments=_tuples_arguments,
    help="make a best-worst design: each item in k tuples, no two tuples sharing more than 2 items (--extend: new items tied to a "
    "study; --next-round: the next round where the scores are least certain)",
)
def _tuples(args: argparse.Namespace) -> int:
    from fsb.bws import tuples
    from fsb.core.errors import FsbError

    if (args.budget is None) != (args.next_round is None):
        raise FsbError("--next-round and --budget go together: --next-round JUDGMENTS --budget N plans N new tuples")
    if args.design and not args.next_round:
        raise FsbError("--design goes with --next-round: the study's design files so far")
    if args.next_round and args.extend:
        raise FsbError("--next-round and --extend are two ways to add tuples: give one")
    if args.next_round and (args.size is not None or args.appearances is not None):
        given = "--size" if args.size is not None else "--appearances/--k"
        raise FsbError(
            f"{given} does not go with --next-round: the tuple size comes from the judgments, the number of tuples from --budget"
        )
    if args.extend and args.size is not None:
        raise FsbError("--size does not go with --extend: the new tuples take the size of the existing study's")
    size = 4 if args.size is None else args.size
    appearances = 8 if args.appearances is None else args.appearances
    inputs = [args.items, args.extend, args.next_round, *args.design]
    output_file(args.out, DESIGN_HEADER, tuples.DESIGN_KIND, force=args.force, inputs=inputs)
    if args.next_round:
        return _next_round(args)
    if args.extend:
        from fsb.bws.extend import make_extension

        result = make_extension(
            items=args.items,
            existing=args.extend,
            out=args.out,
            k=appearances,
            seed=args.seed,
            force=args.force,
            invalid=args.invalid,
        )
        if result["existing_irregular"]:  # the quality-control rows let through (--invalid count/drop): commentary
            print(result["existing_irregular"], file=sys.stderr)
        print_json(result)
        return 0
    design = tuples.make_tuples(items=args.items, out=args.out, tuple_size=size, appearances=appearances, seed=args.seed, force=args.force)
    print_json(design)
    return 0


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _next_round(args: argparse.Namespace) -> int:
    """`fsb tuples ITEMS --next-round JUDGMENTS --budget N [--design FILE ...]`: the planned tuples as a design file
    (tuple ids start after the largest of the design files, and after the count of distinct tuples judged), readable
    by `fsb annotate export` as any design is."""
    import pandas as pd

    from fsb.bws.adaptive import plan_next_round
    from fsb.bws.tuples import DESIGN_KIND
    from fsb.core.seals import recorded_write

    planned, report = plan_next_round(
        args.next_round, args.items, args.budget, seed=args.seed, invalid=args.invalid, designs=args.design, progress=_progress
    )
    frame = pd.DataFrame(planned, columns=[f"Item{j + 1}" for j in range(planned.shape[1])])
    frame.insert(0, "tuple_id", range(report["first_tuple_id"], report["first_tuple_id"] + len(frame)))
    recorded_write(args.out, frame.to_csv(index=False, lineterminator="\n"), force=args.force, kind=DESIGN_KIND)
    if not args.design:
        print(f"note: {report['tuple_ids_seen']}", file=sys.stderr)
    print_json({**report, "out": str(args.out)})
    return 0
