"""The output layer: every command declares its inputs and its outputs here before it writes anything, and
this layer alone decides whether a write may happen, then does it.

    plan = OutputPlan("fsb score", force=args.force)
    plan.input(args.annotations, "ANNOTATIONS")
    out = plan.output(args.out, "--out", kind=SCORES_KIND)          # one call per file the command writes
    plan.check()                                                    # before any work: refusals change nothing
    ...
    plan.write(out, text)                                           # or plan.write_unit({tasks: ..., config: ...})

What `check` refuses (an `InputError` naming the file and the option; nothing is changed):
- an output that is an input or another output of the run, compared by resolved path and by device and
  inode (a hard link, a `..` path, a symbolic link: all caught), whatever --force says;
- an output that is a folder, a device, a FIFO or a socket, whatever --force says;
- an existing output that its folder's record (`.fsb-files.json`) does not know as this kind of output,
  unchanged since fsb wrote it, unless --force. A header or first line never makes a file "ours": a
  judgments file `fsb annotate import` wrote is recorded as that kind and never taken for another's.

A multi-file output (Label Studio's tasks + config, seeds + manifest, generate's output + CSV, a baseline
+ its provenance) is written by `write_unit` as one transaction: every new file is written to a
registered temporary and fsync'd, then an intent record `.fsb-unit-XXXX.json` naming every (temporary,
target) pair is fsync'd (the commit point), then the renames happen and the intent is removed. A kill
before the commit leaves every old file (the temporaries are swept later); a kill after it is rolled
forward by `recover_units`, which the layer runs on every folder it is about to check or write and which
`read_unit` runs before reading: what fsb reads is always all old or all new.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fsb.core.atomic import (
    check_replaceable_file,
    durable_rename,
    fresh_sibling,
    fsync_dir,
    locked_temporary,
    named_error,
    new_file,
    recover_units,
    register_scratch,
    sweep_stale_temporaries,
    try_lock,
    unregister_scratch,
)
from fsb.core.readers import InputError, sha256_file
from fsb.core.seals import check_recorded_file, file_difference, record_digests

__all__ = ["Output", "OutputPlan", "identity", "recover_units", "write_unit"]


def identity(path: str | os.PathLike[str]) -> tuple[str, tuple[int, int] | None]:
    """(resolved path, (device, inode) or None when absent): what two names of one file share."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except (OSError, ValueError):
        return real, None
    return real, (st.st_dev, st.st_ino)


def _same(a: tuple[str, tuple[int, int] | None], b: tuple[str, tuple[int, int] | None]) -> bool:
    return a[0] == b[0] or (a[1] is not None and a[1] == b[1])


@dataclass(frozen=True)
class Output:
    """One declared output: its path, the option that named it, the kind of output it is, and whether
    --force may replace a file that is not this kind unchanged (never an input, a device or a folder)."""

    path: Path
    option: str
    kind: str | None  # None: a file with its own rules (a journal), checked only for collisions and special files
    force: bool


class OutputPlan:
    """One command's declared inputs and outputs (see the module docstring)."""

    def __init__(self, command: str, *, force: bool = False) -> None:
        self.command = command
        self.force = force
        self.inputs: list[tuple[Path, str]] = []
        self.outputs: list[Output] = []

    def input(self, path: str | os.PathLike[str] | None, option: str) -> None:
        """Declare a file (or folder) the command reads; None (an option not given) is ignored."""
        if path is not None and str(path) not in ("", "-"):
            self.inputs.append((Path(path), option))

    def output(self, path: str | os.PathLike[str] | None, option: str, *, kind: str | None, force: bool | None = None) -> Path | None:
        """Declare a file the command writes as `kind` (`force` defaults to the plan's); returns its path.
        `kind=None` declares a file with rules of its own (a journal): only collisions and special files are
        checked. None (an option not given) is ignored."""
        if path is None or str(path) in ("", "-"):
            return None
        p = Path(path)
        self.outputs.append(Output(p, option, kind, self.force if force is None else force))
        return p

    def check(self) -> None:
        """Refuse, before any work, every collision and every output that may not be replaced (module docstring)."""
        for i, out in enumerate(self.outputs):
            here = identity(out.path)
            for path, option in self.inputs:
                if _same(here, identity(path)):
                    raise InputError(
                        out.path,
                        f"is an input of this command ({option}); refusing to replace it, even with --force: "
                        f"choose another path for {out.option}",
                    )
            for other in self.outputs[:i]:
                if _same(here, identity(other.path)):
                    raise InputError(out.path, f"{out.option} and {other.option} name the same file; give each output its own path")
        for out in self.outputs:
            _refuse_inside_sealed(out)
            check_replaceable_file(out.path)  # a folder, device, FIFO or socket: whatever --force says
            with contextlib.suppress(OSError):  # what a kill left in the folder: finished or swept, at this start
                sweep_stale_temporaries(out.path)
            if out.kind is not None:
                check_recorded_file(out.path, force=out.force, kind=out.kind, hint=", or pass --force")

    def _declared(self, path: str | os.PathLike[str]) -> Output:
        for out in self.outputs:
            if os.path.abspath(out.path) == os.path.abspath(path):
                return out
        raise ValueError(f"{path} was not declared as an output of {self.command}")

    def write(self, path: str | os.PathLike[str], data: bytes | str) -> None:
        """Write one declared output (a unit of one file)."""
        self.write_unit({path: data})

    def write_unit(self, files: Mapping[str | os.PathLike[str], bytes | str]) -> None:
        """Write declared outputs as one unit: after a kill at any instant, all old or all new."""
        outs = [self._declared(p) for p in files]
        kinds = {o.path: o.kind or "an output of " + self.command for o in outs}
        write_unit({o.path: files[p] for o, p in zip(outs, files, strict=True)}, kinds=kinds, force=any(o.force for o in outs))


