"""CLI subcommands of the publish stage (`fsb publish`).

Kept apart from cli.py so the stage owns its command line; cli.py calls `add_commands`.
Import nothing heavy at module level: this module is imported for every `fsb` invocation.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path


def _publish(args: argparse.Namespace) -> int:
    """Plan, print the plan, and (unless --dry-run) publish. Exit 2: refused or failed with the Hub
    unchanged; exit 1: the Hub was changed but the publish is incomplete (the message says how to finish)."""
    if args.endpoint and "huggingface_hub" not in sys.modules:
        # huggingface_hub reads HF_ENDPOINT once, at import: set it first so that every request the
        # client makes (not only HfApi's) goes to the endpoint asked for.
        os.environ["HF_ENDPOINT"] = args.endpoint.rstrip("/")
    from .publish import PublishError, execute, plan_publish, redact

    token = os.environ.get("HF_TOKEN")
    try:
        plan = plan_publish(
            args.folder, args.repo_id, args.version, private=args.private, endpoint=args.endpoint, require_token=not args.dry_run
        )
        print("\n".join(plan.lines()), flush=True)
        card = (Path(args.folder) / "README.md").read_text(encoding="utf-8")
        if f'load_dataset("{args.repo_id}"' not in card:
            print(
                f"warning: the card's loading examples do not name {args.repo_id}; for a card that does, rebuild with "
                f"`fsb build --hub-id {args.repo_id}` (same data files)",
                file=sys.stderr,
            )
        if args.dry_run:
            print("dry run: nothing was written to the Hub")
            return 0
        result = execute(plan, message=args.message)
    except PublishError as e:
        print(f"fsb publish: error: {redact(str(e), token)}", file=sys.stderr)
        return 1 if e.remote_changed else 2
    print("\n".join(result.lines()))
    return 0


def add_commands(sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add this stage's subparsers to `sub` and their handlers to `handlers` (name -> fn(args) -> exit code)."""
    p = sub.add_parser(
        "publish",
        help="publish a built dataset folder to the Hugging Face Hub as release vX.Y.Z (token from HF_TOKEN)",
        description=(
            "Push a folder written by `fsb build` to the dataset repo ORG/NAME in one atomic commit (files the folder "
            "no longer has are deleted) and tag it vX.Y.Z. Everything is checked before the first write; the token "
            "is read from HF_TOKEN only."
        ),
    )
    p.add_argument("folder", help="the dataset folder (README.md card, stats.json, data/<config>/*.parquet)")
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the dataset repo on the Hub (a namespace is required)")
    p.add_argument("--version", required=True, metavar="X.Y.Z", help="semantic version; greater than every v* tag; tagged vX.Y.Z")
    p.add_argument("--private", action="store_true", help="create the repo private (refused if it exists and is public)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (files added/deleted, tag) and write nothing")
    p.add_argument("--endpoint", metavar="URL", help="Hub endpoint (default: $HF_ENDPOINT, else https://huggingface.co)")
    p.add_argument("--message", help="commit summary (default: 'Release vX.Y.Z')")
    handlers["publish"] = _publish
