"""CLI subcommands of the annotation stage: `fsb annotate export` (forms or a Label Studio project), `fsb
annotate import` (answers into judgments) and `fsb annotate llm` (a model as annotator, fsb.cli.annotate_llm),
all three in one registry (`actions`) dispatched like every other command. Import nothing heavy at module level."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fsb.cli.argtypes import input_file, path_arg, seed
from fsb.cli.common import FORMS_HEADER, JUDGMENTS_HEADER, add_force, output_file, print_json
from fsb.cli.registry import Commands, Handler
from fsb.core.errors import FsbError

__all__ = ["actions", "commands"]

commands = Commands()


FORMATS = ("csv", "label-studio")  # the answers' and forms' formats, defined once

# `fsb annotate ACTION`: export, import and llm, one registry, each action a Command like any other.
actions = Commands()


def _export_arguments(ex: argparse.ArgumentParser) -> None:
    ex.add_argument("design", type=input_file, help="design CSV from `fsb tuples`")
    ex.add_argument(
        "--items",
        "--generations",
        type=input_file,
        dest="generations",
        metavar="ITEMS",
        action="append",
        required=True,
        help="the texts: a CSV with id and text columns, or generations; repeat to join several files (an extended design "
        "shows existing and new items: --items FSB/FSB_text.csv --items round2/generations.jsonl); ids unique across files",
    )
    ex.add_argument(
        "--out", type=path_arg, required=True, help="CSV forms; with --format label-studio a folder (labeling_config.xml, tasks.json)"
    )
    ex.add_argument("--format", choices=FORMATS, default="csv")
    ex.add_argument("--seed", type=seed, help="re-order each tuple (seeded, position-balanced); default: the design's order")
    ex.add_argument(
        "--study",
        type=path_arg,
        metavar="STUDY.yaml",
        help="word the export from a study file (question, the two labels, what high means; the file `fsb build --study` "
        "takes): the Label Studio config asks its question, and CSV forms get its instructions beside them "
        "(FORMS.instructions.txt); default: FSB's wording, and no instructions file",
    )
    ex.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON on stdout: CSV forms {forms, out, instructions}; a Label Studio project always "
        "prints its JSON summary",
    )
    add_force(ex)


@actions.add(
    "export",
    arguments=_export_arguments,
    help="one form per tuple (CSV: tuple_id, Item1..K ids, Text1..K texts), or a Label Studio project",
    description="Write the design's tuples for human annotators: a CSV form per tuple, or a Label Studio project "
    "(labeling_config.xml and tasks.json, written as one unit: a kill leaves both old or both new).",
)
def _export(args: argparse.Namespace) -> int:
    from fsb.annotate import forms as annotate
    from fsb.annotate.study import read_study
    from fsb.core.output import OutputPlan
    from fsb.core.seals import check_recorded_file

    plan = OutputPlan("fsb annotate export", force=args.force)
    for path in (args.design, *args.generations):
        plan.input(path, str(path))
    plan.input(args.study, "--study")
    if args.format == "label-studio":
        from fsb.annotate.labelstudio import CONFIG_FILE, TASKS_FILE

        plan.output(Path(args.out) / TASKS_FILE, "--out", kind=annotate.LABEL_STUDIO_KIND)
        plan.output(Path(args.out) / CONFIG_FILE, "--out", kind=annotate.LABEL_STUDIO_KIND)
    else:
        plan.output(args.out, "--out", kind=annotate.FORMS_KIND)
        if args.study:
            plan.output(annotate.instructions_path(args.out), "the instructions beside --out", kind=annotate.INSTRUCTIONS_KIND)
    plan.check()
    if args.format == "csv":  # the header: an extra refusal of a file plainly not fsb's forms (cli.common.output_file)
        check_recorded_file(args.out, force=args.force, kind=annotate.FORMS_KIND, header=FORMS_HEADER)
    study = read_study(args.study) if args.study else None  # before any work: a bad study file changes nothing
    if args.format == "label-studio":
        result = annotate.export_label_studio(
            design_csv=args.design, items=args.generations, out_dir=args.out, seed=args.seed, force=args.force, study=study
        )
        print_json(result)
        return 0
    n = annotate.export_forms(design_csv=args.design, items=args.generations, out=args.out, seed=args.seed, force=args.force, study=study)
    instructions = str(annotate.instructions_path(args.out)) if study is not None else None
    if args.json:  # the summary is data only when asked for; otherwise it is commentary, on stderr
        print_json({"forms": n, "out": str(args.out), "instructions": instructions})
        return 0
    print(f"wrote {n} annotation forms -> {args.out}", file=sys.stderr)
    if instructions is not None:
        print(f"wrote the study's instructions for annotators -> {instructions}", file=sys.stderr)
    return 0


LAYOUTS = ("best-worst-tools", "mturk", "columns")  # the layouts other tools write (fsb.annotate.layouts), besides label-studio


def _import_arguments(im: argparse.ArgumentParser) -> None:
    im.add_argument(
        "responses",
        type=input_file,
        nargs="+",
        metavar="FILE",
        help="answers (tuple_id,best,worst[,annotator][,timestamp]), Label Studio's JSON or CSV export, or another tool's "
        "judgments (--format); best-worst-tools: a file, a folder of per-participant .csv files, or several files (raw/*)",
    )
    im.add_argument(
        "--format",
        choices=(*FORMATS, *LAYOUTS),
        default="csv",
        help="csv: answers to fsb's forms (needs --tuples); label-studio: its JSON or CSV export; best-worst-tools: Hollis's "
        "best,worst,option1..optionK; mturk: an MTurk batch results CSV (Input.Item1..K, Answer.best, Answer.worst, WorkerId; "
        "Rejected assignments left out); columns: any CSV, with --items-cols, --best-col, --worst-col",
    )
    im.add_argument(
        "--tuples", type=input_file, help="the exported forms or the design CSV (required for csv; checks a Label Studio JSON export)"
    )
    im.add_argument("--out", type=path_arg, required=True, help="the judgments CSV (Item1..K,BestItem,WorstItem[,Annotator,Timestamp])")
    im.add_argument(
        "--positions", action="store_true", help="best/worst are 1-based positions in the item order, not ids (csv, mturk, columns)"
    )
    im.add_argument(
        "--items-cols", metavar="A,B,..", help="the item columns, in order (columns; or another MTurk template or option columns)"
    )
    im.add_argument("--best-col", metavar="COL", help="the column of the best choice (columns; default best, Answer.best)")
    im.add_argument("--worst-col", metavar="COL", help="the column of the worst choice (columns; default worst, Answer.worst)")
    im.add_argument(
        "--annotator-col",
        metavar="COL",
        help="the annotator's column, kept as Annotator (default: best-worst-tools User or uuid, else the file's name in a folder; "
        "mturk WorkerId; columns none)",
    )
    add_force(im)


def _column_map(args: argparse.Namespace) -> object:
    """The --items-cols/--best-col/--worst-col/--annotator-col map, refused (not ignored) where the layout is fixed."""
    from fsb.annotate.layouts import ColumnMap

    given = [f"--{n.replace('_', '-')}" for n in ("items_cols", "best_col", "worst_col", "annotator_col") if getattr(args, n) is not None]
    if given and args.format not in LAYOUTS:
        raise FsbError(f"{given[0]} maps another tool's columns: it applies to --format {', '.join(LAYOUTS)}, not {args.format}")
    if args.tuples and args.format in LAYOUTS:
        raise FsbError(f"--tuples checks answers to fsb's forms and Label Studio exports; --format {args.format} files hold their items")
    if args.positions and args.format in ("label-studio", "best-worst-tools"):
        always = "positions" if args.format == "label-studio" else "the items themselves"
        raise FsbError(f"--positions does not apply to --format {args.format}: its choices are always {always}")
    items = [c.strip() for c in args.items_cols.split(",")] if args.items_cols is not None else None
    if items is not None and (len(items) < 2 or not all(items) or len(set(items)) < len(items)):
        raise FsbError(f"--items-cols needs 2 or more distinct column names, comma-separated, got {args.items_cols!r}")
    cmap = ColumnMap(items, args.best_col, args.worst_col, args.annotator_col)
    cmap.check()  # before any work: an empty name, or one column in two roles
    return cmap


@actions.add(
    "import",
    arguments=_import_arguments,
    help="answers (CSV, Label Studio, best-worst tools, MTurk, any columns) -> Item1..K,BestItem,WorstItem[,Annotator,Timestamp]",
    description="Turn annotators' answers, or judgments in the layout another tool writes, into the judgments file that fsb "
    "score, fsb reliability and fsb build read (the one door: those read fsb's layout only); every answer is checked. "
    "Prints a JSON summary on stdout.",
)
def _import(args: argparse.Namespace) -> int:
    from fsb.annotate import forms as annotate
    from fsb.annotate import layouts, layouts_files

    columns = _column_map(args)
    sources, inputs = args.responses, list(args.responses)
    if args.format == "best-worst-tools":  # every file read is an input: an --out among them is refused, even with --force
        inputs += layouts_files.participant_files(sources).files
    elif Path(sources[0]).is_dir():
        raise FsbError(f"{sources[0]} is a folder: only --format best-worst-tools reads a folder (one .csv file a participant)")
    elif len(sources) > 1:
        raise FsbError(f"--format {args.format} reads one file; only --format best-worst-tools reads several files")
    output_file(args.out, JUDGMENTS_HEADER, annotate.JUDGMENTS_KIND, force=args.force, inputs=[*inputs, args.tuples])
    args.responses = sources[0] if args.format != "best-worst-tools" else sources
    ls_json = args.format == "label-studio" and layouts.is_json(args.responses)
    if args.format not in ("columns", "best-worst-tools") and not ls_json:
        layouts.check_layout(args.responses, args.format)  # a file of another layout: one line naming it and the --format
    if ls_json:
        result = annotate.import_label_studio(export_json=args.responses, out=args.out, design_csv=args.tuples, force=args.force)
    elif args.format == "label-studio" and args.tuples:
        raise FsbError("--tuples checks a Label Studio JSON export; its CSV export is read on its own")
    elif args.format in (*LAYOUTS, "label-studio"):
        result = layouts.import_layout(args.responses, args.format, args.out, columns=columns, positions=args.positions, force=args.force)
    elif not args.tuples:
        unknown = "tuple_id" not in {h.strip() for h in layouts_files.first_line(Path(args.responses))}
        raise FsbError(
            "--tuples is required for CSV answers (the exported forms or the design)"
            + (
                "; this file has no tuple_id column: another tool's columns are read with --format columns --items-cols A,B,.. "
                "--best-col X --worst-col Y"
                if unknown
                else ""
            )
        )
    else:
        result = annotate.import_judgments(
            responses_csv=args.responses, design_csv=args.tuples, out=args.out, positions=args.positions, force=args.force
        )
    print_json(result)
    return 0


def _annotate_arguments(a: argparse.ArgumentParser) -> None:
    from fsb.cli import annotate_llm as cli_llm  # `fsb annotate llm`: registered in its own module, installed here

    asub = a.add_subparsers(dest="action", required=True, metavar="ACTION")
    handlers: dict[str, Handler] = {}
    actions.install(asub, handlers)
    cli_llm.commands.install(asub, handlers)
    a.set_defaults(annotate_handlers=handlers)


@commands.add(
    "annotate",
    arguments=_annotate_arguments,
    help="export tuples for annotators; import their best/worst answers as judgments; or let a model annotate (llm)",
    description="The annotation stage: `export` writes forms or a Label Studio project, `import` turns answers into "
    "judgments, `llm` lets a model answer the same best-worst questions.",
)
def _annotate(args: argparse.Namespace) -> int:
    return int(args.annotate_handlers[args.action](args))
