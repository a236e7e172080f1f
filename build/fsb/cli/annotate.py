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


def _import_arguments(im: argparse.ArgumentParser) -> None:
    im.add_argument(
        "responses", type=input_file, help="CSV of answers (tuple_id,best,worst[,annotator][,timestamp]) or Label Studio's JSON export"
    )
    im.add_argument("--format", choices=FORMATS, default="csv")
    im.add_argument(
        "--tuples", type=input_file, help="the exported forms or the design CSV (required for CSV; checks a Label Studio export)"
    )
    im.add_argument("--out", type=path_arg, required=True, help="the judgments CSV (Item1..K,BestItem,WorstItem[,Annotator,Timestamp])")
    im.add_argument("--positions", action="store_true", help="best/worst are 1-based positions in --tuples' item order, not ids")
    add_force(im)


@actions.add(
    "import",
    arguments=_import_arguments,
    help="answers (CSV or Label Studio JSON export) -> Item1..K,BestItem,WorstItem[,Annotator,Timestamp]",
    description="Turn annotators' answers into the judgments file that fsb score, fsb reliability and fsb build read; "
    "every answer is checked against its tuple. Prints a JSON summary on stdout.",
)
def _import(args: argparse.Namespace) -> int:
    from fsb.annotate import forms as annotate

    output_file(args.out, JUDGMENTS_HEADER, annotate.JUDGMENTS_KIND, force=args.force, inputs=[args.responses, args.tuples])
    if args.format == "label-studio":
        result = annotate.import_label_studio(export_json=args.responses, out=args.out, design_csv=args.tuples, force=args.force)
    elif not args.tuples:
        raise FsbError("--tuples is required for CSV answers (the exported forms or the design)")
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
