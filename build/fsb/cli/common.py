"""What the command modules share: the kinds and headers of the files they write, the `--force` and
`--invalid` options (each option's choices defined once), JSON printing, the output check, and the one
parser for "a folder or ORG/NAME@REV". Nothing heavy is imported here."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "DESIGN_HEADER",
    "FORMS_HEADER",
    "INVALID_CHOICES",
    "INVALID_HELP",
    "JUDGMENTS_HEADER",
    "SCORES_HEADER",
    "SCORES_KIND",
    "add_force",
    "add_invalid",
    "hub_revision",
    "load_numpy_for_counting",
    "no_collection_at_exit",
    "output_file",
    "output_folder",
    "print_json",
    "write_stdout",
]

# The first line of each CSV a command writes: an extra refusal of a file plainly not fsb's (a file is only ever
# recognised as fsb's by its record, .fsb-files.json; see fsb.core.output).
SCORES_HEADER = r"item,score(_raw)?,.*"
DESIGN_HEADER = r"tuple_id(,Item\d+)+"
FORMS_HEADER = r"tuple_id(,Item\d+)+(,Text\d+)+"
JUDGMENTS_HEADER = r"Item\d+(,Item\d+)*,BestItem,WorstItem(,Annotator)?(,Timestamp)?"
SCORES_KIND = "a scores file from `fsb score`"

INVALID_CHOICES = ("refuse", "count", "drop")
INVALID_HELP = (
    "rows whose tuple repeats an item or whose best = worst (quality-control rows): refuse (default) stops at the first; "
    "count scores them as the NRC Perl counting script does (an item counts once per slot, best = worst counts both ways); "
    "drop leaves them out. Either way the number of such rows is printed, by kind, with the first line of each"
)


# What OpenBLAS reads, once, when it is loaded, for its thread count (in its order of precedence).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def load_numpy_for_counting() -> bool:
    """Load numpy with one OpenBLAS thread and without huge pages for its arrays, for a command that does no
    linear algebra and makes a few large arrays (counting scores, split-half reliability).

    Why one thread: numpy's OpenBLAS starts a thread per core when it is loaded, and those threads spin
    while they wait for work: 0.07 s of CPU in `fsb score` on 1e5 items (0.57 s in all), for threads that
    counting never uses. Why no huge pages: numpy asks the kernel for transparent huge pages (madvise
    MADV_HUGEPAGE) for every array of 4 MB or more, and where the kernel compacts memory to find them at the
    page fault (THP defrag "madvise", a common default) that costs more than it saves: `fsb score` on 1e6
    judgments spent 1.8-2.8 s in the kernel with them and 0.7-1.6 s without, same user time (integer and
    40-character ids, this machine, 2026-12-02). Both settings are read once, when numpy loads, so the
    variables are set only for that moment and then removed: nothing this process starts inherits them. A
    setting the user made (`BLAS_THREAD_VARIABLES`, NUMPY_MADVISE_HUGEPAGE) is left alone, and so is a
    numpy already loaded (`fsb.cli.main` called in a process that imported it).

    Returns
    -------
    bool
        Whether numpy was loaded here.
    """
    if "numpy" in sys.modules:
        return False
    chosen = {} if any(name in os.environ for name in BLAS_THREAD_VARIABLES) else {"OPENBLAS_NUM_THREADS": "1"}
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        chosen["NUMPY_MADVISE_HUGEPAGE"] = "0"
    os.environ.update(chosen)
    try:
        import numpy  # noqa: F401  (loaded for its side effect: OpenBLAS and numpy read the variables now)
    finally:
        for name in chosen:
            del os.environ[name]
    return True


def write_stdout(data: bytes) -> None:
    """UTF-8 bytes to standard output: through its byte buffer when it writes UTF-8 (no str of the whole
    output made and encoded again), else as text in its own encoding (a notebook's stream, a test's capture,
    another code page)."""
    buffer = getattr(sys.stdout, "buffer", None)
    encoding = getattr(sys.stdout, "encoding", "") or ""
    if buffer is None or encoding.lower().replace("_", "-") not in ("utf-8", "utf8"):
        try:
            sys.stdout.write(data.decode("utf-8"))
        except UnicodeEncodeError as err:
            from fsb.core.errors import FsbError

            shown = err.object[err.start : err.end]
            raise FsbError(
                f"standard output's encoding ({encoding or 'unknown'}) cannot write {shown!r}: write to a file with --out, "
                "or set PYTHONIOENCODING=utf-8"
            ) from None
        return
    sys.stdout.flush()  # text written before goes first
    buffer.write(data)


def no_collection_at_exit() -> None:
    """Let the process end without the interpreter's last garbage collections (`gc.freeze` at exit), for a
    command whose outputs are all written and closed when it returns.

    Why: at exit Python runs a full cyclic collection over every object of numpy, pyarrow and the modules
    (27k objects after `fsb score`), then more as it clears the modules, only for the operating system to
    take the memory back: 0.02 s of the 0.37 s CPU of `fsb score` on 1e5 items (median of 20 interleaved
    runs). Freezing moves the objects out of the collector's sight; objects are still freed by reference
    counting, and the standard streams are flushed at exit as always. Registered with `atexit`, so a
    process that calls `fsb.cli.main` and carries on (tests, notebooks) collects as usual until it ends.
    """
    global _FREEZE_AT_EXIT
    if not _FREEZE_AT_EXIT:
        import atexit
        import gc

        atexit.register(gc.freeze)  # atexit handlers run before the interpreter's exit collections
        _FREEZE_AT_EXIT = True


_FREEZE_AT_EXIT = False


def print_json(obj: object) -> None:
    """Print `obj` as indented, key-sorted JSON on stdout (the data; commentary goes to stderr)."""
    print(json.dumps(obj, indent=2, sort_keys=True))


def add_force(p: argparse.ArgumentParser) -> None:
    """The --force option of a command writing one file."""
    p.add_argument("--force", action="store_true", help="replace --out even if it is not this command's earlier output, unchanged")


def add_invalid(p: argparse.ArgumentParser) -> None:
    """The --invalid option of every command reading judgments (its choices defined once: INVALID_CHOICES)."""
    p.add_argument("--invalid", choices=INVALID_CHOICES, default="refuse", help=INVALID_HELP)


def output_file(path: str, header: str, kind: str, *, force: bool, inputs: Sequence[str | None] = ()) -> Path:
    """Refuse, before any work, an --out that is a folder, a device or FIFO, one of `inputs` (by path or inode,
    even with --force), or a file that its folder's record does not know as an earlier `kind` output,
    unchanged (unless `force`), through the output layer (`fsb.core.output.OutputPlan`); the header is an
    extra refusal (plainly a user's file), never a reason to accept one.

    Parameters
    ----------
    path
        the --out path.
    header
        a regex of the first line fsb writes there.
    kind
        the kind of output, as recorded.
    force
        replace a file that is not this kind unchanged (never an input, a folder or a special file).
    inputs
        the command's input paths (None entries are ignored).

    Returns
    -------
    Path
        the output path.
    """
    from fsb.core.output import OutputPlan
    from fsb.core.seals import check_recorded_file

    plan = OutputPlan("fsb", force=force)
    for item in inputs:
        plan.input(item, str(item))
    plan.output(path, "--out", kind=kind)
    plan.check()
    return check_recorded_file(path, force=force, kind=kind, header=header)


def output_folder(
    path: str, *, kind: str, changed: Callable[[Path], str | None], inputs: Sequence[str | None] = (), option: str = "--out"
) -> Path:
    """Refuse, before any work, a folder output that may not be replaced, by the one rule for folders
    (`fsb.core.folders.check_replaceable_dir`, which the library applies again when it writes): absent,
    empty, or a folder fsb wrote as `kind` that nobody changed; never a folder holding one of `inputs`,
    the current folder or an ancestor of it, a symbolic link or a file. A folder is never one output file
    among others (`fsb.core.output.OutputPlan` refuses folders), so it is checked here as a whole.

    Parameters
    ----------
    path
        the --out folder.
    kind
        the kind of folder, as its seal records it (e.g. `fsb.data.buildfolder.BUILD_KIND`).
    changed
        what differs in an existing folder from what fsb wrote (None: nothing).
    inputs
        the command's input paths (None entries are ignored).
    option
        the option naming the folder, for the message.

    Returns
    -------
    Path
        the absolute folder path.
    """
    from fsb.core.folders import check_replaceable_dir

    return check_replaceable_dir(path, kind=kind, changed=changed, inputs=[p for p in inputs if p], option=option)


def hub_revision(arg: str) -> tuple[str, str] | None:
    """The one parser of "a folder or ORG/NAME@REV": (repo_id, revision) when `arg` names no local path and
    has the form ORG/NAME@REV; None for a folder (or anything else, left to the folder's checks).

    Parameters
    ----------
    arg
        the command-line value.

    Returns
    -------
    tuple[str, str] | None
        (repo_id, revision), or None.
    """
    if os.path.exists(arg) or arg.count("@") != 1:
        return None
    repo_id, revision = arg.split("@")
    return (repo_id, revision) if repo_id.count("/") == 1 and revision else None
