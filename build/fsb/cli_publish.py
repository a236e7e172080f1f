"""CLI subcommands of the publish stage (`fsb publish`).

Kept apart from cli.py so the stage owns its command line; cli.py calls `add_commands`.
Import nothing heavy at module level: this module is imported for every `fsb` invocation.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def add_commands(sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Add this stage's subparsers to `sub` and their handlers to `handlers` (name -> fn(args) -> exit code)."""
