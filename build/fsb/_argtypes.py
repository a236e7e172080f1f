"""argparse `type=` converters shared by the CLI modules: a bad value becomes argparse's usage error
that names the option, never a traceback."""

from __future__ import annotations

import argparse

__all__ = ["nonneg_int", "pos_float", "pos_int"]


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
