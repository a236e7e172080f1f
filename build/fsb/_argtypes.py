"""argparse `type=` converters shared by the CLI modules: a bad value becomes argparse's usage error
that names the option, never a traceback."""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["batch_size", "nonneg_int", "pos_float", "pos_int"]


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def pos_int(text: str) -> int:
    """An integer >= 1."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def pos_float(text: str) -> float:
    """A number > 0 (NaN refused)."""
    value = float(_number(text, float))
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return value


def batch_size(text: str) -> int | str:
    """lm-eval's batch size: an integer >= 1, `auto`, or `auto:N` (N >= 1 recomputations)."""
    if text == "auto" or (text.startswith("auto:") and text[5:].isascii() and text[5:].isdigit() and int(text[5:]) >= 1):
        return text
    try:
        return pos_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"not an integer >= 1, auto or auto:N: {text!r}") from None


def seed(text: str) -> int:
    """A random seed: an integer from 0 to 2**63 - 1 (numpy's generators refuse negative seeds)."""
    value = int(_number(text, int))
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"a seed is an integer from 0 to 2**63 - 1, got {text}")
    return value


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (`fsb CMD: error: ...`, exit 2) like every other
    expected failure; the usage itself is one `--help` away. Subparsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        import sys

        sys.stderr.write(f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")
        raise SystemExit(2)
