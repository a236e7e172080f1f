"""`fsb`: a thin command line over the stage modules. Each subcommand parses arguments, calls one
importable function, and prints; heavy imports happen inside the handlers so `fsb --help` is fast."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from ._argtypes import pos_int
from .errors import FsbError

__all__ = ["main"]

_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {}


def _command(name: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        _HANDLERS[name] = fn
        return fn

    return register


def _print_json(obj: object) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


# --- build and scoring --------------------------------------------------------------------------


@_command("build")
def _build(args: argparse.Namespace) -> int:
    from .dataset import build_dataset
    from .release import ANNOTATIONS, GENERATIONS, release_dir

    if args.generations or args.annotations:
        if not (args.generations and args.annotations) or args.raw_dir:
            raise FsbError("give --raw-dir, or both --generations and --annotations")
        generations, annotations = Path(args.generations), Path(args.annotations)
    else:
        folder = release_dir(args.raw_dir)
        generations, annotations = folder / GENERATIONS, folder / ANNOTATIONS
    result = build_dataset(
        generations, annotations, args.out, trials=args.trials, seed=args.seed, record=not args.no_record, hub_id=args.hub_id
    )
    s = result.stats
    shr = s["shr"]
    print(f"built {result.out}")
    print(f"  {s['n_items']} sentences, {s['n_tuples']} tuples, {s['n_annotations']} judgments")
    print(f"  bins (low/medium/high): {' / '.join(str(v) for v in s['bins']['counts'].values())}")
    print(
        f"  split-half reliability ({shr['trials']} trials, seed {shr['seed']}): "
        f"Pearson {shr['pearson']['mean']:.4f} ± {shr['pearson']['sd']:.4f}, "
        f"Spearman {shr['spearman']['mean']:.4f} ± {shr['spearman']['sd']:.4f}"
    )
    print(f"  fingerprint {s['fingerprint']}")
    if not args.no_record:
        print("  loaders and the lm-eval task now read this folder (fsb build --no-record leaves the previous one in place)")
    return 0


@_command("score")
def _score(args: argparse.Namespace) -> int:
    from ._io import atomic_write
    from .raw import read_annotations
    from .scoring import score_table

    table = score_table(read_annotations(args.annotations))
    text = table.to_csv(index=False, float_format="%.6f", lineterminator="\n")
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        atomic_write(args.out, text)
        print(f"scored {len(table)} items -> {args.out}", file=sys.stderr)
    return 0


@_command("reliability")
def _reliability(args: argparse.Namespace) -> int:
    from .raw import read_annotations
    from .scoring import reliability

    result = reliability(read_annotations(args.annotations), trials=args.trials, seed=args.seed).summary()
    if args.json:
        _print_json(result)
    else:
        print(f"split-half reliability over {result['trials']} trials (seed {result['seed']}):")
        for name in ("pearson", "spearman"):
            print(f"  {name:8s} {result[name]['mean']:.4f} ± {result[name]['sd']:.4f}")
    return 0


@_command("tuples")
def _tuples(args: argparse.Namespace) -> int:
    from . import annotate

    design = annotate.make_tuples(args.items, out=args.out, tuple_size=args.size, appearances=args.appearances, seed=args.seed)
    _print_json(design)
    return 0


@_command("annotate")
def _annotate(args: argparse.Namespace) -> int:
    from . import annotate

    if args.action == "export" and args.format == "label-studio":
        _print_json(annotate.export_label_studio(args.design, args.generations, args.out, seed=args.seed))
    elif args.action == "export":
        n = annotate.export_forms(args.design, args.generations, args.out, seed=args.seed)
        print(f"wrote {n} annotation forms -> {args.out}")
    elif args.format == "label-studio":
        _print_json(annotate.import_label_studio(args.responses, args.out, design_csv=args.tuples))
    else:
        if not args.tuples:
            raise FsbError("--tuples is required for CSV answers (the exported forms or the design)")
        _print_json(annotate.import_judgments(args.responses, args.tuples, args.out, positions=args.positions))
    return 0


@_command("fetch-release")
def _fetch_release(args: argparse.Namespace) -> int:
    from .release import fetch_release, verify_release

    folder = fetch_release(args.dest, url=args.url)
    bad = [rel for rel, ok in verify_release(folder).items() if not ok]
    print(folder)
    return 1 if bad else 0


@_command("eval")
def _eval(args: argparse.Namespace) -> int:
    from .evaluate import run_eval
    from .report import format_report, load_runs

    run_eval(
        args.model,
        args.model_args,
        [t.strip() for t in args.tasks.split(",") if t.strip()],
        output_path=args.output_path,
        limit=args.limit,
        per_bin=args.per_bin,
        dataset=args.dataset,
        batch_size=int(args.batch_size) if str(args.batch_size).isdigit() else args.batch_size,
        device=args.device,
        apply_chat_template=args.apply_chat_template,
        fewshot_as_multiturn=args.fewshot_as_multiturn,
        gen_kwargs=args.gen_kwargs,
        seed=args.seed,
    )
    print(format_report(load_runs(args.output_path), dataset=args.dataset))
    return 0


@_command("report")
def _report(args: argparse.Namespace) -> int:
    from .report import format_report, load_runs, summarize

    runs = load_runs(args.results)
    if args.json:
        _print_json({str(r.path): summarize(r, n_boot=args.bootstrap) for r in runs})
    else:
        print(format_report(runs, dataset=args.dataset, n_boot=args.bootstrap))
    return 0


@_command("main")
def _main_job(args: argparse.Namespace) -> int:
    from .mainjob import run

    return run(args)


# --- argument parsing ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fsb", description="Fifty Shades of Bias: build, score, evaluate and publish the dataset.")
    p.add_argument("--version", action="version", version=f"fsb {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = sub.add_parser("build", help="build the Hugging Face dataset folder from raw generations and judgments")
    b.add_argument(
        "--raw-dir",
        help="a release folder (FSB/FSB_text.csv, FSB/fsb-tuples-annotations.csv); default: a local copy, else the pinned download",
    )
    b.add_argument("--generations", help="a generations file (the release's CSV, or `fsb generate` JSONL) instead of --raw-dir")
    b.add_argument("--annotations", help="a judgments file (Item1..Item4,BestItem,WorstItem) instead of --raw-dir")
    b.add_argument("--out", default="fifty_shades_of_bias", help="output folder (default: ./fifty_shades_of_bias)")
    b.add_argument("--trials", type=pos_int, default=100, help="split-half reliability trials (default 100)")
    b.add_argument("--seed", type=int, default=0, help="split-half reliability seed (default 0)")
    b.add_argument("--no-record", action="store_true", help="do not make this the build that loaders and the lm-eval task find")
    b.add_argument("--hub-id", help="the Hub repo (org/name) the card's loading examples should name, for a build you will publish")

    s = sub.add_parser("score", help="score a best-worst judgments file by counting")
    s.add_argument("annotations", help="CSV with Item1..ItemK,BestItem,WorstItem (labels are opaque)")
    s.add_argument("--out", help="output CSV (item,score_raw,score,n,best,worst); default: standard output")

    r = sub.add_parser("reliability", help="split-half reliability of a judgments file")
    r.add_argument("annotations")
    r.add_argument("--trials", type=pos_int, default=100)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", action="store_true", help="print JSON: {pearson: {mean, sd}, spearman: {...}, trials, seed}")

    t = sub.add_parser("tuples", help="make a best-worst design: each item in k tuples, no two tuples sharing more than 2 items")
    t.add_argument("items", help="a number N (items 1..N), an item list (one id a line, or a CSV with an id column), or a generations file")
    t.add_argument("--out", required=True, help="CSV with tuple_id,Item1..ItemK")
    t.add_argument("--size", type=pos_int, default=4, help="items per tuple (default 4)")
    t.add_argument("--appearances", type=pos_int, default=8, help="tuples per item (default 8, giving 2N 4-tuples)")
    t.add_argument("--seed", type=int, default=0)

    a = sub.add_parser("annotate", help="export tuples for annotators; import their best/worst answers as judgments")
    asub = a.add_subparsers(dest="action", required=True)
    ex = asub.add_parser("export", help="one form per tuple (CSV: tuple_id, Item1..K ids, Text1..K texts), or a Label Studio project")
    ex.add_argument("design", help="design CSV from `fsb tuples`")
    ex.add_argument(
        "--generations", "--items", dest="generations", required=True, help="the texts: a CSV with id and text columns, or generations"
    )
    ex.add_argument("--out", required=True, help="CSV forms; with --format label-studio a folder (labeling_config.xml, tasks.json)")
    ex.add_argument("--format", choices=["csv", "label-studio"], default="csv")
    ex.add_argument("--seed", type=int, help="re-order each tuple (seeded, position-balanced); default: the design's order")
    im = asub.add_parser("import", help="answers (CSV or Label Studio JSON export) -> Item1..K,BestItem,WorstItem[,Annotator,Timestamp]")
    im.add_argument("responses", help="CSV of answers (tuple_id,best,worst[,annotator][,timestamp]) or Label Studio's JSON export")
    im.add_argument("--format", choices=["csv", "label-studio"], default="csv")
    im.add_argument("--tuples", help="the exported forms or the design CSV (required for CSV; checks a Label Studio export)")
    im.add_argument("--out", required=True)
    im.add_argument("--positions", action="store_true", help="best/worst are 1-based positions in --tuples' item order, not ids")

    f = sub.add_parser("fetch-release", help="download the pinned upstream release and check every sha256")
    f.add_argument("--dest", help="folder (default: the cache, $FSB_HOME/release/<commit>)")
    f.add_argument("--url", help="mirror URL template with {commit} and {path}")

    e = sub.add_parser("eval", help="run the lm-eval tasks through lm-eval's Python API (fast start), then print the report")
    e.add_argument("--model", default="hf", help="lm-eval model type (hf, local-completions, local-chat-completions, ...)")
    e.add_argument("--model-args", default="", help="lm-eval model_args, e.g. pretrained=PATH,dtype=float32")
    e.add_argument("--tasks", default="fsb", help="comma-separated: fsb, fsb_ll, fsb_0shot, or single variants (default fsb)")
    e.add_argument("--limit", type=float, help="first N sentences per variant (a smoke test; --per-bin is the stratified sample)")
    e.add_argument("--per-bin", type=pos_int, help="a stratified sample: this many sentences per equispaced score bin")
    e.add_argument("--dataset", help="dataset folder or Hub repo id (default: the last fsb build, $FSB_DATASET, ./fifty_shades_of_bias)")
    e.add_argument("--output-path", default="results/eval", help="where results and samples go (default results/eval)")
    e.add_argument("--batch-size", default=1, help="lm-eval batch size (int or auto)")
    e.add_argument("--device", help="cpu, cuda, ... (default: cuda if torch sees a GPU, else cpu)")
    e.add_argument("--apply-chat-template", action="store_true")
    e.add_argument("--fewshot-as-multiturn", action="store_true")
    e.add_argument("--gen-kwargs", help="override generation settings, e.g. temperature=0")
    e.add_argument("--seed", type=int, default=0)

    rp = sub.add_parser("report", help="metrics with 95%% bootstrap intervals from lm-eval output, beside the human ceiling")
    rp.add_argument("results", nargs="+", help="lm-eval --output_path folders (or results_*.json files), made with --log_samples")
    rp.add_argument("--dataset", help="dataset whose stats.json gives the human ceiling (default: what loaders find)")
    rp.add_argument("--bootstrap", type=pos_int, default=1000, help="bootstrap resamples (default 1000)")
    rp.add_argument("--json", action="store_true")

    m = sub.add_parser("main", help="the main job: build from the release, load it back, evaluate the default model, report")
    m.add_argument("--out", default="fifty_shades_of_bias", help="dataset folder (default: ./fifty_shades_of_bias)")
    m.add_argument("--raw-dir", help="release folder (default: a local copy, else the pinned download)")
    m.add_argument("--skip-eval", action="store_true", help="build and load only")
    m.add_argument("--per-bin", type=pos_int, default=None, help="sentences per equispaced score bin in the evaluation sample")
    m.add_argument("--results", default="results/main", help="where lm-eval writes results and samples")

    # Stages that own their command lines: each module's add_commands(sub, handlers) adds its subcommands.
    from . import cli_analysis, cli_generate, cli_publish

    for stage in (cli_generate, cli_publish, cli_analysis):
        stage.add_commands(sub, _HANDLERS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `fsb` console script: every expected failure is one line and exit code 2."""
    import os

    args = _parser().parse_args(argv)
    try:
        return _HANDLERS[args.command](args)
    except KeyboardInterrupt:
        print(f"fsb {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        message = _expected_failure(e)
        if message is None or os.environ.get("FSB_DEBUG") == "1":
            raise
        print(f"fsb {args.command}: error: {message}", file=sys.stderr)
        return 2


def _expected_failure(e: BaseException) -> str | None:
    """The one-line message of an expected failure (fsb's own errors, the operating system's refusals,
    an unreachable network), or None for a bug, which keeps its traceback."""
    if isinstance(e, FsbError):
        return " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, OSError) and not isinstance(e, ConnectionError):
        import os

        cause = e.strerror or str(e) or type(e).__name__
        paths = [os.fspath(p) for p in (e.filename, e.filename2) if p is not None]
        return f"{' -> '.join(paths)}: {cause}" if paths else cause
    if isinstance(e, ConnectionError):  # e.g. datasets cannot reach a Hub repo (offline, or no such repo)
        return " ".join(str(e).split()) or "connection failed"
    return None


if __name__ == "__main__":
    sys.exit(main())
