"""What fsb wrote, so a later run can tell its own unchanged output from a user's: seals (a folder's
`.fsb-seal.json`: the kind of output, the sha256 of every file, its folders) and records (a folder's
`.fsb-files.json`: for each single file fsb wrote there, the kind of output and its sha256).

A file or folder is recognised as a command's earlier output only by these, never by a header or first
line: a judgments file that `fsb annotate import` wrote is recorded as that kind, so `fsb annotate llm`
never takes it for its own."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fsb.core.atomic import (
    atomic_write,
    check_replaceable_file,
    folder_lock,
    named_error,
    read_record,
    write_file,
    write_record,
)
from fsb.core.readers import InputError, sha256_file

__all__ = [
    "FILES_RECORD",
    "SEAL_FILE",
    "check_recorded_file",
    "file_difference",
    "first_line_matches",
    "list_tree",
    "read_seal",
    "record_digests",
    "recorded_write",
    "same_file",
    "seal_difference",
    "write_seal",
]


SEAL_FILE = ".fsb-seal.json"


def list_tree(root: Path) -> tuple[list[str], list[str], list[str]]:
    """(files, folders, others) under `root` as sorted relative POSIX paths; symbolic links and special
    files are `others` (never something the project wrote). The seal file itself is left out."""
    files, folders, others = [], [], []
    for folder, dirs, names in os.walk(root):
        base = Path(folder)
        for name in dirs + names:
            p = base / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                others.append(rel)
            elif name in dirs:
                folders.append(rel)
            elif p.is_file():
                if rel != SEAL_FILE:
                    files.append(rel)
            else:
                others.append(rel)
        dirs[:] = [d for d in dirs if not (base / d).is_symlink()]
    return sorted(files), sorted(folders), sorted(others)


def write_seal(stage: str | os.PathLike[str], kind: str) -> None:
    """Record in `stage`/.fsb-seal.json the sha256 of every file and the list of folders the command wrote
    there (called on a finished staging folder, before the swap): `seal_difference` later tells whether
    the folder is still exactly that."""
    root = Path(stage)
    files, folders, others = list_tree(root)
    if others:
        raise OSError(errno.EINVAL, "a staged output holds a link or special file", os.fspath(root / others[0]))
    record = {"kind": kind, "folders": folders, "files": {rel: sha256_file(root / rel) for rel in files}}
    write_file(root / SEAL_FILE, json.dumps(record, indent=1, sort_keys=True) + "\n")


def read_seal(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The seal a command wrote into `folder`, or None when it has none (an output written before seals, or
    not by fsb). A seal that is not the JSON `write_seal` writes counts as none."""
    p = Path(folder) / SEAL_FILE
    if p.is_symlink() or not p.is_file():
        return None
    try:
        record = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and isinstance(record.get("files"), dict) and isinstance(record.get("folders"), list)
    return record if ok else None


def seal_difference(folder: str | os.PathLike[str], kind: str) -> str | None:
    """None when `folder` holds exactly what its seal records (every file unchanged, no file or folder
    added or removed, no link); otherwise the first difference in path order, e.g. "README.md was
    edited". A folder without a seal of `kind` is a difference too ("it has no .fsb-seal.json ...")."""
    root = Path(folder)
    record = read_seal(root)
    if record is None:
        return f"it has no {SEAL_FILE} of {kind} (written before fsb sealed its outputs, or not by fsb)"
    if record.get("kind") != kind:  # another command's output: never taken for this one's
        return f"its {SEAL_FILE} says it is {record.get('kind')!r}, another command's output, not {kind!r}"
    files, folders, others = list_tree(root)
    want_files: dict[str, Any] = record["files"]
    want_folders = set(record["folders"])
    problems: list[tuple[str, str]] = [(rel, f"{rel} is a link or special file") for rel in others]
    problems += [(rel, f"{rel}/ was added") for rel in folders if rel not in want_folders]
    problems += [(rel, f"{rel}/ was removed") for rel in want_folders - set(folders)]
    present = set(files)
    problems += [(rel, f"{rel} was removed") for rel in want_files if rel not in present]
    for rel in files:
        if rel not in want_files:
            problems.append((rel, f"{rel} was added"))
        elif sha256_file(root / rel) != want_files[rel]:
            problems.append((rel, f"{rel} was edited"))
    return min(problems)[1] if problems else None


# --- single files written beside a user's: their sha256 recorded in the folder ------------------------------

FILES_RECORD = ".fsb-files.json"
_FILES_MARK = "outputs"


def _files_entries(folder: Path) -> dict[str, dict[str, Any]]:
    """name -> {"kind": str | None, "digests": [...]} from the folder's record (`read_record`: a file of that
    name that is not fsb's record is refused, never trusted)."""
    files = read_record(folder / FILES_RECORD, _FILES_MARK).get("files")
    entries = {}
    for name, value in (files if isinstance(files, dict) else {}).items():
        if isinstance(value, dict) and isinstance(value.get("digests"), list):
            kind = value.get("kind") if isinstance(value.get("kind"), str) else None
            entries[name] = {"kind": kind, "digests": [d for d in value["digests"] if isinstance(d, str)]}
    return entries


