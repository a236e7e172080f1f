"""The one way a module adds `fsb` subcommands: a `Commands` registry per CLI module, filled by a decorator.

    commands = Commands()

    def _score_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("annotations")
        p.add_argument("--trials", type=pos_int, default=100)   # checks live in argparse types (_argtypes)

    @commands.add("score", arguments=_score_arguments, help="score a judgments file by counting")
    def _score(args: argparse.Namespace) -> int:
        from .scoring import reliability                          # heavy imports inside the handler
        result = reliability(table, trials=args.trials, seed=0)    # library calls with keyword arguments
        return 0                                                   # failures: raise FsbError, never SystemExit

`fsb.cli.app` installs every module's registry in one parser; it catches FsbError and OSError once.
Import nothing heavy here: this module is imported for every `fsb` invocation, `fsb --help` included.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

__all__ = ["Command", "Commands", "Handler"]

Handler = Callable[[argparse.Namespace], int]


class Command(NamedTuple):
    """One subcommand: its name, how to add its arguments, and the handler that runs it (exit code). A
    NamedTuple, not a dataclass: dataclasses imports inspect, 25 ms on every start."""

    name: str
    run: Handler
    arguments: Callable[[argparse.ArgumentParser], None]
    parser_kwargs: dict[str, Any]


class Commands:
    """An ordered registry of subcommands; `install` adds them to an argparse subparsers action."""

    def __init__(self) -> None:
        self._commands: list[Command] = []

    def add(
        self, name: str, *, arguments: Callable[[argparse.ArgumentParser], None] = lambda p: None, **parser_kwargs: Any
    ) -> Callable[[Handler], Handler]:
        """Decorator: register the handler as `fsb NAME`; `parser_kwargs` (help, description) go to add_parser."""

        def register(run: Handler) -> Handler:
            if any(c.name == name for c in self._commands):
                raise ValueError(f"fsb {name} is registered twice")
            self._commands.append(Command(name, run, arguments, parser_kwargs))
            return run

        return register

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands)

    def install(self, sub: argparse._SubParsersAction, handlers: dict[str, Handler]) -> None:
        """Add each command's parser to `sub` and its handler to `handlers` (name -> handler)."""
        for c in self._commands:
            if c.name in handlers:
                raise ValueError(f"fsb {c.name} is registered twice")
            c.arguments(sub.add_parser(c.name, **c.parser_kwargs))
            handlers[c.name] = c.run
