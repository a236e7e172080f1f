"""CLI subcommands of the publish stage (`fsb publish`, `fsb diff`), registered like every command (fsb.cli.registry).

The handlers call one library function each (`publish.publish`, `publish.check_local`, `diff.diff_builds`)
with keyword arguments and print; failures are `FsbError`s, which `fsb.cli.app.main` prints as one line with
exit code 2. Import nothing heavy at module level: this module is imported for every `fsb` invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from fsb.cli.argtypes import path_arg
from fsb.cli.common import hub_revision
from fsb.cli.registry import Commands
from fsb.core.secrets import redact_message

if TYPE_CHECKING:
    from fsb.data.publish import PublishPlan

__all__ = ["commands"]

_TRUE = {"1", "on", "yes", "true"}

commands = Commands()


def _print_plan(plan: PublishPlan) -> None:
    print("\n".join(plan.lines()), flush=True)
    for w in plan.warnings:
        print(f"warning: {redact_message(w)}", file=sys.stderr, flush=True)


def check_endpoint(url: str | None) -> None:
    """Refuse an --endpoint that is no http(s) URL before huggingface_hub reads it (an unparseable one ended in
    a traceback); the refusal names it without credentials."""
    if not url:
        return
    from urllib.parse import urlsplit

    from fsb.core.errors import FsbError
    from fsb.core.secrets import safe_url

    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:
        ok = False
    if not ok:
        raise FsbError(f"--endpoint {safe_url(url)}: not an http(s) URL with a host")


def _publish_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=path_arg, help="the dataset folder (README.md card, stats.json, data/<config>/*.parquet)")
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the dataset repo on the Hub (a namespace is required)")
    p.add_argument("--version", required=True, metavar="X.Y.Z", help="semantic version; greater than every v* tag; tagged vX.Y.Z")
    p.add_argument("--private", action="store_true", help="create the repo private (refused if it exists and is public)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (files added/deleted, tag, changes) and write nothing")
    p.add_argument(
        "--local",
        action="store_true",
        help="run the local checks only (folder, version, repo id, card warnings) without the network; "
        "a --dry-run with HF_HUB_OFFLINE=1 does the same",
    )
    p.add_argument("--endpoint", metavar="URL", help="Hub endpoint (default: $HF_ENDPOINT, else https://huggingface.co)")
    p.add_argument("--message", help="commit summary (default: 'Release vX.Y.Z')")


@commands.add(
    "publish",
    arguments=_publish_arguments,
    help="publish a built dataset folder to the Hugging Face Hub as release vX.Y.Z (token from HF_TOKEN)",
    description=(
        "Push a folder written by `fsb build` to the dataset repo ORG/NAME in one atomic commit (files the folder "
        "no longer has are deleted, only if an earlier fsb release wrote them) and tag it vX.Y.Z; the commit and "
        "tag messages carry `fsb diff` against the latest release. Everything is checked before the first write; "
        "the token is read from HF_TOKEN only."
    ),
)
def _publish(args: argparse.Namespace) -> int:
    """Plan, print the plan, and (unless --dry-run) publish; --local (or a dry run with HF_HUB_OFFLINE=1)
    runs the local checks only, without the network. Any failure is a PublishError/InputError: one line,
    exit 2, and the message says what, if anything, changed on the Hub."""
    check_endpoint(args.endpoint)
    if args.endpoint and "huggingface_hub" not in sys.modules:
        # huggingface_hub reads HF_ENDPOINT once, at import: set it first so that every request the
        # client makes (not only HfApi's) goes to the endpoint asked for.
        os.environ["HF_ENDPOINT"] = args.endpoint.rstrip("/")
    from fsb.data.publish import PublishError, check_local, publish, redact

    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE
    if args.local or (args.dry_run and offline):
        check = check_local(args.folder, args.repo_id, args.version)
        print("\n".join(check.lines()))
        for w in check.warnings:
            print(f"warning: {redact_message(w)}", file=sys.stderr)
        why = "HF_HUB_OFFLINE is set" if not args.local else "--local"
        print(f"local checks only ({why}): nothing was sent to the Hub")
        return 0
    token = os.environ.get("HF_TOKEN")
    try:
        result = publish(
            args.folder,
            args.repo_id,
            args.version,
            private=args.private,
            endpoint=args.endpoint,
            message=args.message,
            dry_run=args.dry_run,
            on_plan=_print_plan,
        )
    except PublishError as e:  # defence in depth: the messages never hold the token, but redact all the same
        raise PublishError(redact(str(e), token), remote_changed=e.remote_changed, commit_oid=e.commit_oid) from None
    if result.dry_run:
        print("dry run: nothing was written to the Hub")
    else:
        print("\n".join(result.lines()))
    return 0


def _diff_arguments(d: argparse.ArgumentParser) -> None:
    d.add_argument(
        "old", type=path_arg, help="the earlier build: a folder, or ORG/NAME@REVISION on the Hub (e.g. ORG/fifty_shades_of_bias@v1.0.0)"
    )
    d.add_argument("new", type=path_arg, help="the later build: a folder, or ORG/NAME@REVISION")
    d.add_argument("--json", action="store_true", help="print the diff as JSON")
    d.add_argument(
        "--endpoint", metavar="URL", help="Hub endpoint for ORG/NAME@REVISION (default: $HF_ENDPOINT, else https://huggingface.co)"
    )


@commands.add(
    "diff",
    arguments=_diff_arguments,
    help="what changed between two builds (folders or Hub revisions): sentences, judgments, scores, reliability",
    description=(
        "Compare two builds written by `fsb build` (folders, or ORG/NAME@REVISION downloaded from the Hub): sentences "
        "added/removed, judgments added/removed, the scores of the sentences both have (Pearson/Spearman, largest "
        "moves, bin changes), split-half reliability before and after."
    ),
)
def _diff(args: argparse.Namespace) -> int:
    import tempfile

    check_endpoint(args.endpoint)
    if args.endpoint and "huggingface_hub" not in sys.modules:
        os.environ["HF_ENDPOINT"] = args.endpoint.rstrip("/")
    from fsb.data.diff import diff_builds, format_diff
    from fsb.data.download import download_build

    with tempfile.TemporaryDirectory(prefix="fsb-diff-") as tmp:
        folders = []
        for side in ("old", "new"):
            arg = getattr(args, side)
            hub = hub_revision(arg)
            folders.append(arg if hub is None else download_build(*hub, os.path.join(tmp, side), endpoint=args.endpoint))
        d = diff_builds(*folders, old_label=args.old, new_label=args.new)
    print(json.dumps(d, indent=2, sort_keys=True) if args.json else format_diff(d))
    return 0
