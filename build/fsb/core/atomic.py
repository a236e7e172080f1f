"""Writes that never leave a half-written file behind (`atomic_write`), fsb's own records beside its
outputs (`read_record`, `write_record`), and the sweep of what a killed write left.

Every temporary file and staging folder fsb creates is registered by name in its folder's
`.fsb-scratch.json` once created; a sweep removes only registered names that no live process holds
locked. A user's file that happens to look like one (`.x.old-20261201abcd`, `.s.csv.deadbeef0000.tmp`) is
never in the register, so it is never touched. A record carries a mark only fsb writes (`"fsb": ...`): a
file of a record's name without it (a user's own `.fsb-scratch.json`, or one an fsb before the marks wrote)
is refused in one line, never trusted, replaced or removed."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from fsb.core.readers import InputError

__all__ = [
    "HEX",
    "SCRATCH_RECORD",
    "atomic_write",
    "check_replaceable_file",
    "durable_rename",
    "folder_lock",
    "fresh_sibling",
    "fsync_dir",
    "give_ordinary_modes",
    "locked_temporary",
    "named_error",
    "new_file",
    "read_record",
    "recover_units",
    "register_scratch",
    "registered_scratch",
    "sweep",
    "sweep_stale_temporaries",
    "try_lock",
    "unregister_scratch",
    "write_file",
    "write_record",
]

_T = TypeVar("_T")
HEX = "[0-9a-f]{12}"
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def fresh_sibling(parent: Path, prefix: str, suffix: str, make: Callable[[Path], _T]) -> tuple[Path, _T]:
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


def new_file(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)


def try_lock(fd: int, *, block: bool) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False


# --- fsb's records beside its outputs: marked, so a user's file of the same name is never taken for one -----


def read_record(path: Path, mark: str) -> dict[str, Any]:
    """The record fsb keeps at `path` ({} when there is none). A file there that is not fsb's record
    `mark` is refused (InputError naming it): fsb neither trusts it nor replaces or removes it."""
    try:
        with open(path, "rb") as f:
            record: Any = json.loads(f.read(1 << 24))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or record.get("fsb") != mark:
        raise InputError(
            path,
            "is not a record fsb wrote (fsb keeps its own bookkeeping under this name), so fsb neither trusts nor "
            "replaces it: rename it if it is yours, delete it if an earlier fsb wrote it, or write the output elsewhere",
        )
    return record


def write_record(path: Path, mark: str, body: dict[str, Any]) -> None:
    """Replace the record at `path` by `body` under fsb's `mark`; an empty `body` removes the record. The
    caller holds `folder_lock` and has read the record. Written through a registered temporary
    (`atomic_write`), but for the register itself, whose temporary cannot be registered in it."""
    if not body:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    text = json.dumps({"fsb": mark, **body}, indent=1, sort_keys=True) + "\n"
    if path.name != SCRATCH_RECORD:
        atomic_write(path, text)
        return
    tmp, fd = fresh_sibling(path.parent, f".{path.name}.", ".tmp", new_file)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


_LOCKS: dict[str, tuple[threading.RLock, list[int]]] = {}
_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive flock on `folder` while its records are read and rewritten, so two fsb runs writing
    into one folder do not lose each other's entries. Re-entrant within a process (a record written while
    the register is held takes the same lock); best effort where a folder cannot be locked."""
    key = os.path.realpath(folder)
    with _LOCKS_GUARD:
        lock, held = _LOCKS.setdefault(key, (threading.RLock(), []))
    with lock:
        if held:  # this thread already holds the folder's flock
            held.append(held[-1])
            try:
                yield
            finally:
                held.pop()
            return
        try:
            fd = os.open(key, os.O_RDONLY | _O_DIRECTORY)
        except OSError:
            yield
            return
        held.append(fd)
        try:
            with contextlib.suppress(OSError):
                try_lock(fd, block=True)
            yield
        finally:
            held.pop()
            os.close(fd)


