"""The main job's measured-figures page, docs/figures/main-job.md: when and on what machine `make main` ran
(cores, load average at the start and the end, Python and torch versions), each step's wall time and the
total, and the one marked line the README quotes (tests/test_docs.py checks the two agree).

Written only from a source checkout (`fsb.core.resources.repo_root()`), never inside an installed package,
and through the output layer as fsb's own file: a page edited by hand since fsb wrote it is refused unless
--force, checked before the job starts. The placeholder the docs generator commits (`PLACEHOLDER`, the same
text as docs/gen_ref.py's) is the project's own and is replaced without --force.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from fsb.core import resources
from fsb.core.output import write_unit
from fsb.core.seals import check_recorded_file

__all__ = [
    "MAIN_JOB_MARK",
    "PAGE_KIND",
    "PLACEHOLDER",
    "Machine",
    "check_page",
    "machine_now",
    "page_path",
    "page_text",
    "planned_page",
    "write_page",
]

MAIN_JOB_MARK = "<!-- fsb-main-job-total -->"
PAGE_KIND = "the measured-figures page of `fsb main` (docs/figures/main-job.md)"
PAGE = Path("docs") / "figures" / "main-job.md"
PLACEHOLDER = (
    "# The main job, measured\n\n"
    "This page is written by `fsb main` (`make main`): the date, the machine (cores, load), each step's\n"
    "time and the total. The README quotes the line below.\n\n"
    f"{MAIN_JOB_MARK} **Total time of `make main`:** not yet recorded in this checkout; "
    "`fsb main` prints its expected time before each evaluation.\n"
)


@dataclass(frozen=True)
class Machine:
    """What the page says about the machine: cores, load average (1, 5, 15 min), Python and torch versions."""

    cores: int
    load: tuple[float, float, float] | None
    python: str
    torch: str


def machine_now() -> Machine:
    """The machine as it is now (the load average is None where the system has none).

    Returns
    -------
    Its cores, load average, Python version and installed torch version ("not installed" without one).
    """
    try:
        load: tuple[float, float, float] | None = os.getloadavg()
    except OSError:
        load = None
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    return Machine(os.cpu_count() or 1, load, platform.python_version(), torch)


def page_path() -> Path | None:
    """docs/figures/main-job.md of the checkout this package runs from; None for an installed package."""
    root = resources.repo_root()
    return None if root is None else root / PAGE


def planned_page(*, default_job: bool, force: bool = False) -> Path | None:
    """The page this run will write, checked now (`check_page`), before the job starts: only the default job
    (`make main`) run from a checkout writes it.

    Parameters
    ----------
    default_job : the run is `fsb main` with the evaluation and the default sample; force : as `check_page`.

    Returns
    -------
    The page's path, or None when this run writes no page.
    """
    page = page_path() if default_job else None
    if page is not None:
        check_page(page, force=force)
    return page


def _is_placeholder(path: Path) -> bool:
    try:
        return path.is_file() and not path.is_symlink() and path.read_bytes() == PLACEHOLDER.encode("utf-8")
    except OSError:
        return False


def check_page(path: Path, *, force: bool = False) -> None:
    """Refuse, before the job starts, a page edited by hand since fsb wrote it (or not written by fsb), unless
    `force`; the committed placeholder passes.

    Parameters
    ----------
    path : the page; force : replace it whatever it holds (never a folder or a special file).
    """
    if not _is_placeholder(path):
        check_recorded_file(path, force=force, kind=PAGE_KIND, hint=", or pass --force")


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 90:
        return f"{s} s"
    if s < 90 * 60:
        return f"{s / 60:.0f} min"
    return f"{s // 3600} h {s % 3600 / 60:.0f} min"


def _cell(seconds: float) -> str:
    return _duration(seconds) if seconds < 90 else f"{_duration(seconds)} ({seconds:.0f} s)"


def _load(load: tuple[float, float, float] | None) -> str:
    return "not available" if load is None else " / ".join(f"{x:.2f}" for x in load)


def page_text(started: dt.datetime, start: Machine, end: Machine, steps: Sequence[tuple[str, float]], total: float) -> str:
    """The page's Markdown.

    Parameters
    ----------
    started : when the job started (UTC); start, end : the machine at the start and the end.
    steps : (step, wall seconds) in order; total : the job's wall seconds, start to end.

    Returns
    -------
    The page, with exactly one line starting with `MAIN_JOB_MARK`.
    """
    when = started.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = "".join(f"| {name} | {_cell(sec)} |\n" for name, sec in steps)
    first = "" if start.load is None else f", load average {start.load[0]:.2f} at the start"
    return (
        "# The main job, measured\n\n"
        f"Written by `fsb main` (`make main`), started {when}. Wall times on this machine, under its load at the\n"
        "time: the same job on another machine, or under another load, takes another time.\n\n"
        f"- machine: {start.cores} cores (os.cpu_count), Python {start.python}, torch {start.torch}\n"
        f"- load average (1 / 5 / 15 min): {_load(start.load)} at the start, {_load(end.load)} at the end\n\n"
        "| step | wall time |\n|---|---|\n"
        f"{rows}| total | {_cell(total)} |\n\n"
        f"{MAIN_JOB_MARK} **Total time of `make main`:** {_duration(total)} on {when[:10]} "
        f"({start.cores} cores{first}; docs/figures/main-job.md).\n"
    )


def write_page(path: Path, text: str, *, force: bool = False) -> None:
    """Write the page through the output layer (recorded as `PAGE_KIND`); the placeholder is replaced freely.

    Parameters
    ----------
    path : the page; text : `page_text`'s output; force : replace a page edited by hand.
    """
    write_unit({path: text}, kinds={path: PAGE_KIND}, force=force or _is_placeholder(path))
