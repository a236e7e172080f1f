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
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from fsb.core.errors import FsbError

__all__ = [
    "InputError",
    "atomic_dir",
    "atomic_write",
    "check_recorded_file",
    "check_replaceable_dir",
    "check_replaceable_file",
    "content_fingerprint",
    "file_difference",
    "first_line_matches",
    "give_ordinary_modes",
    "iter_jsonl",
    "list_tree",
    "quoted",
    "read_seal",
    "read_utf8",
    "read_word_list",
    "record_digests",
    "recorded_write",
    "seal_difference",
    "sha256_file",
    "short",
    "sweep_stale_stages",
    "write_file",
    "write_seal",
]


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
            where.append(f"field {quoted(field)}")
        super().__init__(f"{', '.join(where)}: {message}")


SHOWN_CHARS = 40  # a value echoed in an error message shows at most this many characters


def short(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` as echoed in a message: at most `limit` characters, then "... (N characters)"."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def quoted(text: object, limit: int = SHOWN_CHARS) -> str:
    """A value from a file as echoed in a message: repr() (so a NUL, a newline or a trailing space shows),
    at most `limit` characters of it, then "... (N characters)"."""
    text = str(text)
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def read_input_bytes(path: str | os.PathLike[str]) -> bytes:
    """The whole input file as bytes; a missing file, a folder or an empty (all-blank) file is an InputError."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(p, "file not found") from None
    except IsADirectoryError:
        raise InputError(p, "is a folder, expected a file") from None
    if not data or data.isspace():  # not data.strip(): that copies a large file when it ends in a newline
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


def _named(e: OSError, path: Path, *, always: bool = False) -> OSError:
    """`e` with `path` as its file name when the OS gave none (a write that hits ENOSPC or EFBIG names no
    file), or `always` (a temporary sibling's name means nothing to the user), so the CLI's one line
    says which output failed."""
    if e.filename is None or always:
        return type(e)(e.errno, e.strerror or str(e), os.fspath(path))
    return e


def first_line_matches(pattern: str | re.Pattern[str]) -> Callable[[Path], bool]:
    """A `replace_if` predicate: the existing file's first line (a CSV header, say) fully matches `pattern`,
    i.e. the file is an earlier output of the same kind. Binary or unreadable files do not match."""
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


def check_replaceable_file(
    path: str | os.PathLike[str],
    *,
    replace_if: Callable[[Path], bool] | None = None,
    kind: str = "an output of this command",
    hint: str = "",
) -> Path:
    """Refuse (InputError naming `path`) an output file path that is a folder, or an existing file that
    `replace_if` does not recognise as `kind`; return the path. With `replace_if=None` any file may be
    replaced (for the project's own state files). `hint` ends the message, e.g. "or pass --force"."""
    p = Path(path)
    if p.is_dir():
        raise InputError(p, "is a folder; give a file path")
    if p.parent.exists() and not p.parent.is_dir():
        raise InputError(p.parent, "is not a folder, so it cannot hold the output")
    if replace_if is not None and (p.exists() or p.is_symlink()) and not replace_if(p):
        raise InputError(p, f"exists and is not {kind}; refusing to replace it: choose another path{hint}")
    return p


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    replace_if: Callable[[Path], bool] | None = None,
    kind: str = "an output of this command",
    hint: str = "",
) -> None:
    """Write a file by writing a temporary sibling, fsyncing it, then renaming it over `path`.

    A folder at `path` is refused; an existing file is replaced only if `replace_if(path)` is true (when
    given): commands writing a user-named output pass a predicate such as `first_line_matches(header)`.
    An OS error (ENOSPC, EFBIG, EACCES) names `path` and leaves no temporary file.
    """
    p = check_replaceable_file(path, replace_if=replace_if, kind=kind, hint=hint)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale_temporaries(p)
        tmp, fd = _locked_temporary(p)
    except OSError as e:
        raise _named(e, p, always=True) from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise _named(e, p, always=e.filename == os.fspath(tmp)) from e
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _durable_rename(p.parent)


def _locked_temporary(p: Path) -> tuple[Path, int]:
    """A new `.NAME.XXXX.tmp` beside `p`, open for writing and exclusively locked (flock) while this process
    lives, so a later write of the same target can tell a temporary left by a kill from one being written."""
    while True:
        tmp, fd = _fresh_sibling(p.parent, f".{p.name}.", ".tmp", _new_file)
        _try_lock(fd, block=True)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return tmp, fd
        os.close(fd)  # swept between creation and lock: take another name


def sweep_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the `.NAME.XXXX.tmp` files of target `path` that no live process holds (a write killed before
    its rename); a temporary another process is writing is locked and kept. Returns what was removed."""
    target = Path(path).absolute()
    pattern = re.compile(rf"\.{re.escape(target.name)}\.{_HEX}\.tmp")
    removed = []
    try:
        candidates = [q for q in target.parent.iterdir() if pattern.fullmatch(q.name)]
    except OSError:
        return removed
    for tmp in candidates:
        try:
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and _try_lock(fd, block=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                removed.append(tmp)
        finally:
            os.close(fd)
    return removed


def _durable_rename(folder: Path) -> None:
    """Best-effort fsync of the folder after a rename: the change is made, so a failure here must not
    turn a completed write into a reported failure (the file itself was fsync'd before the rename)."""
    with contextlib.suppress(OSError):
        _fsync_dir(folder)


def write_file(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write a new file inside a staging folder (atomic_dir fsyncs it before the swap); an OS error names the path."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "xb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as e:
        raise _named(e, p) from e


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:  # some filesystems refuse fsync on a folder; the rename is still atomic
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """fsync every file and folder under `root` (files first, then their folders, then `root`)."""
    for folder, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(folder))


def give_ordinary_modes(root: str | os.PathLike[str]) -> None:
    """Give every file under `root` the mode a new file gets (0666 minus the umask, as open() applies it):
    for folders written by libraries that create files 0600 (safetensors does). The umask is not read
    or changed process-wide: a probe file created in `root` shows the mode."""
    top = Path(root)
    probe, fd = _fresh_sibling(top, ".mode-probe-", "", _new_file)
    try:
        mode = os.fstat(fd).st_mode & 0o777
    finally:
        os.close(fd)
        os.unlink(probe)
    for folder, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, mode)


# --- folders the project replaces ----------------------------------------------------------------


def _is_within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_replaceable_dir(
    path: str | os.PathLike[str],
    *,
    owned: Callable[[Path], bool] | None = None,
    kind: str,
    inputs: Iterable[str | os.PathLike[str]] = (),
    option: str = "--out",
    changed: Callable[[Path], str | None] | None = None,
) -> Path:
    """The one rule for every folder the project replaces: `path` may be replaced only if it is absent, an
    empty folder, or a folder the project itself wrote as `kind` and nobody changed since.

    `changed(path)` says what differs from what the project wrote (the first changed path, e.g. "README.md
    was edited"), None when nothing does: the message names it. `owned(path)` is the older yes/no form.
    Never valid, whatever they hold: `/`, the home folder, the current folder or one of its ancestors, a
    folder holding one of `inputs`, a symbolic link, a file. Refused with an InputError naming `path`;
    nothing is changed. Returns the absolute path."""
    if (owned is None) == (changed is None):
        raise TypeError("check_replaceable_dir takes exactly one of owned= and changed=")
    target = Path(path).absolute()
    real = Path(os.path.realpath(target))
    refuse = f"refusing to replace it: choose another {option}"
    if target.is_symlink():
        raise InputError(target, f"is a symbolic link; {refuse}")
    if real == Path(real.anchor):
        raise InputError(target, f"is the filesystem root; {refuse}")
    with contextlib.suppress(RuntimeError, KeyError):
        if real == Path(os.path.realpath(Path.home())):
            raise InputError(target, f"is your home folder; {refuse}")
    cwd = Path(os.path.realpath(os.getcwd()))
    if _is_within(cwd, real):
        raise InputError(target, f"{'is' if cwd == real else 'contains'} the current folder; {refuse}")
    for item in inputs:
        source = Path(os.path.realpath(item))
        if _is_within(source, real):
            raise InputError(target, f"holds the input {os.fspath(item)}; {refuse}")
    if not (target.exists() or target.is_symlink()):
        parent = next((a for a in target.parents if a.exists()), None)
        if parent is not None and not parent.is_dir():
            raise InputError(parent, "is not a folder, so it cannot hold the output")
        return target
    if not target.is_dir():
        raise InputError(target, f"exists and is not a folder; {refuse}")
    try:
        entries = sorted(p.name for p in target.iterdir())
    except OSError as e:
        raise _named(e, target) from e
    if not entries:
        return target
    if changed is not None:
        why = changed(target)
        if why is not None:
            raise InputError(target, f"is a folder that is not {kind} unchanged ({why}); {refuse}, or empty it yourself")
    elif owned is not None and not owned(target):
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise InputError(target, f"is a folder that is not {kind} (it holds {shown}); {refuse}, or empty it yourself")
    return target


# --- seals: what a command wrote, so that a later run can tell its own unchanged output from a user's -------

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
    if record is None or record.get("kind") != kind:
        return f"it has no {SEAL_FILE} of {kind} (written before fsb sealed its outputs, or not by fsb)"
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


def _files_record(folder: Path) -> dict[str, list[str]]:
    try:
        record = json.loads((folder / FILES_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    return {k: [d for d in v if isinstance(d, str)] for k, v in record.items() if isinstance(k, str) and isinstance(v, list)}


def file_difference(path: str | os.PathLike[str]) -> str | None:
    """None when the file at `path` is one fsb wrote and nobody changed (its sha256 is recorded in its
    folder's .fsb-files.json); otherwise why not. For outputs that share a folder with a user's files."""
    p = Path(path)
    digests = _files_record(p.parent).get(p.name)
    if not digests:
        return f"no record of it in {FILES_RECORD} (not written by fsb, or written before fsb recorded its files)"
    try:
        if not p.is_symlink() and sha256_file(p) in digests:
            return None
    except OSError:
        pass
    return "it was edited after fsb wrote it"


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
    Returns the path."""
    p = check_replaceable_file(path)
    if not (p.exists() or p.is_symlink()):
        return p
    for item in inputs:
        if item is not None and _same_file(item, p):
            raise InputError(p, "is an input of this command; refusing to replace it: choose another path")
    if force:
        return p
    refuse = f"refusing to replace it: choose another path{hint}"
    if header is not None and not _is_empty(p) and not first_line_matches(header)(p):  # another command's output, or a user's
        raise InputError(p, f"exists and is not {kind} (its first line is not the header fsb writes there); {refuse}")
    why = file_difference(p)
    if why is not None:
        raise InputError(p, f"exists and is not {kind} unchanged: {why}; {refuse}")
    return p


def _is_empty(p: Path) -> bool:
    try:
        return p.stat().st_size == 0
    except OSError:
        return False


def _same_file(a: str | os.PathLike[str], b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # absent, or not a path (an item count such as "20")
        return False


@contextlib.contextmanager
def _record_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive flock on `folder` while its .fsb-files.json is read and rewritten, so two fsb runs
    writing files into one folder do not lose each other's entries (best effort where a folder cannot be locked)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            _try_lock(fd, block=True)
        yield
    finally:
        os.close(fd)


def record_digests(path: str | os.PathLike[str], digests: list[str] | None) -> None:
    """Set the sha256 digests recorded for the file at `path` in its folder's .fsb-files.json (a file is
    recognised while its content has any of them); None removes its entry, and the record file once it
    is empty. The other entries are kept."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    record_path = p.parent / FILES_RECORD
    with _record_lock(p.parent):
        record = _files_record(p.parent)
        if digests is not None:
            record[p.name] = digests
        elif record.pop(p.name, None) is None:
            return
        if record:
            atomic_write(record_path, json.dumps(record, indent=1, sort_keys=True) + "\n")
        else:
            with contextlib.suppress(FileNotFoundError):
                record_path.unlink()


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
    before = _files_record(p.parent).get(p.name)
    try:
        record_digests(p, [*keep, new])
    except OSError as e:
        raise _named(e, p, always=True) from e
    try:
        atomic_write(p, raw)
    except BaseException:  # a write that failed changes nothing: the record goes back to what it was
        with contextlib.suppress(OSError):
            record_digests(p, before or None)
        raise
    with contextlib.suppress(OSError):  # the file is written; the [old, new] record already recognises it
        record_digests(p, [new])


_HEX = "[0-9a-f]{12}"


def _stage_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(name)}\.(?:staging|old)-{_HEX}")


def _try_lock(fd: int, *, block: bool) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False


def _locked_stage(parent: Path, name: str) -> tuple[Path, int]:
    """A new staging folder `.NAME.staging-XXXX` and an fd holding an exclusive lock on it for as long as
    this process runs: a concurrent or later build sweeps only stages whose owner is gone."""
    while True:
        stage, _ = _fresh_sibling(parent, f".{name}.staging-", "", os.mkdir)
        try:
            fd = os.open(stage, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except FileNotFoundError:  # swept between mkdir and open by a build that saw it unlocked
            continue
        _try_lock(fd, block=True)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(stage).st_ino == os.fstat(fd).st_ino and os.fstat(fd).st_nlink > 0:
                return stage, fd
        os.close(fd)  # swept before we locked it: take another name


def sweep_stale_stages(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the `.NAME.staging-*` and `.NAME.old-*` folders of target `path` that no live process holds
    (left by a kill); a stage another build is writing is locked and kept. Returns what was removed."""
    target = Path(path).absolute()
    pattern = _stage_pattern(target.name)
    removed = []
    try:
        candidates = [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:
        return removed
    for stage in candidates:
        if stage.is_symlink() or not stage.is_dir():
            continue
        try:
            fd = os.open(stage, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            continue
        try:
            if _try_lock(fd, block=False):
                shutil.rmtree(stage, ignore_errors=True)
                removed.append(stage)
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def atomic_dir(
    path: str | os.PathLike[str],
    *,
    owned: Callable[[Path], bool] | None = None,
    kind: str,
    inputs: Iterable[str | os.PathLike[str]] = (),
    option: str = "--out",
    changed: Callable[[Path], str | None] | None = None,
    seal: str | None = None,
) -> Iterator[Path]:
    """Yield an empty staging folder beside `path`; on success it replaces `path`, on any error it is removed.

    `path` must pass check_replaceable_dir (checked on entry and again just before the swap). Stale
    stages of the same target left by a kill are swept first. The staged files and folders are fsync'd,
    then on Linux the old and new folders are swapped in one atomic renameat2(RENAME_EXCHANGE), so
    `path` always names a complete folder; elsewhere the old one is moved aside first and deleted only
    after the new one is in place. Either way a failure leaves the previous folder and no stage.
    With `seal`, the finished stage gets a seal of that kind (`write_seal`) before the swap.
    """
    target = check_replaceable_dir(path, owned=owned, kind=kind, inputs=inputs, option=option, changed=changed)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale_stages(target)
        stage, lock = _locked_stage(target.parent, target.name)
    except OSError as e:
        raise _named(e, target, always=True) from e
    try:
        yield stage
        if seal is not None:
            write_seal(stage, seal)
        _fsync_tree(stage)
        check_replaceable_dir(target, owned=owned, kind=kind, inputs=inputs, option=option, changed=changed)
        _swap_in(stage, target)
    except OSError as e:
        shutil.rmtree(stage, ignore_errors=True)
        raise _named(e, target, always=e.filename is not None and os.fspath(e.filename).startswith(os.fspath(stage))) from e
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        os.close(lock)
    _durable_rename(target.parent)


def _swap_in(stage: Path, target: Path) -> None:
    """Put the folder `stage` at `target`; whatever was at `target` is removed. On failure `target` is unchanged."""
    if not target.exists():
        os.replace(stage, target)
        return
    if _exchange(stage, target):
        shutil.rmtree(stage, ignore_errors=True)  # the stage path now holds the old folder
        return
    old, _ = _fresh_sibling(target.parent, f".{target.name}.old-", "", os.mkdir)  # reserve a name
    os.rmdir(old)
    os.replace(target, old)
    try:
        os.replace(stage, target)
    except BaseException:
        os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)
