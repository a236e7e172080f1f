"""Reading what users give: strict UTF-8, JSON lines, word lists, and `InputError`, the error that names
file, line and field. A pipe or `<(...)` input is read once per process and kept, so a command that reads
an input twice (a check, then the parse) sees the same bytes both times. `-` on the command line is
standard input, copied by the CLI into a private file (`fsb.cli.argtypes.input_file`) that every reader
reads as a file and every message names "standard input" (`shown`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fsb.core.errors import FsbError

__all__ = [
    "STDIN",
    "STDIN_COPIES",
    "InputError",
    "content_fingerprint",
    "iter_jsonl",
    "quoted",
    "read_input_bytes",
    "read_utf8",
    "read_word_list",
    "sha256_file",
    "short",
    "shown",
]


class InputError(FsbError, ValueError):
    """Bad input, located: the file, and where known the line (1-based, header = line 1) and field."""

    def __init__(self, path: str | os.PathLike[str], message: str, *, line: int | None = None, field: str | None = None):
        self.path = os.fspath(path)
        self.line = line
        self.field = field
        self.message = message
        where = [shown(self.path)]
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field {quoted(field)}")
        super().__init__(f"{', '.join(where)}: {message}")


_SHOWN_CHARS = 40  # a value echoed in an error message shows at most this many characters
STDIN = "standard input"
STDIN_COPIES: set[str] = set()  # the private files standard input was copied into (by the CLI, for `-`)


def shown(path: str | os.PathLike[str]) -> str:
    """How a message names `path`: "standard input" for a copy of it (`STDIN_COPIES`), else the path itself."""
    return STDIN if os.fspath(path) in STDIN_COPIES else os.fspath(path)


def short(text: str, limit: int = _SHOWN_CHARS) -> str:
    """`text` as echoed in a message: at most `limit` characters, then "... (N characters)"."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def quoted(text: object, limit: int = _SHOWN_CHARS) -> str:
    """A value from a file as echoed in a message: repr() (so a NUL, a newline or a trailing space shows),
    at most `limit` characters of it, then "... (N characters)"."""
    text = str(text)
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


_STREAMS: dict[tuple[int, int], bytes] = {}  # (device, inode) of a pipe or socket read -> the bytes it gave


def read_input_bytes(path: str | os.PathLike[str]) -> bytes:
    """The whole input file as bytes; a missing file, a folder or an empty (all-blank) file is an InputError.

    A pipe (`<(...)`, a FIFO, /dev/stdin) is read to its end once and its bytes kept for this process: a
    second read of the same pipe gives them again instead of an "empty file". A pipe that gave nothing is
    called what it is, not an empty file."""
    p = Path(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    except OSError as e:
        raise InputError(p, f"cannot be read: {e.strerror or e}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(p, "is a folder, expected a file")
    stream = not stat.S_ISREG(info.st_mode)
    key = (info.st_dev, info.st_ino)
    try:
        data = _STREAMS[key] if stream and key in _STREAMS else p.read_bytes()
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    except IsADirectoryError:
        raise InputError(p, "is a folder, expected a file") from None
    except OSError as e:
        raise InputError(p, f"cannot be read: {e.strerror or e}") from None
    if stream:
        _STREAMS[key] = data
    if not data or data.isspace():  # not data.strip(): that copies a large file when it ends in a newline
        if os.fspath(p) in STDIN_COPIES:
            raise InputError(p, "gave no data (was the command piping into fsb empty, or did it fail?)")
        if stream:
            raise InputError(p, "is a pipe or device that gave no data (was its writer's command empty, or did it fail?)")
        raise InputError(p, "file is empty")
    return data


def read_utf8(path: str | os.PathLike[str]) -> str:
    """The whole file as text; refuses a missing, empty or non-UTF-8 file with the line of the bad byte."""
    p = Path(path)
    data = read_input_bytes(p)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(p, f"not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})", line=line) from None


def iter_jsonl(path: str | os.PathLike[str], what: str = "JSON") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSON-lines file; refuses bad JSON or a non-object
    with the file and line. Splits on "\n" only: str.splitlines() would also break lines at U+2028,
    U+0085 or \x0c inside strings. `what` names the expected content in the error ("JSON", "COPA JSON")."""
    for n, line in enumerate(read_utf8(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(path, f"not valid {what}: {e.msg}", line=n) from None
        except RecursionError:  # json's parser recurses once per level of [ or {
            raise InputError(path, f"not valid {what}: nested too deeply", line=n) from None
        if not isinstance(rec, dict):
            raise InputError(path, "each line must be a JSON object", line=n)
        yield n, rec


def read_word_list(path: str | os.PathLike[str], word: re.Pattern[str]) -> frozenset[str]:
    """A word list file: one word a line (lower-cased), blank lines and "# comments" ignored; a line that
    is not a single `word` is refused with its line number."""
    words = set()
    for n, line in enumerate(read_utf8(path).split("\n"), start=1):
        text = line.split("#", 1)[0].strip().lower()
        if not text:
            continue
        if not word.fullmatch(text):
            raise InputError(path, f"not a single word: {text!r} (one lower-case word a line; # starts a comment)", line=n)
        words.add(text)
    return frozenset(words)


def content_fingerprint(file_digests: list[str]) -> str:
    """A build's fingerprint: sha256 over the hex sha256 of its data files, in the card's config order
    (default, then annotations). `fsb build` records it; `fsb publish` recomputes it to check the folder."""
    return hashlib.sha256("".join(file_digests).encode()).hexdigest()


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