SCRATCH_RECORD = ".fsb-scratch.json"
_SCRATCH_MARK = "temporaries"


def registered_scratch(folder: str | os.PathLike[str]) -> set[str]:
    """The names fsb registered in `folder` as its own temporaries and stages (see module docstring)."""
    names = read_record(Path(folder) / SCRATCH_RECORD, _SCRATCH_MARK).get("names")
    return {n for n in names if isinstance(n, str) and "/" not in n} if isinstance(names, list) else set()


def _change_scratch(path: Path, add: bool) -> None:
    with folder_lock(path.parent):
        names = registered_scratch(path.parent)
        if (path.name in names) != add:
            names = names | {path.name} if add else names - {path.name}
            write_record(path.parent / SCRATCH_RECORD, _SCRATCH_MARK, {"names": sorted(names)} if names else {})


def register_scratch(path: str | os.PathLike[str]) -> None:
    """Record `path` (a temporary or stage fsb has just created, exclusively) in its folder's register."""
    _change_scratch(Path(path), True)


def unregister_scratch(path: str | os.PathLike[str]) -> None:
    """Drop `path` from its folder's register (it was renamed into place or removed); never raises."""
    with contextlib.suppress(OSError, InputError):
        _change_scratch(Path(path), False)


# --- writing one file ------------------------------------------------------------------------------------


def named_error(e: OSError, path: Path, *, always: bool = False) -> OSError:
    """`e` with `path` as its file name when the OS gave none (a write that hits ENOSPC or EFBIG names no
    file), or `always` (a temporary sibling's name means nothing to the user), so the CLI's one line
    says which output failed."""
    if e.filename is None or always:
        return type(e)(e.errno, e.strerror or str(e), os.fspath(path))
    return e


