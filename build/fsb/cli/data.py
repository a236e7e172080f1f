"""CLI subcommands of the data stage: `fsb fetch-release` (the pinned upstream files) and `fsb build` (the
dataset folder).

`fsb build` makes two kinds of folder. FSB's own (a generations file: `--raw-dir`, `--generations` with
`--annotations`, or `--rounds`) is `fsb.data.dataset.build_dataset`, recorded as the build loaders find.
Any other best-worst study (`--annotations` alone, optionally `--items` and `--study`) is
`fsb.data.study_build.build_study`: scores with bootstrap intervals, annotators pseudonymised, worded from
the study file; it is never recorded as the last build (load it with `datasets.load_dataset(OUT)`).
Import nothing heavy at module level."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from fsb.cli.argtypes import path_arg, resamples, seed, trials
from fsb.cli.common import add_invalid, hub_revision, output_folder, print_json
from fsb.cli.registry import Commands
from fsb.core.errors import FsbError

__all__ = ["commands"]

commands = Commands()

FSB_OUT = "fifty_shades_of_bias"  # FSB's build's default folder (fifty_shades_of_bias.NAME), where loaders look first
STUDY_BOOTSTRAP = 200  # fsb.data.intervals.N_BOOT, not imported here: this module is imported on every start


def _build_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument(
        "--raw-dir",
        type=path_arg,
        help="a release folder (FSB/FSB_text.csv, FSB/fsb-tuples-annotations.csv); default: a local copy, else the pinned download",
    )
    b.add_argument(
        "--generations", type=path_arg, help="a generations file (the release's CSV, or `fsb generate` JSONL) instead of --raw-dir"
    )
    b.add_argument(
        "--annotations",
        type=path_arg,
        help="a judgments file (Item1..ItemK,BestItem,WorstItem[,Annotator,Timestamp]): with --generations FSB's build; "
        "alone (optionally with --items, --study) any best-worst study",
    )
    b.add_argument(
        "--items",
        type=path_arg,
        metavar="FILE",
        help="a study build's items: CSV with id, optional text and further columns (kept, typed); default: the ids the judgments name",
    )
    b.add_argument(
        "--study",
        type=path_arg,
        metavar="STUDY.yaml",
        help="a study build's wording (question, the two labels, what high means, construct, licence, citation, "
        "pretty name) for the card; default: FSB's",
    )
    b.add_argument(
        "--keep-annotator-ids",
        action="store_true",
        help="publish annotator ids as given (default: keyed-hash pseudonyms, key in $FSB_HOME); values that look like "
        "e-mail addresses, phone numbers or URLs are pseudonymised whatever this says",
    )
    b.add_argument(
        "--bootstrap",
        type=resamples,
        metavar="N",
        help=f"a study build's bootstrap resamples for the items' 95%% intervals (default {STUDY_BOOTSTRAP}; seeded by --seed)",
    )
    b.add_argument(
        "--out",
        type=path_arg,
        help="output folder (FSB's build: default ./fifty_shades_of_bias; a study build: required); replaced only if "
        "absent, empty or an unchanged earlier build",
    )
    b.add_argument("--trials", type=trials, default=100, help="split-half reliability trials (default 100)")
    b.add_argument("--seed", type=seed, default=0, help="split-half reliability seed, and a study build's bootstrap seed (default 0)")
    b.add_argument("--no-record", action="store_true", help="do not make this the build that loaders and the lm-eval task find")
    b.add_argument("--hub-id", help="the Hub repo (org/name) the card's loading examples should name, for a build you will publish")
    add_invalid(b)
    b.add_argument(
        "--rounds",
        type=path_arg,
        metavar="MANIFEST",
        help="a rounds manifest (YAML: rounds: [{round, name, generations, annotations}], paths relative to it) "
        "instead of --raw-dir or --generations/--annotations; scores are computed over all rounds' judgments",
    )
    b.add_argument(
        "--previous",
        type=path_arg,
        metavar="DIR|ORG/NAME@REV",
        help="the previous version (a build folder, or a Hub revision such as ORG/NAME@v1.0.0): the card gets a "
        "'Changes since' section from `fsb diff`",
    )
    b.add_argument("--previous-label", metavar="LABEL", help="how the card names the previous version (default: REV, or the folder's name)")
    b.add_argument("--json", action="store_true", help="print the build's stats.json figures as JSON on stdout (warnings stay on stderr)")


@commands.add(
    "build",
    arguments=_build_arguments,
    help="build the Hugging Face dataset folder: FSB's from generations and judgments, or any best-worst study's",
    description="Build a dataset folder that datasets.load_dataset reads (configs default and annotations) and fsb "
    "publish publishes. FSB's build: --raw-dir, --generations with --annotations, or --rounds; recorded as the build "
    "loaders find (unless --no-record). Any other best-worst study: --annotations alone, with --items (ids, texts, "
    "further columns) and --study (the wording), scores with 95% bootstrap intervals; never recorded. Both add a bound "
    "column (empty for an estimate, else why not: best-always, worst-always, disconnected; docs/bws.md, Scoring). "
    "Annotator ids are keyed-hash pseudonyms unless --keep-annotator-ids; contact details never in the clear.",
)
def _build(args: argparse.Namespace) -> int:
    from fsb.data.dataset import build_dataset
    from fsb.data.release import ANNOTATIONS, GENERATIONS, release_dir

    if args.items or args.study:
        if args.generations or args.rounds or args.raw_dir:
            raise FsbError(
                "--items and --study belong to a study build (--annotations alone); FSB's build takes its texts and wording "
                "from --generations, --rounds or --raw-dir"
            )
        if not args.annotations:
            raise FsbError("--items and --study need --annotations (the study's judgments file)")
    if args.annotations and not (args.generations or args.rounds or args.raw_dir):
        return _build_study(args)
    if args.bootstrap is not None:
        raise FsbError("--bootstrap sets a study build's intervals (--annotations alone); FSB's build has none to resample")
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
            out=args.out or FSB_OUT,
            rounds=args.rounds,
            trials=args.trials,
            seed=args.seed,
            record=not args.no_record,
            hub_id=args.hub_id,
            invalid=args.invalid,
            previous=previous,
            previous_label=args.previous_label or label,
            keep_annotator_ids=args.keep_annotator_ids,
        )
    s = result.stats
    if args.json:
        import json

        print(json.dumps({"out": str(result.out), "stats": s}, indent=2, sort_keys=True, default=str))
        for warning in (*result.notes, *result.warnings):
            _warn(warning)
        return 0
    shr = s["shr"]
    _print_irregular(s)
    print(f"built {result.out}")
    print(f"  {s['n_items']} sentences, {s['n_tuples']} tuples, {s['n_annotations']} judgments")
    print(f"  bins (low/medium/high): {' / '.join(str(v) for v in s['bins']['counts'].values())}")
    from fsb.bws.bounds import bound_sentence

    if bounds := bound_sentence(s.get("bounds", {}), "sentences", explain=False):  # as the study build's summary
        print(f"  {bounds}")
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
        _warn(warning)
    if not args.no_record and not result.warnings:
        print("  loaders and the lm-eval task now read this folder (fsb build --no-record leaves the previous one in place)")
    return 0


def _build_study(args: argparse.Namespace) -> int:
    """`fsb build --annotations FILE [--items FILE] [--study STUDY.yaml]`: any best-worst study (issue 19),
    through `fsb.data.study_build.build_study`; never recorded as the last build."""
    from fsb.data.buildfolder import BUILD_KIND, build_folder_difference

    for option in ("previous", "previous_label"):
        if getattr(args, option):
            raise FsbError(f"--{option.replace('_', '-')} is for FSB's build (a generations file); a study build has no previous version")
    if not args.out:
        raise FsbError(f"a study build needs --out: the default ./{FSB_OUT} is where loaders and the lm-eval task look for FSB's own build")
    output_folder(args.out, kind=BUILD_KIND, changed=build_folder_difference, inputs=[args.annotations, args.items, args.study])
    from fsb.data.study_build import build_study, summary_lines

    result = build_study(
        args.annotations,
        args.out,
        items=args.items,
        study=args.study,
        invalid=args.invalid,
        trials=args.trials,
        seed=args.seed,
        n_boot=STUDY_BOOTSTRAP if args.bootstrap is None else args.bootstrap,
        keep_annotator_ids=args.keep_annotator_ids,
        hub_id=args.hub_id,
    )
    _print_irregular(result.stats)
    if args.json:
        import json

        # stats.json as published (strict JSON: an undefined figure is null, never NaN)
        print_json({"out": str(result.out), "stats": json.loads((result.out / "stats.json").read_text(encoding="utf-8"))})
    else:
        print(f"built {result.out}")
        print("\n".join(summary_lines(result.stats)))
    for warning in (*result.notes, *result.warnings):
        _warn(warning)
    print(
        f"fsb build: a study build is not recorded as the build loaders find; load it with datasets.load_dataset({str(result.out)!r})",
        file=sys.stderr,
    )
    return 0


def _print_irregular(stats: dict) -> None:
    """The quality-control rows counted or dropped (--invalid count/drop), on stderr: commentary."""
    if "invalid" in stats:
        found = stats["invalid"]["irregular"].items()
        kinds = ", ".join(f"{v['rows']} with {k} (first on line {v['first_line']})" for k, v in found)
        print(f"irregular judgments ({stats['invalid']['policy']}): {kinds}", file=sys.stderr)


def _warn(warning: str) -> None:
    from fsb.core.secrets import redact_message

    print(f"fsb build: warning: {redact_message(warning)}", file=sys.stderr)


@contextlib.contextmanager
def _previous_build(arg: str | None) -> Iterator[tuple[str | None, str | None]]:
    """(folder, label) of `--previous`: a folder as given, or ORG/NAME@REV downloaded (from $HF_ENDPOINT)
    into a temporary folder that lives as long as the build needs it."""
    if arg is None:
        yield None, None
        return
    hub = hub_revision(arg)
    if hub is None:
        yield arg, Path(arg).name
        return
    repo_id, revision = hub
    import tempfile

    from fsb.data.download import download_build

    with tempfile.TemporaryDirectory(prefix="fsb-previous-") as tmp:
        yield str(download_build(repo_id, revision, Path(tmp) / "previous")), revision


def _fetch_release_arguments(f: argparse.ArgumentParser) -> None:
    f.add_argument("--dest", type=path_arg, help="folder (default: the cache, $FSB_HOME/release/<commit>)")
    f.add_argument("--url", help="mirror URL template with {commit} and {path}")


@commands.add("fetch-release", arguments=_fetch_release_arguments, help="download the pinned upstream release and check every sha256")
def _fetch_release(args: argparse.Namespace) -> int:
    from fsb.data.release import check_release, fetch_release

    folder = fetch_release(dest=args.dest, url=args.url)
    check_release(folder)
    print(folder)
    return 0
