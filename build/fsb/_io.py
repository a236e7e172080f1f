"""File plumbing shared by every stage: input errors that name file, line and field; strict UTF-8
reading; and writes that never leave a half-written file or folder behind."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .errors import FsbError

__all__ = ["InputError", "atomic_dir", "atomic_write", "content_fingerprint", "iter_jsonl", "read_utf8", "read_word_list", "sha256_file"]


_T = TypeVar("_T")


def _fresh_sibling(parent: Path, prefix: str, suffix: str, make: Callable[[Path], _T]) -> tuple[Path, _T]:
    """Create an unused path in `parent` with `make` (which fails with FileExistsError if it is taken);
    return the path and what `make` returned.

    Unlike tempfile's mkstemp/mkdtemp (modes 0600/0700), the callers create with the modes open() and
    mkdir() give, the umask applied by the OS: nothing reads or changes the process-wide umask."""
    while True:
        path = parent / f"{prefix}{secrets.token_hex(6)}{suffix}"
        try:
            return path, make(path)
        except FileExistsError:
            continue


def _new_file(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)


class InputError(FsbError, ValueError):
    """Bad input, located: the file, and where known the line (1-based, header = line 1) and field."""

    def __init__(self, path: str | os.PathLike[str], message: str, *, line: int | None = None, field: str | None = None):
        self.path = os.fspath(path)
        self.line = line
        self.field = field
        self.message = message
        where = [self.path]
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}")


def read_utf8(path: str | os.PathLike[str]) -> str:
    """The whole file as text; refuses a missing, empty or non-UTF-8 file with the line of the bad byte."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    except IsADirectoryError:
        raise InputError(p, "is a folder, expected a file") from None
    if not data.strip():
        raise InputError(p, "file is empty")
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


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write a file by writing a temporary sibling, fsyncing it, then renaming it over `path`."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp, fd = _fresh_sibling(p.parent, f".{p.name}.", ".tmp", _new_file)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EXDEV, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty staging folder beside `path`; on success it replaces `path`, on any error it is removed.

    On Linux the old and new folders are swapped in one atomic renameat2(RENAME_EXCHANGE), so `path`
    always names a complete folder; elsewhere the old one is moved aside first and deleted only after
    the new one is in place. Either way a failure leaves the previous good folder or the new one.
    """
    target = Path(path).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    stage, _ = _fresh_sibling(target.parent, f".{target.name}.staging-", "", os.mkdir)
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = None
    if target.exists() or target.is_symlink():
        if not target.is_dir() or target.is_symlink():
            shutil.rmtree(stage, ignore_errors=True)
            raise InputError(target, "exists and is not a folder; refusing to replace it")
        if _exchange(stage, target):
            shutil.rmtree(stage, ignore_errors=True)  # the stage path now holds the old folder
            return
        old, _ = _fresh_sibling(target.parent, f".{target.name}.old-", "", os.mkdir)  # reserve a name
        os.rmdir(old)
        os.replace(target, old)
    try:
        os.replace(stage, target)
    except BaseException:
        if old is not None:
            os.replace(old, target)
        shutil.rmtree(stage, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
