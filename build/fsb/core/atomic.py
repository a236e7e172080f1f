"""Writes that never leave a half-written file or folder behind: `atomic_write` (a file), `atomic_dir` (a
folder swapped in whole), and the sweep of what a killed write left.

Every temporary file and staging folder fsb creates is registered by name in its folder's
`.fsb-scratch.json` once created; a sweep removes only registered names that no live process holds
locked. A user's file that happens to look like one (`.x.old-20261201abcd`, `.s.csv.deadbeef0000.tmp`) is
never in the register, so it is never touched."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from fsb.core.readers import InputError

__all__ = [
    "HEX",
    "SCRATCH_RECORD",
    "atomic_write",
    "check_replaceable_file",
    "durable_rename",
    "first_line_matches",
    "folder_lock",
    "fresh_sibling",
    "fsync_dir",
    "give_ordinary_modes",
    "is_special",
    "locked_temporary",
    "named_error",
    "new_file",
    "recover_units",
    "register_scratch",
    "registered_candidates",
    "registered_scratch",
    "sweep_stale_temporaries",
    "try_lock",
    "unregister_scratch",
    "write_file",
]

_T = TypeVar("_T")


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


# --- the register of what fsb created beside its outputs: only these names are ever swept -------------------

SCRATCH_RECORD = ".fsb-scratch.json"
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
            fd = os.open(key, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
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


def registered_scratch(folder: str | os.PathLike[str]) -> set[str]:
    """The names fsb registered in `folder` as its own temporaries and stages (see module docstring)."""
    try:
        record = json.loads((Path(folder) / SCRATCH_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    names = record.get("names") if isinstance(record, dict) else None
    return {n for n in names if isinstance(n, str) and "/" not in n} if isinstance(names, list) else set()


def _set_scratch(folder: Path, names: set[str]) -> None:
    record = folder / SCRATCH_RECORD
    if not names:
        with contextlib.suppress(FileNotFoundError):
            record.unlink()
        return
    tmp, fd = fresh_sibling(folder, f".{SCRATCH_RECORD}.", ".tmp", new_file)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps({"names": sorted(names)}, indent=1) + "\n")
        os.replace(tmp, record)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def register_scratch(path: str | os.PathLike[str]) -> None:
    """Record `path` (a temporary or stage fsb has just created, exclusively) in its folder's register."""
    p = Path(path)
    with folder_lock(p.parent):
        _set_scratch(p.parent, registered_scratch(p.parent) | {p.name})


def unregister_scratch(path: str | os.PathLike[str]) -> None:
    """Drop `path` from its folder's register (it was renamed into place or removed); never raises."""
    p = Path(path)
    with contextlib.suppress(OSError), folder_lock(p.parent):
        names = registered_scratch(p.parent)
        if p.name in names:
            _set_scratch(p.parent, names - {p.name})


def registered_candidates(target: Path, pattern: re.Pattern[str]) -> list[Path]:
    return [target.parent / n for n in sorted(registered_scratch(target.parent)) if pattern.fullmatch(n)]


def named_error(e: OSError, path: Path, *, always: bool = False) -> OSError:
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


def is_special(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is (or links to) a device, a FIFO or a socket: never an output, whatever --force says."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


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
    if is_special(p):  # renaming over it would replace a device node with a file; writing into it is no output
        raise InputError(p, "is a device, FIFO or socket, not a file; refusing to write to it (even with --force): choose another path")
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
        tmp, fd = locked_temporary(p)
    except OSError as e:
        raise named_error(e, p, always=True) from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        unregister_scratch(tmp)
        raise named_error(e, p, always=e.filename == os.fspath(tmp)) from e
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        unregister_scratch(tmp)
        raise
    unregister_scratch(tmp)
    durable_rename(p.parent)


def locked_temporary(p: Path) -> tuple[Path, int]:
    """A new `.NAME.XXXX.tmp` beside `p`, open for writing and exclusively locked (flock) while this process
    lives, so a later write of the same target can tell a temporary left by a kill from one being written."""
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


def sweep_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the `.NAME.XXXX.tmp` files of target `path` that fsb registered (`register_scratch`) and no live
    process holds (a write killed before its rename); a temporary another process is writing is locked and
    kept, and a file fsb did not register is never touched. Returns what was removed."""
    target = Path(path).absolute()
    recover_units(target.parent)  # a committed unit's temporaries are finished, never swept
    pattern = re.compile(rf"\.{re.escape(target.name)}\.{HEX}\.tmp")
    removed = []
    for tmp in registered_candidates(target, pattern):
        try:
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            unregister_scratch(tmp)
            continue
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and try_lock(fd, block=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                unregister_scratch(tmp)
                removed.append(tmp)
        finally:
            os.close(fd)
    return removed


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
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
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


HEX = "[0-9a-f]{12}"


def try_lock(fd: int, *, block: bool) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False


_UNIT = re.compile(r"\.fsb-unit-[0-9a-f]{12}\.json")


def recover_units(folder: str | os.PathLike[str]) -> int:
    """Finish the units a kill interrupted after their commit (rename what their intent records name) and drop
    intents that were never completed; only registered intents that no live process holds are touched.
    Returns the number of units rolled forward."""
    root = Path(folder)
    done = 0
    for name in sorted(registered_scratch(root)):
        if not _UNIT.fullmatch(name):
            continue
        intent = root / name
        try:
            fd = os.open(intent, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            unregister_scratch(intent)
            continue
        except OSError:
            continue
        try:
            if not try_lock(fd, block=False):
                continue  # a live unit
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
        finally:
            os.close(fd)
    return done
