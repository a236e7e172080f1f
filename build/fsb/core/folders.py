"""Folders the project replaces whole (`atomic_dir`): a staging folder beside the target, sealed and fsync'd,
then swapped in with one atomic renameat2(RENAME_EXCHANGE); and the one rule for which folders may be
replaced (`check_replaceable_dir`). Stages are registered like every temporary (fsb.core.atomic), so a
sweep never touches a user's folder that merely looks like one."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from fsb.core.atomic import (
    HEX,
    durable_rename,
    fresh_sibling,
    fsync_dir,
    named_error,
    register_scratch,
    sweep,
    sweep_stale_temporaries,
    try_lock,
    unregister_scratch,
)
from fsb.core.readers import InputError
from fsb.core.seals import write_seal

__all__ = ["atomic_dir", "check_replaceable_dir", "exchange", "sweep_stale_stages"]


_RENAME_EXCHANGE = 2  # linux/fs.h


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if sys.platform != "linux":
        return False
    import ctypes  # on use: 30 ms at import, and only a folder swap needs it

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


def _fsync_tree(root: Path) -> None:
    """fsync every file and folder under `root` (files first, then their folders, then `root`)."""
    for folder, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(folder))


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
        raise named_error(e, target) from e
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


def _stage_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(name)}\.(?:staging|old)-{HEX}")


def _locked_stage(parent: Path, name: str) -> tuple[Path, int]:
    """A new staging folder `.NAME.staging-XXXX` and an fd holding an exclusive lock on it for as long as
    this process runs: a concurrent or later build sweeps only stages whose owner is gone."""
    while True:
        stage, _ = fresh_sibling(parent, f".{name}.staging-", "", os.mkdir)
        try:
            fd = os.open(stage, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except FileNotFoundError:  # swept between mkdir and open by a build that saw it unlocked
            continue
        try_lock(fd, block=True)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(stage).st_ino == os.fstat(fd).st_ino and os.fstat(fd).st_nlink > 0:
                try:
                    register_scratch(stage)
                except BaseException:
                    os.close(fd)
                    shutil.rmtree(stage, ignore_errors=True)
                    raise
                return stage, fd
        os.close(fd)  # swept before we locked it: take another name


def sweep_stale_stages(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the `.NAME.staging-*` and `.NAME.old-*` folders of target `path` that fsb registered and no live
    process holds (left by a kill); a stage another build is writing is locked and kept, and a folder fsb did
    not register is never touched. Returns what was removed."""
    target = Path(path).absolute()
    return sweep(target.parent, _stage_pattern(target.name))


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
        sweep_stale_temporaries(target)
        sweep_stale_stages(target)
        stage, lock = _locked_stage(target.parent, target.name)
    except OSError as e:
        raise named_error(e, target, always=True) from e
    try:
        yield stage
        if seal is not None:
            write_seal(stage, seal)
        _fsync_tree(stage)
        check_replaceable_dir(target, owned=owned, kind=kind, inputs=inputs, option=option, changed=changed)
        _swap_in(stage, target)
    except OSError as e:
        shutil.rmtree(stage, ignore_errors=True)
        raise named_error(e, target, always=e.filename is not None and os.fspath(e.filename).startswith(os.fspath(stage))) from e
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        os.close(lock)
        if not stage.exists():
            unregister_scratch(stage)
    durable_rename(target.parent)


def _swap_in(stage: Path, target: Path) -> None:
    """Put the folder `stage` at `target`; whatever was at `target` is removed. On failure `target` is unchanged."""
    if not target.exists():
        os.replace(stage, target)
        return
    if exchange(stage, target):
        shutil.rmtree(stage, ignore_errors=True)  # the stage path now holds the old folder
        return
    old, _ = fresh_sibling(target.parent, f".{target.name}.old-", "", os.mkdir)  # reserve a name
    register_scratch(old)
    os.rmdir(old)
    os.replace(target, old)
    try:
        os.replace(stage, target)
    except BaseException:
        os.replace(old, target)
        unregister_scratch(old)
        raise
    shutil.rmtree(old, ignore_errors=True)
    unregister_scratch(old)