def file_difference(path: str | os.PathLike[str], kind: str | None = None) -> str | None:
    """None when the file at `path` is one fsb wrote and nobody changed (its sha256 is recorded in its
    folder's .fsb-files.json), and, with `kind`, recorded as that kind of output; otherwise why not. For
    outputs that share a folder with a user's files."""
    p = Path(path)
    entry = _files_entries(p.parent).get(p.name)
    digests = entry["digests"] if entry else None
    if entry and kind is not None and entry["kind"] is not None and entry["kind"] != kind:
        return f"fsb recorded it as {entry['kind']}, another command's output"
    if not digests:
        return f"no record of it in {FILES_RECORD} (not written by fsb, or written before fsb recorded its files)"
    try:
        if not p.is_symlink() and sha256_file(p) in digests:
            return None
    except OSError:
        pass
    return "it was edited after fsb wrote it"


def first_line_matches(pattern: str | re.Pattern[str]) -> Callable[[Path], bool]:
    """A predicate for `check_recorded_file`'s `header`: the existing file's first line (a CSV header, say)
    fully matches `pattern`. Binary or unreadable files do not match."""
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern

    def matches(path: Path) -> bool:
        try:
            with open(path, "rb") as f:
                head = f.readline(1 << 16)
            line = head.decode("utf-8-sig").rstrip("\r\n")
        except (OSError, UnicodeDecodeError):
            return False
        return regex.fullmatch(line) is not None

    return matches


def check_recorded_file(
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    kind: str,
    header: str | re.Pattern[str] | None = None,
    hint: str = ", or pass --force",
    inputs: Iterable[str | os.PathLike[str] | None] = (),
) -> Path:
    """Refuse (InputError naming `path`, nothing changed) an output path that is a folder, one of the command's
    `inputs` (whatever `force` says), or an existing file that is not `kind` exactly as fsb wrote it: its
    sha256 must be recorded in the folder's .fsb-files.json (`file_difference`). With `header` (a regex for
    the first line) a non-empty file with another first line is refused as such: plainly a user's file, or
    another command's output recorded under the same name. `force` allows replacing any other file.
    A device, FIFO or socket is refused whatever `force` says. Returns the path."""
    p = check_replaceable_file(path)  # refuses a folder, a device, a FIFO or a socket
    _files_entries(p.parent)  # a record there that is not fsb's is refused now, before any work
    if not (p.exists() or p.is_symlink()):
        return p
    for item in inputs:
        if item is not None and same_file(item, p):
            raise InputError(p, "is an input of this command; refusing to replace it: choose another path")
    if force:
        return p
    refuse = f"refusing to replace it: choose another path{hint}"
    if header is not None and not _is_empty(p) and not first_line_matches(header)(p):  # another command's output, or a user's
        raise InputError(p, f"exists and is not {kind} (its first line is not the header fsb writes there); {refuse}")
    why = file_difference(p, kind)
    if why is not None:
        raise InputError(p, f"exists and is not {kind} unchanged: {why}; {refuse}")
    return p


def _is_empty(p: Path) -> bool:
    try:
        return p.stat().st_size == 0
    except OSError:
        return False


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether `a` and `b` name one file (same device and inode); False when either is absent."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # absent, or not a path (an item count such as "20")
        return False


def record_digests(path: str | os.PathLike[str], digests: list[str] | None, *, kind: str | None = None) -> None:
    """Set the sha256 digests recorded for the file at `path` in its folder's .fsb-files.json (a file is
    recognised while its content has any of them); None removes its entry, and the record file once it
    is empty. `kind` names the kind of output (kept from the earlier entry when None). The other entries
    are kept."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(p.parent):
        record: dict[str, Any] = _files_entries(p.parent)
        if digests is not None:
            kind = kind if kind is not None else (record.get(p.name) or {}).get("kind")
            record[p.name] = {"kind": kind, "digests": digests}
        elif record.pop(p.name, None) is None:
            return
        write_record(p.parent / FILES_RECORD, _FILES_MARK, {"files": record} if record else {})


def recorded_write(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    force: bool = False,
    kind: str,
    hint: str = ", or pass --force",
    header: str | re.Pattern[str] | None = None,
) -> None:
    """atomic_write for a one-shot output (a score file, a design, a report): an existing file is replaced only
    if `check_recorded_file` finds it unchanged since fsb wrote it (or with `force`), and the new file's
    sha256 is recorded.

    The record lists the old and the new digest while the file is being replaced, so a kill at any moment
    leaves a file the record still recognises (and a file replaced with `force` is never recorded as ours)."""
    p = check_recorded_file(path, force=force, kind=kind, header=header, hint=hint)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    new = hashlib.sha256(raw).hexdigest()
    keep = [sha256_file(p)] if not force and p.is_file() else []  # recognised above: still ours if killed mid-way
    before = _files_entries(p.parent).get(p.name)
    try:
        record_digests(p, [*keep, new], kind=kind)
    except OSError as e:
        raise named_error(e, p, always=True) from e
    try:
        atomic_write(p, raw)
    except BaseException:  # a write that failed changes nothing: the record goes back to what it was
        with contextlib.suppress(OSError):
            record_digests(p, before["digests"] if before else None, kind=before["kind"] if before else None)
        raise
    with contextlib.suppress(OSError):  # the file is written; the [old, new] record already recognises it
        record_digests(p, [new], kind=kind)
