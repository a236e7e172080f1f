"""CLI subcommands of the generation stage (`fsb seeds`, `fsb generate`, `fsb explain`).

Kept apart from cli.py so the generation stage owns its command line: `commands` (the `_commands.Commands`
registry) holds the three subcommands, each with its arguments function; cli.py installs it. The
handlers print; the work is done by `fsb.engine`, `fsb.generate.generations`, `fsb.generate.explain` and `fsb.generate.seeds`.
Import nothing heavy at module level: this module is imported for every `fsb` invocation.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fsb.cli.argtypes import input_file, nonneg_int, path_arg, pos_int, seed, shots
from fsb.cli.engine_args import add_endpoint_options
from fsb.cli.registry import Commands

commands = Commands()


def _formats(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    from fifty_shades_of_bias import PROMPT_TYPES  # on use: the spec module costs 85 ms at every start

    bad = [n for n in names if n not in PROMPT_TYPES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown format {', '.join(map(repr, bad)) or repr(text)}; choose from {', '.join(PROMPT_TYPES)}")
    return list(dict.fromkeys(names))


def _ic(text: str) -> tuple[str, str]:
    key, sep, path = text.partition("=")
    seed_type, _, fmt = key.rpartition(":")
    from fifty_shades_of_bias import PROMPT_TYPES, SEED_TYPES

    if not sep or not path or fmt not in PROMPT_TYPES or (seed_type and seed_type not in SEED_TYPES):
        kinds = f"formats: {', '.join(PROMPT_TYPES)}; seed types: {', '.join(SEED_TYPES)}"
        raise argparse.ArgumentTypeError(f"{text!r}: expected FORMAT=FILE or SEED_TYPE:FORMAT=FILE ({kinds})")
    return key, path


SEEDS_LINE = r'\{"seed": .*'  # the first line of a seeds file `fsb seeds` wrote


def declare_run_outputs(command: str, args: argparse.Namespace, inputs: dict[str, list[str]], side: dict[str, str | None]) -> None:
    """Declare a resumable run's inputs and outputs to the output layer and refuse, before any request, every
    collision (an output naming an input, the journal or another output, by path or inode, even with --force),
    a device or FIFO, and an existing side output or batch file that fsb did not record as such, unchanged
    (unless --force). `side` maps an option (--csv, --judgments) to its path."""
    from fsb.core.output import OutputPlan
    from fsb.engine.batch import BATCH_KIND
    from fsb.engine.journal import failures_path, journal_path
    from fsb.engine.outputs import SIDE_OUTPUT_KIND

    if Path(args.out).suffix != ".jsonl":  # before any other work, dry runs included
        from fsb.core.readers import InputError

        raise InputError(args.out, "--out must be a .jsonl file (JSON lines, one row per finished request), e.g. --out runs/out.jsonl")
    plan = OutputPlan(command, force=args.force)
    for option, paths in inputs.items():
        for path in paths:
            plan.input(path, option)
    plan.output(args.out, "--out", kind=None)
    plan.output(journal_path(args.out), "the journal", kind=None)
    plan.output(failures_path(args.out), "the failures file", kind=None)
    for option, path in side.items():
        plan.output(path, option, kind=SIDE_OUTPUT_KIND)
    plan.output(getattr(args, "batch_file", None), "--batch-file", kind=BATCH_KIND)
    plan.check()


# --- arguments ---------------------------------------------------------------------------------------------


def _seeds_arguments(s: argparse.ArgumentParser) -> None:
    from fifty_shades_of_bias import SEED_TYPES
    from fsb.generate.seeds import DEFAULT_COUNTS  # built only for `fsb seeds`: the stage module is not free

    s.add_argument("--out", type=path_arg, required=True, help="output JSON lines, one seed a line (a .manifest.json is written beside it)")
    s.add_argument(
        "--force",
        action="store_true",
        help="replace --out (and its manifest) even if they are not earlier outputs of fsb seeds unchanged since fsb wrote them",
    )
    s.add_argument("--copa", type=path_arg, help="COPA premises: the XML corpus (e.g. balacopa-dev-all.xml) or JSON lines with 'premise'")
    s.add_argument(
        "--stereoset", type=path_arg, help="StereoSet: the original dev.json, or a list of items such as EditBias's gender_test.json"
    )
    for seed_type in SEED_TYPES:
        s.add_argument(
            f"--{seed_type}",
            type=nonneg_int,
            default=DEFAULT_COUNTS[seed_type],
            help=f"{seed_type} seeds (default {DEFAULT_COUNTS[seed_type]})",
        )
    s.add_argument("--seed", type=seed, default=0, help="sampling seed (default 0)")
    s.add_argument(
        "--gendered-words", type=input_file, help="your own gendered word list (default: the project's wordlists/gendered_words.txt)"
    )
    s.add_argument("--person-words", type=input_file, help="your own person word list (default: the project's wordlists/person_words.txt)")
    s.add_argument(
        "--mark", type=path_arg, nargs="+", metavar="SEEDS", help="mark these seed files (FILE, TYPE=FILE or a folder) instead of drawing"
    )
    s.add_argument("--json", action="store_true", help="print the summary as JSON (out, manifest, seeds, counts per type)")


def _generate_arguments(g: argparse.ArgumentParser) -> None:
    g.add_argument(
        "--seeds",
        type=path_arg,
        action="append",
        required=True,
        metavar="SEEDS",
        help="a seed file: `fsb seeds` JSONL, TYPE=FILE.txt, or a folder (repeatable)",
    )
    g.add_argument("--out", type=path_arg, required=True, help="output .jsonl; the journal and failures files go beside it")
    g.add_argument(
        "--formats", type=_formats, default=["conversion", "completion"], help="comma-separated formats (default: conversion,completion)"
    )
    g.add_argument("--ic-dir", type=path_arg, help="folder with the release's in-context files (default: the local release copy)")
    g.add_argument(
        "--ic", type=_ic, action="append", default=[], metavar="[SEED_TYPE:]FORMAT=FILE", help="your own in-context examples (repeatable)"
    )
    g.add_argument("--shots", type=shots, default=2, help="in-context examples per request (default 2, as the release)")
    g.add_argument("--seed", type=seed, default=0, help="seed for choosing in-context examples (default 0)")
    g.add_argument(
        "--first-uid",
        type=nonneg_int,
        default=1,
        help="the first generation's uid (default 1); a later round starts past the earlier rounds' uids, e.g. 1001",
    )
    g.add_argument(
        "--csv", type=path_arg, help="also write the release's FSB_text.csv columns (uid,prompt_type,seed_type,query,response) here"
    )
    g.add_argument("--batch-file", type=path_arg, help="write the unfinished requests as OpenAI Batch API input instead of sending them")
    g.add_argument(
        "--collect", type=path_arg, metavar="FILE", help="merge an OpenAI Batch API output file into OUT instead of sending requests"
    )
    g.add_argument("--force", action="store_true", help="replace --csv / --batch-file even if they are not earlier outputs of fsb generate")
    add_endpoint_options(g, "completion tokens per request (default 100; 512 for conversation)")


def _explain_arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("--out", type=path_arg, required=True, help="output .jsonl (uid, text, score, bin, reason and provenance)")
    e.add_argument(
        "--dataset", type=path_arg, help="a built dataset folder or Hub id (default: the last `fsb build`); its human scores are explained"
    )
    e.add_argument("--generations", type=path_arg, help="sentences: the release's FSB_text.csv or `fsb generate` output (with --scores)")
    e.add_argument(
        "--scores", type=input_file, help="CSV with id (or uid/item) and a score in [0, 1], e.g. a model's scores (with --generations)"
    )
    e.add_argument("--score-column", help="the score column (default: score_normalized if present, else score)")
    e.add_argument("--per-bin", type=pos_int, default=10, help="sentences per bin, at least 1 (default 10)")
    e.add_argument(
        "--bins", choices=("analysis", "equispaced"), default="analysis", help="the paper's 3 analysis bins or 4 equispaced bins"
    )
    e.add_argument("--seed", type=seed, default=0, help="sampling seed (default 0)")
    add_endpoint_options(e, "completion tokens per request (default 200)")


# --- fsb seeds --------------------------------------------------------------------------------------


@commands.add(
    "seeds",
    arguments=_seeds_arguments,
    help="curate seed lists (explicit from StereoSet, implicit/neutral/random from COPA) with provenance",
    description="Draw seeds reproducibly from source files, marking each with the gendered and person word lists. "
    "Or, with --mark, mark existing seed files (e.g. the release's seeds/ folder) and write them in the same format.",
)
def _seeds(args: argparse.Namespace) -> int:
    from fsb.core.output import OutputPlan
    from fsb.core.seals import check_recorded_file
    from fsb.generate.marks import Marker, load_wordlist
    from fsb.generate.seeds import MANIFEST_KIND, SEEDS_KIND, Seed, curate, manifest_path, read_seeds, summarize, write_seeds

    plan = OutputPlan("fsb seeds", force=args.force)
    for option in ("copa", "stereoset", "gendered_words", "person_words"):
        plan.input(getattr(args, option), "--" + option.replace("_", "-"))
    for m in args.mark or []:
        plan.input(m.partition("=")[2] if "=" in m and not os.path.exists(m) else m, "--mark")
    plan.output(args.out, "--out", kind=SEEDS_KIND)
    if not args.mark:
        plan.output(manifest_path(args.out), "the manifest", kind=MANIFEST_KIND)
    plan.check()
    check_recorded_file(args.out, force=args.force, kind=SEEDS_KIND, header=SEEDS_LINE)
    marker = Marker(
        load_wordlist(args.gendered_words, name="gendered") if args.gendered_words else None,
        load_wordlist(args.person_words, name="person") if args.person_words else None,
    )
    if args.mark:
        chosen, notes = read_seeds(args.mark)
        for note in notes:
            print(note, file=sys.stderr)
        marked = []
        for s in chosen:
            extra = {**s.extra, **marker.mark(s.text).fields()}
            marked.append(Seed(s.text, s.seed_type, s.source, s.source_id, s.occurrence, extra))
        write_seeds(args.out, marked, force=args.force)
        written = None
    else:
        from fifty_shades_of_bias import SEED_TYPES

        counts = {t: getattr(args, t) for t in SEED_TYPES}
        marked, manifest = curate(args.copa, args.stereoset, counts, seed=args.seed, marker=marker)
        written = write_seeds(args.out, marked, manifest, force=args.force)
    if args.json:
        from fsb.cli.common import print_json

        types = summarize(marked, marker)
        print_json({"out": args.out, "manifest": str(written) if written else None, "seeds": len(marked), "types": types})
        return 0
    print(f"wrote {len(marked)} seeds -> {args.out}" + (f" (manifest {written})" if written else ""))
    print(f"  {'type':10s} {'seeds':>6s} {'gendered':>9s} {'person':>7s}")
    for seed_type, row in summarize(marked, marker).items():
        print(f"  {seed_type:10s} {row['seeds']:6d} {row['gendered']:9d} {row['person']:7d}")
    return 0


# --- fsb generate -----------------------------------------------------------------------------------------


@commands.add(
    "generate",
    arguments=_generate_arguments,
    help="turn seeds into gender-biased generations through an OpenAI-compatible endpoint (resumable)",
    description="One request per seed and format, sent with bounded concurrency and retries. Every finished "
    "generation is fsync'd to OUT's journal, so a run can be killed at any moment and rerun with the same "
    "command: it sends only what is not finished. OUT (JSON lines) feeds `fsb build --generations` directly.",
)
def _generate(args: argparse.Namespace) -> int:
    from fsb import engine
    from fsb.data.release import find_local_release
    from fsb.engine import console
    from fsb.generate.generations import build_generation_plan, release_csv
    from fsb.generate.prompts import load_prompt_set
    from fsb.generate.seeds import read_seeds

    modes = [m for m in ("dry_run", "batch_file", "collect") if getattr(args, m)]
    if len(modes) > 1:
        got = ", ".join("--" + m.replace("_", "-") for m in modes)
        raise engine.EngineError(f"choose one of --dry-run, --batch-file and --collect (got {got})")
    seed_files = [spec.partition("=")[2] if "=" in spec and not os.path.exists(spec) else spec for spec in args.seeds]
    ic_files = [path for _key, path in args.ic] + ([args.ic_dir] if args.ic_dir else [])
    inputs = {"--seeds": seed_files, "--ic": ic_files, "--collect": [args.collect] if args.collect else []}
    declare_run_outputs("fsb generate", args, inputs, {"--csv": args.csv})
    endpoint = None
    if not (args.dry_run or args.batch_file or args.collect):
        endpoint = engine.resolve_endpoint(args.base_url)  # before any file work: a missing key is the first thing to know
    seeds, notes = read_seeds(args.seeds)
    for note in notes:
        print(note, file=sys.stderr)
    ic_dir = args.ic_dir or find_local_release()
    prompts = load_prompt_set(
        ic_dir, dict(args.ic), formats=args.formats, seed_types=sorted({s.seed_type for s in seeds}), shots=args.shots, seed=args.seed
    )
    try:
        plan = build_generation_plan(seeds, prompts, args.formats, args.model, console.sampling_from_args(args), first_uid=args.first_uid)
    except ValueError as e:
        raise engine.EngineError(str(e)) from None
    side_outputs = [(args.csv, release_csv)] if args.csv else []
    if args.dry_run:
        console.print_dry_run(plan, args.out, args.limit)
        return 0
    if args.batch_file:
        written = engine.write_batch(plan, args.out, args.batch_file, args.limit, force=args.force)
        where = ", ".join(str(p) for p, _ in written) or "(nothing left to send)"
        n = sum(count for _, count in written)
        print(
            f"wrote {n} requests for the Batch API -> {where}; merge its output with --collect FILE and the same arguments", file=sys.stderr
        )
        return 0
    if args.collect:
        key = os.environ.get("OPENAI_API_KEY") or None  # only to scrub it, should a batch output quote it
        result = engine.collect_batch(
            plan, args.out, args.collect, side_outputs=side_outputs, base_url=args.base_url, api_key=key, force=args.force
        )
        return console.report_run(result, args.out)
    print(f"plan: {len(plan.requests)} requests ({len(seeds)} seeds x {', '.join(args.formats)}) -> {args.out}", file=sys.stderr)
    return console.run_plan(args, plan, endpoint, side_outputs)


# --- fsb explain ------------------------------------------------------------------------------------------


@commands.add(
    "explain",
    arguments=_explain_arguments,
    help="ask a model the reason behind scores (the paper's appendix A.4 prompt) for a stratified sample per bin",
    description="Sample sentences per score bin and ask the model, told the score, why; resumable like `fsb generate`.",
)
def _explain(args: argparse.Namespace) -> int:
    from fsb import engine
    from fsb.engine import console
    from fsb.generate.explain import build_explain_plan, load_items, sample_by_bin

    endpoint = None if args.dry_run else engine.resolve_endpoint(args.base_url)
    args.force = False  # explain writes no side output
    declare_run_outputs(
        "fsb explain",
        args,
        {"--dataset": [args.dataset or ""], "--generations": [args.generations or ""], "--scores": [args.scores or ""]},
        {},
    )
    items = load_items(dataset=args.dataset, generations=args.generations, scores=args.scores, score_column=args.score_column)
    sample = sample_by_bin(items, args.per_bin, seed=args.seed, scheme=args.bins)
    plan = build_explain_plan(sample, args.model, console.sampling_from_args(args), seed=args.seed, scheme=args.bins)
    counts = plan.summary["per_bin"]
    print(f"sample: {len(sample)} sentences ({', '.join(f'{k} {v}' for k, v in counts.items())}) -> {args.out}", file=sys.stderr)
    if args.dry_run:
        console.print_dry_run(plan, args.out, args.limit)
        return 0
    return console.run_plan(args, plan, endpoint, [])
