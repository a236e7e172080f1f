"""argparse `type=` converters shared by the CLI modules: a bad value becomes argparse's usage error
that names the option, never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Callable
from typing import NoReturn

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_RESAMPLES",
    "MAX_TRIALS",
    "api_seed",
    "backoff",
    "batch_size",
    "bounded",
    "concurrency",
    "input_file",
    "max_tokens",
    "nonneg_int",
    "path_arg",
    "penalty",
    "pos_float",
    "pos_int",
    "resamples",
    "retries",
    "shots",
    "temperature",
    "timeout",
    "top_p",
    "trials",
    "unspool_stdin",
]


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None


def path_arg(text: str) -> str:
    """A file or folder path that names something: an empty one (`--out ''`, an unset variable) is refused
    as empty here, before anything reads it as the current folder ("."). The one rule for every path option."""
    if not text:
        raise argparse.ArgumentTypeError("is empty: give a path")
    return text


def input_file(text: str) -> str:
    """An input file's path (`path_arg`), where `-` is standard input: copied once into a private temporary
    file (mode 0600) that every reader reads as a file (twice, or by size, if it needs to) and that
    `unspool_stdin` removes when the command ends; messages name it "standard input"."""
    if text != "-":
        return path_arg(text)
    from fsb.core.readers import STDIN_COPIES

    if STDIN_COPIES:  # `-` given twice: one standard input
        return next(iter(STDIN_COPIES))
    import shutil
    import sys
    import tempfile

    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise argparse.ArgumentTypeError("standard input is closed, so `-` cannot be read: give a file path")
    fd, copy = tempfile.mkstemp(prefix="fsb-stdin-")
    STDIN_COPIES.add(copy)
    try:
        with os.fdopen(fd, "wb") as f:
            shutil.copyfileobj(stream, f, 1 << 20)
    except OSError as e:
        unspool_stdin()
        raise argparse.ArgumentTypeError(f"standard input cannot be read: {e.strerror or e}") from None
    return copy


def unspool_stdin() -> None:
    """Remove the private copy of standard input `input_file` made, if any (`fsb.cli.main` calls this last)."""
    from fsb.core.readers import STDIN_COPIES

    for copy in list(STDIN_COPIES):
        STDIN_COPIES.discard(copy)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(copy)


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
    """A finite number > 0 (NaN and infinity refused: no option here means anything by them)."""
    value = float(_number(text, float))
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be greater than 0 and finite, got {text.strip()!r}")
    return value


MAX_TRIALS = 100_000
MAX_RESAMPLES = 10_000


def trials(text: str) -> int:
    """Split-half trials: an integer from 1 to MAX_TRIALS. The reported mean moves by sd/sqrt(trials): at
    100000 trials that is far below the printed digits, and the run time grows with the count."""
    value = pos_int(text)
    if value > MAX_TRIALS:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_TRIALS} split-half trials (beyond that the mean's Monte Carlo error is far below its printed digits), "
            f"got {value}"
        )
    return value


def resamples(text: str) -> int:
    """Bootstrap resamples: an integer from 1 to MAX_RESAMPLES. Each resample holds one score per item in
    memory; 10000 resamples put a 95% interval's Monte Carlo error well below its printed digits."""
    value = pos_int(text)
    if value > MAX_RESAMPLES:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_RESAMPLES} bootstrap resamples (each holds a score per item in memory, and more do not move "
            f"a 95% interval's printed digits), got {value}"
        )
    return value


MAX_CONCURRENCY = 256


def concurrency(text: str) -> int:
    """Requests in flight at once: an integer from 1 to MAX_CONCURRENCY. Each one is a worker task and an open
    connection; the engine starts every worker up front, so a huge count stalls the start (100000000 hung)
    and would exhaust file descriptors long before any server accepts that many connections."""
    value = pos_int(text)
    if value > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_CONCURRENCY} requests in flight (each is a worker and an open connection; servers rate-limit "
            f"far below that), got {value}"
        )
    return value


def _finite(text: str) -> float:
    value = float(_number(text, float))
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def temperature(text: str) -> float:
    """A sampling temperature: a finite number from 0 to 2 (the OpenAI API's range)."""
    value = _finite(text)
    if not 0 <= value <= 2:
        raise argparse.ArgumentTypeError(f"a temperature is from 0 to 2 (the OpenAI API's range), got {value}")
    return value


def top_p(text: str) -> float:
    """Nucleus sampling's probability mass: a number greater than 0 and at most 1."""
    value = _finite(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"top-p is a probability mass, greater than 0 and at most 1, got {value}")
    return value


def penalty(text: str) -> float:
    """A frequency or presence penalty: a finite number from -2 to 2 (the OpenAI API's range)."""
    value = _finite(text)
    if not -2 <= value <= 2:
        raise argparse.ArgumentTypeError(f"a penalty is from -2 to 2 (the OpenAI API's range), got {value}")
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


def bounded(kind: type[int] | type[float], low: float, high: float, why: str) -> Callable[[str], int | float]:
    """An argparse type for a finite `kind` from `low` to `high` (inclusive); `why` says, in the refusal, what
    the upper bound protects (an absurd value hung a run or was sent on to a server unchecked)."""

    def parse(text: str) -> int | float:
        value = _number(text, kind)
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g} ({why}), got {text.strip()!r}")
        return value

    parse.__name__ = f"bounded_{kind.__name__}"
    return parse


# The request options' bounds: beyond them a run hangs (a backoff of 1e300 seconds), or a server is sent a
# value no API accepts.
retries = bounded(int, 0, 100, "retries per request; each doubles the wait")
timeout = bounded(float, 0.001, 3600, "seconds one attempt may take")
backoff = bounded(float, 0.001, 600, "seconds before the first retry, doubled each retry up to 60")
max_tokens = bounded(int, 1, 1_000_000, "new tokens per answer")
api_seed = bounded(int, -(2**63), 2**63 - 1, "a 64-bit integer, as the OpenAI API's seed")
shots = bounded(int, 0, 100, "in-context examples per request")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (`fsb CMD: error: ...`, exit 2) like every other
    expected failure; the usage itself is one `--help` away. Subparsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        import sys

        from fsb.core.secrets import redact_message

        message = redact_message(" ".join(message.split()))  # an option's value may hold a key or a URL's credentials
        sys.stderr.write(f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)