def check_replaceable_file(path: str | os.PathLike[str]) -> Path:
    """Refuse (InputError naming `path`) an output file path that is a folder, a device, a FIFO or a socket
    (renaming over one would replace a device node with a file; writing into it is no output), or whose
    parent is not a folder; return the path. Whether an existing file may be replaced is `fsb.core.seals`'."""
    p = Path(path)
    if p.is_dir():
        raise InputError(p, "is a folder; give a file path")
    mode = 0
    with contextlib.suppress(OSError, ValueError):  # absent, or a name the OS refuses: not special
        mode = os.stat(p).st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise InputError(p, "is a device, FIFO or socket, not a file; refusing to write to it (even with --force): choose another path")
    if p.parent.exists() and not p.parent.is_dir():
        raise InputError(p.parent, "is not a folder, so it cannot hold the output")
    return p


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write a file by writing a temporary sibling, fsyncing it, then renaming it over `path` (refused by
    `check_replaceable_file`: a folder, a device). An OS error (ENOSPC, EFBIG, EACCES) names `path` and
    leaves no temporary file. Stale temporaries of the folder are swept first."""
    p = check_replaceable_file(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale_temporaries(p)
        tmp, fd = locked_temporary(p)
    except OSError as e:
        raise named_error(e, p, always=True) from e
    try:
        with open(fd, "wb", closefd=False) as f:  # the lock is held until the rename: no sweep takes it
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        unregister_scratch(tmp)
        if isinstance(e, OSError):
            raise named_error(e, p, always=e.filename == os.fspath(tmp)) from e
        raise
    finally:
        os.close(fd)
    unregister_scratch(tmp)
    durable_rename(p.parent)


def locked_temporary(p: Path) -> tuple[Path, int]:
    """A new `.NAME.XXXX.tmp` beside `p`, open for writing, registered, and exclusively locked (flock) while
    this process lives, so a later write can tell a temporary left by a kill from one being written."""
    while True:
        tmp, fd = fresh_sibling(p.parent, f".{p.name}.", ".tmp", new_file)
        try_lock(fd, block=True)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                try:
                    register_scratch(tmp)
                except BaseException:
                    os.close(fd)
                    os.unlink(tmp)
                    raise
                return tmp, fd
        os.close(fd)  # swept between creation and lock: take another name


def durable_rename(folder: Path) -> None:
    """Best-effort fsync of the folder after a rename: the change is made, so a failure here must not
    turn a completed write into a reported failure (the file itself was fsync'd before the rename)."""
    with contextlib.suppress(OSError):
        fsync_dir(folder)


def write_file(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write a new file inside a staging folder (atomic_dir fsyncs it before the swap); an OS error names the path."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "xb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as e:
        raise named_error(e, p) from e


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | _O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as e:  # some filesystems refuse fsync on a folder; the rename is still atomic
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def give_ordinary_modes(root: str | os.PathLike[str]) -> None:
    """Give every file under `root` the mode a new file gets (0666 minus the umask, as open() applies it):
    for folders written by libraries that create files 0600 (safetensors does). The umask is not read
    or changed process-wide: a probe file created in `root` shows the mode."""
    top = Path(root)
    probe, fd = fresh_sibling(top, ".mode-probe-", "", new_file)
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


# --- the sweep of what a kill left: registered names that no live process holds ------------------------------

_TEMPORARY = re.compile(rf"\..+\.{HEX}\.tmp")
_UNIT = re.compile(rf"\.fsb-unit-{HEX}\.json")


@contextlib.contextmanager
def _if_left(path: Path) -> Iterator[int | None]:
    """A descriptor of the registered `path`, locked, when no live process holds it (a kill left it); None when
    one does, or when it is not there (then unregistered) or not fsb's to touch (a symbolic link)."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            unregister_scratch(path)
        yield None
        return
    try:
        mode = os.fstat(fd).st_mode
        yield fd if (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and try_lock(fd, block=False) else None
    finally:
        os.close(fd)


def sweep(folder: Path, pattern: re.Pattern[str]) -> list[Path]:
    """Remove the registered names of `folder` that fully match `pattern` and that no live process holds
    locked (a file or a folder a kill left); a locked one is being written and is kept, a name fsb did not
    register is never touched. Returns what was removed."""
    removed = []
    for name in sorted(n for n in registered_scratch(folder) if pattern.fullmatch(n)):
        path = folder / name
        with _if_left(path) as fd:
            if fd is not None:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                unregister_scratch(path)
                removed.append(path)
    return removed


def sweep_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Before writing `path` (or anything else in its folder): finish the units a kill interrupted after their
    commit (`recover_units`), then remove every `.NAME.XXXX.tmp` of that folder that fsb registered and no
    live process holds (a write killed before its rename, of any target there). Returns what was removed."""
    folder = Path(path).absolute().parent
    recover_units(folder)  # a committed unit's temporaries are finished, never swept
    return sweep(folder, _TEMPORARY)


def recover_units(folder: str | os.PathLike[str]) -> int:
    """Finish the units a kill interrupted after their commit (rename what their intent records name) and drop
    intents that were never completed; only registered intents that no live process holds are touched.
    Returns the number of units rolled forward."""
    root = Path(folder)
    done = 0
    for name in sorted(n for n in registered_scratch(root) if _UNIT.fullmatch(n)):
        intent = root / name
        with _if_left(intent) as fd:
            if fd is None:
                continue  # a live unit, or gone
            try:
                moves = json.loads(os.read(fd, 1 << 20).decode("utf-8"))["moves"]
            except (ValueError, KeyError, TypeError):
                moves = []  # killed while writing the intent: never committed, the old files stand
            for tmp, target in moves:
                if os.path.exists(tmp) and Path(tmp).name in registered_scratch(Path(tmp).parent):
                    os.replace(tmp, target)
                    unregister_scratch(tmp)
            done += bool(moves)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(intent)
            unregister_scratch(intent)
    return done
