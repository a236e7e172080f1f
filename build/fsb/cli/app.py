"""`fsb`: a thin command line over the stage modules. Each subcommand parses arguments, calls one
importable function with keyword arguments, and prints; heavy imports happen inside the handlers so
`fsb --help` is fast. Every module registers its subcommands the same way (fsb.cli.registry.Commands)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fsb import __version__
from fsb.cli.argtypes import OneLineParser, batch_size, pos_int, resamples, seed, trials
from fsb.cli.registry import Commands, Handler
from fsb.core.errors import FsbError

__all__ = ["commands", "main"]

commands = Commands()

# The first line of each CSV a command writes. An existing --out is replaced only if fsb wrote it and nobody changed
# it since (its sha256 is recorded in the folder's .fsb-files.json), or with --force; a file with another first
# line is plainly someone else's, and the refusal says so.
SCORES_HEADER = r"item,score(_raw)?,.*"
DESIGN_HEADER = r"tuple_id(,Item\d+)+"
FORMS_HEADER = r"tuple_id(,Item\d+)+(,Text\d+)+"
JUDGMENTS_HEADER = r"Item\d+(,Item\d+)*,BestItem,WorstItem(,Annotator)?(,Timestamp)?"
SCORES_KIND = "a scores file from `fsb score`"

_INVALID_HELP = (
    "rows whose tuple repeats an item or whose best = worst (quality-control rows): refuse (default) stops at the first; "
    "count scores them as the NRC Perl counting script does (an item counts once per slot, best = worst counts both ways); "
    "drop leaves them out. Either way the number of such rows is printed, by kind, with the first line of each"
)


def _print_json(obj: object) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


def _output_file(path: str, header: str, kind: str, *, force: bool, inputs: Sequence[str | None] = ()) -> Path:
    """Refuse, before any work, an --out that is a folder, a device or FIFO, one of `inputs` (by path or inode,
    even with --force), or a file that its folder's record does not know as an earlier `kind` output,
    unchanged (unless `force`), through the output layer (`fsb.core.output.OutputPlan`); the header is an
    extra refusal (plainly a user's file), never a reason to accept one."""
    from fsb.core.files import check_recorded_file
    from fsb.core.output import OutputPlan

    plan = OutputPlan("fsb", force=force)
    for item in inputs:
        plan.input(item, "an input")
    plan.output(path, "--out", kind=kind)
    plan.check()
    return check_recorded_file(path, force=force, kind=kind, header=header)


def _force(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="replace --out even if it is not this command's earlier output, unchanged")


# --- build and scoring --------------------------------------------------------------------------


def _build_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument(
        "--raw-dir",
        help="a release folder (FSB/FSB_text.csv, FSB/fsb-tuples-annotations.csv); default: a local copy, else the pinned download",
    )
    b.add_argument("--generations", help="a generations file (the release's CSV, or `fsb generate` JSONL) instead of --raw-dir")
    b.add_argument("--annotations", help="a judgments file (Item1..Item4,BestItem,WorstItem) instead of --raw-dir")
    b.add_argument(
        "--out",
        default="fifty_shades_of_bias",
        help="output folder (default: ./fifty_shades_of_bias); replaced only if absent, empty or an unchanged earlier build",
    )
    b.add_argument("--trials", type=trials, default=100, help="split-half reliability trials (default 100)")
    b.add_argument("--seed", type=seed, default=0, help="split-half reliability seed (default 0)")
    b.add_argument("--no-record", action="store_true", help="do not make this the build that loaders and the lm-eval task find")
    b.add_argument("--hub-id", help="the Hub repo (org/name) the card's loading examples should name, for a build you will publish")
    b.add_argument("--invalid", choices=("refuse", "count", "drop"), default="refuse", help=_INVALID_HELP)
    b.add_argument(
        "--rounds",
        metavar="MANIFEST",
        help="a rounds manifest (YAML: rounds: [{round, name, generations, annotations}], paths relative to it) "
        "instead of --raw-dir or --generations/--annotations; scores are computed over all rounds' judgments",
    )
    b.add_argument(
        "--previous",
        metavar="DIR|ORG/NAME@REV",
        help="the previous version (a build folder, or a Hub revision such as ORG/NAME@v1.0.0): the card gets a "
        "'Changes since' section from `fsb diff`",
    )
    b.add_argument("--previous-label", metavar="LABEL", help="how the card names the previous version (default: REV, or the folder's name)")


@commands.add("build", arguments=_build_arguments, help="build the Hugging Face dataset folder from raw generations and judgments")
def _build(args: argparse.Namespace) -> int:
    from fsb.data.dataset import build_dataset
    from fsb.data.release import ANNOTATIONS, GENERATIONS, release_dir

    generations = annotations = None
    if args.rounds:
        if args.generations or args.annotations or args.raw_dir:
            raise FsbError("give --rounds, or --raw-dir, or both --generations and --annotations (one of the three)")
    elif args.generations or args.annotations:
        if not (args.generations and args.annotations) or args.raw_dir:
            raise FsbError("give --raw-dir, or both --generations and --annotations")
        generations, annotations = Path(args.generations), Path(args.annotations)
    else:
        folder = release_dir(raw_dir=args.raw_dir)
        generations, annotations = folder / GENERATIONS, folder / ANNOTATIONS
    with _previous_build(args.previous) as (previous, label):
        result = build_dataset(
            generations=generations,
            annotations=annotations,
            out=args.out,
            rounds=args.rounds,
            trials=args.trials,
            seed=args.seed,
            record=not args.no_record,
            hub_id=args.hub_id,
            invalid=args.invalid,
            previous=previous,
            previous_label=args.previous_label or label,
        )
    s = result.stats
    shr = s["shr"]
    if "invalid" in s:
        kinds = ", ".join(f"{v['rows']} with {k} (first on line {v['first_line']})" for k, v in s["invalid"]["irregular"].items())
        print(f"irregular judgments ({s['invalid']['policy']}): {kinds}", file=sys.stderr)
    print(f"built {result.out}")
    print(f"  {s['n_items']} sentences, {s['n_tuples']} tuples, {s['n_annotations']} judgments")
    print(f"  bins (low/medium/high): {' / '.join(str(v) for v in s['bins']['counts'].values())}")
    from fsb.data.reference import placed_split_half

    for line in placed_split_half(shr, release=bool(s["release"]["is_release"])):
        print(f"  {line}")
    if len(s["rounds"]) > 1:
        for r in s["rounds"]:
            print(
                f"  round {r['round']} ({r['name']}): {r['sentences']} sentences, {r['judgments']} judgments, {r['new_tuples']} new tuples"
            )
    print(f"  fingerprint {s['fingerprint']}")
    if "changes_since" in s:
        print(f"  the card carries the changes since {s['changes_since']['label']}:")
        print("\n".join("    " + line for line in s["changes_since"]["summary"].splitlines()))
    for warning in (*result.notes, *result.warnings):
        print(f"fsb build: warning: {warning}", file=sys.stderr)
    if not args.no_record and not result.warnings:
        print("  loaders and the lm-eval task now read this folder (fsb build --no-record leaves the previous one in place)")
    return 0


@contextlib.contextmanager
def _previous_build(arg: str | None) -> Iterator[tuple[str | None, str | None]]:
    """(folder, label) of `--previous`: a folder as given, or ORG/NAME@REV downloaded (from $HF_ENDPOINT)
    into a temporary folder that lives as long as the build needs it."""
    if arg is None:
        yield None, None
        return
    if os.path.exists(arg) or arg.count("@") != 1:
        yield arg, Path(arg).name
        return
    repo_id, revision = arg.split("@")
    import tempfile

    from fsb.data.publish import download_build

    with tempfile.TemporaryDirectory(prefix="fsb-previous-") as tmp:
        yield str(download_build(repo_id, revision, Path(tmp) / "previous")), revision


def _score_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("annotations", help="CSV with Item1..ItemK,BestItem,WorstItem (labels are opaque; all-digit labels are integer ids)")
    s.add_argument(
        "--out",
        help="output CSV, most biased first: counting item,score_raw,score,n,best,worst; maxdiff item,score,se,n,best,worst; "
        "--ci adds ci_low,ci_high (default: standard output)",
    )
    s.add_argument(
        "--method",
        choices=("counting", "maxdiff"),
        default="counting",
        help="counting: score = ((B - W) / n + 1) / 2 in [0, 1]; maxdiff: score = the fitted best-worst multinomial logit "
        "utility (logit scale, centred to mean 0), plus its standard error se",
    )
    s.add_argument("--ci", action="store_true", help="add ci_low,ci_high: 95%% intervals of score by bootstrap over tuples")
    s.add_argument("--bootstrap", type=resamples, default=200, help="bootstrap resamples for --ci (default 200)")
    s.add_argument("--seed", type=seed, default=0, help="bootstrap seed (default 0)")
    s.add_argument("--invalid", choices=("refuse", "count", "drop"), default="refuse", help=_INVALID_HELP)
    _force(s)


@commands.add(
    "score", arguments=_score_arguments, help="score a best-worst judgments file (counting, or a MaxDiff fit), optionally with intervals"
)
def _score(args: argparse.Namespace) -> int:
    from fsb.bws.scoring import format_csv, score_columns
    from fsb.core.files import recorded_write
    from fsb.core.tables import describe_irregular, read_annotations

    to_file = args.out not in (None, "-")
    if to_file:
        _output_file(args.out, SCORES_HEADER, SCORES_KIND, force=args.force, inputs=[args.annotations])
    ann = read_annotations(path=args.annotations, invalid=args.invalid)
    if note := describe_irregular(ann):
        print(note, file=sys.stderr)
    notes: list[str] = []
    cols = score_columns(ann, method=args.method, ci=args.ci, n_boot=args.bootstrap, seed=args.seed, notes=notes)
    for note in notes:  # items left without an interval (ci_low, ci_high empty), and why
        print(f"note: {note}", file=sys.stderr)
    text = format_csv(cols)
    if not to_file:
        sys.stdout.write(text)
    else:
        recorded_write(args.out, text, force=args.force, kind=SCORES_KIND, header=SCORES_HEADER)
        print(f"scored {cols['item'].size} items ({args.method}) -> {args.out}", file=sys.stderr)
    return 0


def _reliability_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("annotations", help="CSV with Item1..ItemK,BestItem,WorstItem[,Annotator] (as for fsb score)")
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
    r.add_argument("--invalid", choices=("refuse", "count", "drop"), default="refuse", help=_INVALID_HELP)


@commands.add("reliability", arguments=_reliability_arguments, help="split-half reliability of a judgments file")
def _reliability(args: argparse.Namespace) -> int:
    from fsb.bws.scoring import annotator_agreement, reliability
    from fsb.core.tables import describe_irregular, read_annotations

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
    if args.json:
        _print_json(result)
        return 0
    from fsb.data.reference import is_release_judgments, placed_split_half

    print("split-half reliability, mean ± sd over trials:")
    for line in placed_split_half(result, release=is_release_judgments(args.annotations) and ann.dropped == 0):
        print(f"  {line}")
    if result["pearson"]["mean"] != result["pearson"]["mean"]:  # NaN
        print("  undefined: too few items were scored in both halves (each half needs judgments of 2+ distinct items)")
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
    t.add_argument("items", help="a number N (items 1..N), an item list (one id a line, or a CSV with an id column), or a generations file")
    t.add_argument("--out", required=True, help="CSV with tuple_id,Item1..ItemK")
    t.add_argument("--size", type=pos_int, default=4, help="items per tuple (default 4)")
    t.add_argument("--appearances", "--k", type=pos_int, default=8, help="tuples per (new) item (default 8, giving 2N 4-tuples)")
    t.add_argument("--seed", type=seed, default=0)
    t.add_argument(
        "--extend",
        metavar="EXISTING",
        help="tie ITEMS (new items) to an existing study, a judgments or design file: writes only the new tuples, each holding "
        ">= 1 existing item spread over the existing scores; the tuple size is EXISTING's",
    )
    _force(t)


@commands.add(
    "tuples",
    arguments=_tuples_arguments,
    help="make a best-worst design: each item in k tuples, no two tuples sharing more than 2 items (--extend: new items tied to a study)",
)
def _tuples(args: argparse.Namespace) -> int:
    from fsb.bws import tuples

    _output_file(args.out, DESIGN_HEADER, tuples.DESIGN_KIND, force=args.force, inputs=[args.items, args.extend])
    if args.extend:
        from fsb.bws.extend import make_extension

        result = make_extension(items=args.items, existing=args.extend, out=args.out, k=args.appearances, seed=args.seed, force=args.force)
        _print_json(result)
        return 0
    design = tuples.make_tuples(
        items=args.items, out=args.out, tuple_size=args.size, appearances=args.appearances, seed=args.seed, force=args.force
    )
    _print_json(design)
    return 0


def _annotate_arguments(a: argparse.ArgumentParser) -> None:
    asub = a.add_subparsers(dest="action", required=True)
    ex = asub.add_parser("export", help="one form per tuple (CSV: tuple_id, Item1..K ids, Text1..K texts), or a Label Studio project")
    ex.add_argument("design", help="design CSV from `fsb tuples`")
    ex.add_argument(
        "--generations",
        "--items",
        dest="generations",
        action="append",
        required=True,
        help="the texts: a CSV with id and text columns, or generations; repeat to join several files (an extended design "
        "shows existing and new items: --items FSB/FSB_text.csv --items round2/generations.jsonl); ids unique across files",
    )
    ex.add_argument("--out", required=True, help="CSV forms; with --format label-studio a folder (labeling_config.xml, tasks.json)")
    ex.add_argument("--format", choices=["csv", "label-studio"], default="csv")
    ex.add_argument("--seed", type=seed, help="re-order each tuple (seeded, position-balanced); default: the design's order")
    _force(ex)
    im = asub.add_parser("import", help="answers (CSV or Label Studio JSON export) -> Item1..K,BestItem,WorstItem[,Annotator,Timestamp]")
    im.add_argument("responses", help="CSV of answers (tuple_id,best,worst[,annotator][,timestamp]) or Label Studio's JSON export")
    im.add_argument("--format", choices=["csv", "label-studio"], default="csv")
    im.add_argument("--tuples", help="the exported forms or the design CSV (required for CSV; checks a Label Studio export)")
    im.add_argument("--out", required=True)
    im.add_argument("--positions", action="store_true", help="best/worst are 1-based positions in --tuples' item order, not ids")
    _force(im)
    from fsb.cli import annotate_llm as cli_llm  # `fsb annotate llm`: its own registry, installed beside export and import

    llm_handlers: dict[str, Handler] = {}
    cli_llm.commands.install(asub, llm_handlers)
    a.set_defaults(annotate_handlers=llm_handlers)


@commands.add(
    "annotate",
    arguments=_annotate_arguments,
    help="export tuples for annotators; import their best/worst answers as judgments; or let a model annotate (llm)",
)
def _annotate(args: argparse.Namespace) -> int:
    from fsb.annotate import forms as annotate

    if args.action in args.annotate_handlers:
        return args.annotate_handlers[args.action](args)
    if args.action == "export" and args.format == "label-studio":
        from fsb.annotate.labelstudio import CONFIG_FILE, TASKS_FILE
        from fsb.core.output import OutputPlan

        plan = OutputPlan("fsb annotate export", force=args.force)
        for path in (args.design, *args.generations):
            plan.input(path, "an input")
        plan.output(Path(args.out) / TASKS_FILE, "--out", kind=annotate.LABEL_STUDIO_KIND)
        plan.output(Path(args.out) / CONFIG_FILE, "--out", kind=annotate.LABEL_STUDIO_KIND)
        plan.check()
        result = annotate.export_label_studio(
            design_csv=args.design, items=args.generations, out_dir=args.out, seed=args.seed, force=args.force
        )
        _print_json(result)
    elif args.action == "export":
        _output_file(args.out, FORMS_HEADER, annotate.FORMS_KIND, force=args.force, inputs=[args.design, *args.generations])
        n = annotate.export_forms(design_csv=args.design, items=args.generations, out=args.out, seed=args.seed, force=args.force)
        print(f"wrote {n} annotation forms -> {args.out}")
    else:
        _output_file(args.out, JUDGMENTS_HEADER, annotate.JUDGMENTS_KIND, force=args.force, inputs=[args.responses, args.tuples])
        if args.format == "label-studio":
            result = annotate.import_label_studio(export_json=args.responses, out=args.out, design_csv=args.tuples, force=args.force)
        elif not args.tuples:
            raise FsbError("--tuples is required for CSV answers (the exported forms or the design)")
        else:
            result = annotate.import_judgments(
                responses_csv=args.responses, design_csv=args.tuples, out=args.out, positions=args.positions, force=args.force
            )
        _print_json(result)
    return 0


def _fetch_release_arguments(f: argparse.ArgumentParser) -> None:
    f.add_argument("--dest", help="folder (default: the cache, $FSB_HOME/release/<commit>)")
    f.add_argument("--url", help="mirror URL template with {commit} and {path}")


@commands.add("fetch-release", arguments=_fetch_release_arguments, help="download the pinned upstream release and check every sha256")
def _fetch_release(args: argparse.Namespace) -> int:
    from fsb.data.release import check_release, fetch_release

    folder = fetch_release(dest=args.dest, url=args.url)
    check_release(folder)
    print(folder)
    return 0


# --- evaluation ---------------------------------------------------------------------------------


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
    e.add_argument("--dataset", help="dataset folder or Hub repo id (default: $FSB_DATASET, ./fifty_shades_of_bias, the last fsb build)")
    e.add_argument("--output-path", default="results/eval", help="where results and samples go (default results/eval)")
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
    m.add_argument("--out", default="fifty_shades_of_bias", help="dataset folder (default: ./fifty_shades_of_bias)")
    m.add_argument("--raw-dir", help="release folder (default: a local copy, else the pinned download)")
    m.add_argument("--skip-eval", action="store_true", help="build, load and run the analyses; skip the model evaluation")
    m.add_argument(
        "--per-bin",
        type=pos_int,
        default=None,
        help="evaluate a stratified sample of this many sentences per equispaced score bin "
        "(default: a simple random sample of 32; a stratified one inflates correlations)",
    )
    m.add_argument("--results", default="results/main", help="where lm-eval writes results and samples")
    m.add_argument(
        "--force",
        action="store_true",
        help="replace RESULTS' report.txt, timings.json and baseline files even if they are not unchanged since fsb wrote them",
    )


@commands.add(
    "main",
    arguments=_main_arguments,
    help="the main job: build from the release, load it back, run the paper's analyses, evaluate the default model "
    "on a sample and the baselines, report",
)
def _main_job(args: argparse.Namespace) -> int:
    from fsb.evaluate.mainjob import run

    return run(raw_dir=args.raw_dir, out=args.out, results=args.results, skip_eval=args.skip_eval, per_bin=args.per_bin, force=args.force)


# --- argument parsing ---------------------------------------------------------------------------


def _parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    p = OneLineParser(
        prog="fsb",
        description=(
            "Fifty Shades of Bias: build the dataset from best-worst judgments, score and check judgments, run the paper's "
            "analyses, generate and annotate new sentences, evaluate models and place them beside baselines and the human "
            "reference, and publish the dataset."
        ),
    )
    p.add_argument("--version", action="version", version=f"fsb {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    handlers: dict[str, Handler] = {}
    commands.install(sub, handlers)

    from fsb.cli import analyse as cli_analysis
    from fsb.cli import generate as cli_generate
    from fsb.cli import publish as cli_publish
    from fsb.cli import report as cli_results

    for stage in (cli_generate, cli_publish, cli_analysis, cli_results):
        registry = getattr(stage, "commands", None)
        if isinstance(registry, Commands):
            registry.install(sub, handlers)
        else:  # a module still on the old pattern: add_commands(sub, handlers)
            stage.add_commands(sub, handlers)
    return p, handlers


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `fsb` console script: every expected failure is one line and exit code 2.

    While it runs, stdout survives its reader closing early (`fsb build | head -1`): the rest of the output
    goes to /dev/null, the command finishes its work and exits with that work's status."""
    guard = _ReaderSafeStdout(sys.stdout)
    sys.stdout = guard  # type: ignore[assignment]
    try:
        return _main(argv)
    finally:
        guard.flush()
        sys.stdout = guard.stream


class _ReaderSafeStdout:
    """sys.stdout for a command: a write or flush that fails because the pipe's reader has gone (EPIPE)
    points stdout at /dev/null and carries on, as the Python docs recommend ("Note on SIGPIPE", signal
    module), so a command never reports a failure, or stops half way, for work that completes."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def _reader_gone(self) -> None:
        import os

        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a file descriptor (e.g. captured): nothing to redirect
            pass

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._reader_gone()
            with contextlib.suppress(OSError, ValueError):
                self.stream.flush()  # the buffered bytes now go to /dev/null, not to a failure at exit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _main(argv: Sequence[str] | None) -> int:
    import os

    parser, handlers = _parser()
    args = parser.parse_args(argv)
    try:
        return handlers[args.command](args)
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
        return " ".join((f"{' -> '.join(paths)}: {cause}" if paths else cause).split())
    if isinstance(e, ConnectionError):  # e.g. datasets cannot reach a Hub repo (offline, or no such repo)
        return " ".join(str(e).split()) or "connection failed"
    if isinstance(e, MemoryError):  # e.g. numpy cannot allocate an array that large
        cause = " ".join(str(e).split())
        return f"out of memory{f' ({cause})' if cause else ''}: use smaller counts (--trials, --bootstrap, --k) or a smaller input"
    return None


if __name__ == "__main__":
    sys.exit(main())