def _refuse_inside_sealed(out: Output) -> None:
    """Refuse an output inside a folder another command sealed (a dataset build, an analysis, a report), even
    with --force: such a folder is replaced whole by its own command, never written into file by file."""
    from fsb.core.seals import SEAL_FILE, read_seal

    here = Path(os.path.realpath(out.path)).parent
    for folder in (here, *here.parents):
        if (folder / SEAL_FILE).is_file():
            kind = (read_seal(folder) or {}).get("kind") or "another command's output"  # read_seal never raises
            raise InputError(
                out.path,
                f"is inside {folder}, sealed as {kind} (its {SEAL_FILE}); fsb never writes into a sealed folder, even "
                f"with --force: choose a path outside it for {out.option}",
            )


def write_unit(
    files: Mapping[str | os.PathLike[str], bytes | str],
    *,
    kinds: Mapping[str | os.PathLike[str], str] | str,
    force: bool = False,
) -> None:
    """Write several files as one unit (module docstring): each is checked (`check_recorded_file`: a file
    not recorded as its kind, unchanged, is refused unless `force`; a folder, device, FIFO or socket
    always), written to a registered temporary and fsync'd; then the intent record commits the unit and
    the renames follow. Each new file is recorded as its kind in its folder's .fsb-files.json.

    Parameters
    ----------
    files
        target path -> its new content (str is written as UTF-8).
    kinds
        target path -> kind of output, or one kind for all.
    force
        replace existing files that are not this kind unchanged (never a folder or a special file).
    """
    targets = [Path(p) for p in files]
    kind_of = {Path(p): k for p, k in kinds.items()} if not isinstance(kinds, str) else dict.fromkeys(targets, kinds)
    for i, p in enumerate(targets):
        if any(_same(identity(p), identity(q)) for q in targets[:i]):
            raise InputError(p, "is named twice among the files of one output; give each its own path")
    for p in targets:
        with contextlib.suppress(OSError):
            sweep_stale_temporaries(p)  # a unit a kill interrupted is finished first, its folder's leftovers swept
        check_recorded_file(p, force=force, kind=kind_of[p])
    data = {p: (v.encode("utf-8") if isinstance(v, str) else v) for p, v in zip(targets, files.values(), strict=True)}
    staged: list[tuple[Path, Path, int]] = []
    intent: Path | None = None
    try:
        for p in targets:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp, fd = locked_temporary(p)
            staged.append((tmp, p, fd))
            with open(fd, "wb", closefd=False) as f:
                f.write(data[p])
                f.flush()
                os.fsync(f.fileno())
        for p in targets:  # the old digest stays recognised until the unit is in place
            keep = [sha256_file(p)] if p.is_file() and file_difference(p, kind_of[p]) is None else []
            record_digests(p, [*keep, hashlib.sha256(data[p]).hexdigest()], kind=kind_of[p])
        intent = _commit(targets[0].parent, [(tmp, p) for tmp, p, _ in staged]) if len(targets) > 1 else None
        for tmp, p, _ in staged:
            os.replace(tmp, p)
    except BaseException as e:
        if intent is None:
            _abandon(staged)
        else:  # committed: finish what can be finished; what cannot stays for recover_units
            _roll_forward(staged, intent)
        if isinstance(e, OSError):
            raise named_error(e, targets[0], always=True) from e
        raise
    for tmp, _p, fd in staged:
        os.close(fd)
        unregister_scratch(tmp)
    for folder in {p.parent for p in targets}:
        durable_rename(folder)
    if intent is not None:
        _finish(intent)
    for p in targets:
        with contextlib.suppress(OSError):
            record_digests(p, [hashlib.sha256(data[p]).hexdigest()], kind=kind_of[p])


def _commit(folder: Path, moves: list[tuple[Path, Path]]) -> Path:
    """Write and fsync the intent record of a unit (its commit point); registered, and locked while we live."""
    intent, fd = fresh_sibling(folder, ".fsb-unit-", ".json", new_file)
    try_lock(fd, block=True)
    register_scratch(intent)
    body = json.dumps({"moves": [[os.path.abspath(t), os.path.abspath(p)] for t, p in moves]}) + "\n"
    with open(fd, "w", encoding="utf-8", closefd=False) as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    _LIVE[intent] = fd
    with contextlib.suppress(OSError):
        fsync_dir(folder)
    return intent


_LIVE: dict[Path, int] = {}


def _finish(intent: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(intent)
    unregister_scratch(intent)
    fd = _LIVE.pop(intent, None)
    if fd is not None:
        os.close(fd)


def _roll_forward(staged: list[tuple[Path, Path, int]], intent: Path) -> None:
    """A committed unit whose renames failed part way: finish them, else leave the intent for recover_units."""
    try:
        for tmp, p, _fd in staged:
            if tmp.exists():
                os.replace(tmp, p)
    except OSError:
        fd = _LIVE.pop(intent, None)
        if fd is not None:
            os.close(fd)  # unlocked: the next run's recover_units finishes the unit
        return
    _abandon(staged)
    _finish(intent)


def _abandon(staged: list[tuple[Path, Path, int]]) -> None:
    """A unit that failed before its commit: remove its temporaries (the old files stay)."""
    for tmp, _p, fd in staged:
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        unregister_scratch(tmp)
