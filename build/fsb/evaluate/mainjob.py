"""The README's main job: build the dataset from the release, load it back through `datasets`, run the
paper's analyses, evaluate the default model on a simple random sample, and print the report.
(size: a little over 400 lines: the job and its measured-figures page, whose checks run before the job starts.)

Its time estimates come from what lm-eval runs on this machine, now: before each task's first batch the model
wrapper (`fsb.evaluate.forward_passes.TimedHFLM`) prints lm-eval's own plan of forward rows (its grouping,
batching and length sorting), and after that batch an estimate timed per token on it. Nothing runs twice.

The measured-figures page: when and on what machine `make main` ran (cores, load
average at the start and the end, Python and torch versions), each step's wall and CPU time with the load at its
end, each model task's estimate beside its actual time, the total, and the one marked line the README quotes
(tests/test_docs.py checks the two agree). Written only by the default job, through the output layer as fsb's own
file: by default under the results folder (RESULTS/main-job.md, gitignored), so `make main` never changes a tracked
file; with `fsb main --record` (maintainers, from a source checkout) as docs/figures/main-job.md together with
README.md's marked line, in one unit, so the two always agree. A page edited by hand since fsb wrote it is refused
unless --force, checked before the job starts. The placeholder the docs generator commits (`PLACEHOLDER`, the
same text as docs/gen_ref.py's) is the project's own and is replaced without --force."""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import fifty_shades_of_bias as spec
from fsb.core import resources
from fsb.core.errors import FsbError
from fsb.core.output import write_unit
from fsb.core.readers import InputError
from fsb.core.seals import check_recorded_file
from fsb.data.dataset import build_dataset
from fsb.data.release import ANNOTATIONS, GENERATIONS, release_dir

__all__ = [
    "MAIN_JOB_MARK",
    "PAGE_KIND",
    "PLACEHOLDER",
    "Machine",
    "Step",
    "check_page",
    "machine_now",
    "marked_line",
    "page_path",
    "page_text",
    "planned_page",
    "readme_with_line",
    "run",
    "write_page",
    "write_record",
]


# --- the measured-figures page, docs/figures/main-job.md ---------------------------------------------------

MAIN_JOB_MARK = "<!-- fsb-main-job-total -->"
PAGE_KIND = "the measured-figures page of `fsb main` (docs/figures/main-job.md)"
PAGE = Path("docs") / "figures" / "main-job.md"
# What the total leaves out, reported by a fresh clone's first `make main` (2 cores, under load): setup, once.
FIRST_RUN = "The first run adds its setup: installing .venv (about 3 min with a warm pip cache) and converting SmolLM2 once (about 1 min)."
RESULTS_PAGE = "main-job.md"  # the default job's page, in its results folder
README_KIND = "README.md (its line after the `<!-- fsb-main-job-total` comment, written by `fsb main --record`)"
PLACEHOLDER = (
    "# The main job, measured\n\n"
    "This page is written by `fsb main --record`: the date, the machine (cores, load), each step's\n"
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


def planned_page(
    *, default_job: bool, results: str | os.PathLike[str] = "results/main", record: bool = False, force: bool = False
) -> Path | None:
    """The page this run will write, checked now (`check_page`), before the job starts: only the default job
    (`make main`) writes one, RESULTS/main-job.md (never a tracked file); with `record`, docs/figures/main-job.md
    of the checkout (README.md's marked line is checked too: `readme_with_line`).

    Parameters
    ----------
    default_job : the run is `fsb main` with the evaluation and the default sample; results : its results folder.
    record : write the checkout's docs/figures/main-job.md and README.md's line (`fsb main --record`).
    force : as `check_page`.

    Returns
    -------
    The page's path, or None when this run writes no page.
    """
    if record:
        page = page_path()
        if not default_job:
            raise FsbError("--record records the default job only: drop --skip-eval and --per-bin")
        if page is None:
            raise FsbError("--record writes docs/figures/main-job.md and README.md of a source checkout; this fsb is installed")
        readme_with_line(page.parents[2] / "README.md", "")
    elif not default_job:
        return None
    else:
        page = Path(results) / RESULTS_PAGE
    if page.exists() or page.is_symlink():
        check_page(page, force=force)
    return page


def readme_with_line(readme: Path, line: str) -> str:
    """README.md with the line after its one `<!-- fsb-main-job-total` comment replaced by `line`.

    Parameters
    ----------
    readme : the checkout's README.md; line : the page's marked line (`marked_line`).

    Returns
    -------
    The README's new text (InputError naming the README if it has not exactly one such comment with a line after it).
    """
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if ln.startswith("<!-- fsb-main-job-total")]
    if len(at) != 1 or at[0] + 1 >= len(lines):
        raise InputError(readme, f"needs exactly one line starting with <!-- fsb-main-job-total followed by a line (found {len(at)})")
    lines[at[0] + 1] = line + "\n"
    return "".join(lines)


def _replaceable_page(path: Path) -> bool:
    """The committed page may be replaced without --force: gen_ref's placeholder, or a measured page as the
    repository carries it (a fresh clone has no record of it; its shape is the page's: its title and one
    marked line). A page fsb recorded and someone then edited still needs --force."""
    try:
        if not path.is_file() or path.is_symlink():
            return False
        data = path.read_bytes()
        if data == PLACEHOLDER.encode("utf-8"):
            return True
        from fsb.core.seals import file_difference

        unrecorded = (file_difference(path, PAGE_KIND) or "").startswith("no record of it")
        text = data.decode("utf-8")
        return unrecorded and text.startswith("# The main job, measured\n") and text.count(MAIN_JOB_MARK) == 1
    except (OSError, UnicodeDecodeError):
        return False


def check_page(path: Path, *, force: bool = False) -> None:
    """Refuse, before the job starts, a page edited by hand since fsb wrote it (or not written by fsb), unless
    `force`; the committed placeholder passes.

    Parameters
    ----------
    path : the page; force : replace it whatever it holds (never a folder or a special file).
    """
    if not _replaceable_page(path):
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


def _load1(load: float | None) -> str:
    return "n/a" if load is None else f"{load:.2f}"


@dataclass(frozen=True)
class Step:
    """One step of the job: its wall and CPU seconds (this process, all its threads) and the 1-minute load at its end."""

    name: str
    wall: float
    cpu: float
    load: float | None


def _task_rows(tasks: Sequence[Mapping[str, Any]]) -> str:
    """The estimate-beside-actual table: one row per model task (`fsb.evaluate.runner._timed_run`'s record)."""
    if not tasks:
        return ""
    head = (
        "\n### Each model task: the estimate it printed, beside the time it took\n\n"
        "The estimate is printed after the task's first batch: lm-eval's own plan of forward rows (its grouping of\n"
        "requests that share all but their last token, its batches, longest first), timed per token (padded) on\n"
        "that first batch and extrapolated over the plan's tokens (`fsb.evaluate.forward_passes`). Rows: planned /\n"
        "counted at the model's calls. A change of load during a task moves its actual time, not its estimate.\n\n"
        "| task | requests | forward rows (planned / counted) | estimate | actual | actual / estimate | CPU "
        "| load (1 min) at start / end |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    out = []
    for t in tasks:
        est = t.get("estimate")
        ratio = f"{t['wall'] / est:.2f}x" if est else "n/a"
        start, end = t.get("load") or (None, None)
        out.append(
            f"| {t['task']} | {t['requests']} | {t['rows']} / {t['rows_counted']} | {_cell(est) if est else 'none'} | "
            f"{_cell(t['wall'])} | {ratio} | {_cell(t['cpu'])} | {_load1(start)} / {_load1(end)} |\n"
        )
    return head + "".join(out)


def page_text(
    started: dt.datetime,
    start: Machine,
    end: Machine,
    steps: Sequence[Step],
    total: float,
    *,
    cpu: float | None = None,
    tasks: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The page's Markdown.

    Parameters
    ----------
    started : when the job started (UTC); start, end : the machine at the start and the end.
    steps : each step in order; total, cpu : the job's wall and CPU seconds, start to end.
    tasks : per model task, what `fsb.evaluate.runner.main_job_eval` records (requests, rows, estimate, wall,
        CPU, load).

    Returns
    -------
    The page, with exactly one line starting with `MAIN_JOB_MARK`.
    """
    when = started.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = "".join(f"| {s.name} | {_cell(s.wall)} | {_cell(s.cpu)} | {_load1(s.load)} |\n" for s in steps)
    cpu_total = sum(s.cpu for s in steps) if cpu is None else cpu
    first = start.load[0] if start.load is not None else None
    return (
        "# The main job, measured\n\n"
        f"Written by `fsb main` (`make main`), started {when}. Wall times on this machine, under its load at the\n"
        "time: the same job on another machine, or under another load, takes another time. CPU time is this\n"
        "process's user + system time over all its threads (torch uses every core): on a quiet 2-core machine the\n"
        "model steps take about half their CPU time in wall time.\n\n"
        f"- machine: {start.cores} cores (os.cpu_count), Python {start.python}, torch {start.torch}\n"
        f"- load average (1 / 5 / 15 min): {_load(start.load)} at the start, {_load(end.load)} at the end\n\n"
        "| step | wall time | CPU time | load (1 min) at its end |\n|---|---|---|---|\n"
        f"{rows}| total | {_cell(total)} | {_cell(cpu_total)} | {_load1(end.load[0] if end.load else None)} |\n"
        f"{_task_rows(tasks)}\n"
        f"{MAIN_JOB_MARK} **Total time of `make main`:** {_duration(total)} on {when[:10]} "
        f"({start.cores} cores, load {_load1(first)} at the start; CPU time, the load and each task's estimate beside "
        f"it in docs/figures/main-job.md). {FIRST_RUN}\n"
    )


def marked_line(text: str) -> str:
    """The line of a page the README quotes: its one line starting with `MAIN_JOB_MARK`, without the mark.

    Parameters
    ----------
    text : the page.

    Returns
    -------
    The line, as the README's line after the `<!-- fsb-main-job-total` comment must read.
    """
    (line,) = [ln for ln in text.splitlines() if ln.startswith(MAIN_JOB_MARK)]
    return line.removeprefix(MAIN_JOB_MARK).strip()


def write_page(path: Path, text: str, *, force: bool = False) -> None:
    """Write the page through the output layer (recorded as `PAGE_KIND`); the placeholder is replaced freely.

    Parameters
    ----------
    path : the page; text : `page_text`'s output; force : replace a page edited by hand.
    """
    write_unit({path: text}, kinds={path: PAGE_KIND}, force=force or _replaceable_page(path))


def write_record(page: Path, readme: Path, text: str, *, force: bool = False) -> None:
    """`fsb main --record`: the checkout's page and README.md's marked line, written as one unit (all old or all
    new), so the README always quotes the page. The README is edited only at that line (`readme_with_line`).

    Parameters
    ----------
    page : docs/figures/main-job.md; readme : README.md; text : `page_text`'s output; force : replace a page
        edited by hand.
    """
    if not force and not _replaceable_page(page):
        check_page(page)
    new = readme_with_line(readme, marked_line(text))
    write_unit({page: text, readme: new}, kinds={page: PAGE_KIND, readme: README_KIND}, force=True)


def _write_measured(page: Path, text: str, *, record: bool, force: bool) -> None:
    """The run's page: RESULTS/main-job.md, or with `record` the checkout's page and README line (`write_record`)."""
    if record:
        readme = page.parents[2] / "README.md"
        write_record(page, readme, text, force=force)
        print(f"time and machine recorded in {page} and {readme} (its marked line)")
    else:
        write_page(page, text, force=force)
        print(f"time and machine recorded in {page}")


def _step_clock(started: float) -> tuple[list[Step], Callable[[str], None]]:
    """The job's steps so far, and the function that ends one: its wall and CPU time since the last one ended."""
    steps: list[Step] = []
    last = [started, time.process_time()]

    def mark(name: str) -> None:
        now, cpu, load = time.monotonic(), time.process_time(), machine_now().load
        steps.append(Step(name, now - last[0], cpu - last[1], load[0] if load else None))
        last[:] = [now, cpu]

    return steps, mark


def _step(message: str) -> None:
    print(f"\n== {message}", flush=True)


def run(
    *,
    raw_dir: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] = spec.NAME,
    results: str | os.PathLike[str] = "results/main",
    skip_eval: bool = False,
    sample: int | None = None,
    per_bin: int | None = None,
    force: bool = False,
    record: bool = False,
) -> int:
    """Run every stage in order, printing progress; returns the process exit code.

    `raw_dir` is the release folder (default: a local copy, else the pinned download), `out` the
    dataset folder, `results` where the analyses and the evaluation go. `skip_eval` stops after the
    analyses. The evaluation takes a simple random sample of `sample` sentences (default 10), or a
    stratified one of `per_bin` per equispaced bin (which inflates correlations).
    The analysis folder (results/.../analysis) is replaced on each run; it is refused only if it
    holds files that are not an earlier analysis. report.txt, timings.json and the baseline files in
    `results` are replaced only if unchanged since fsb wrote them, or with `force`; they are checked
    before anything is built, so a refusal changes nothing. The default job (`make main`: evaluation, default
    sample) records its machine and times in RESULTS/main-job.md (`page_text`); with `record` (`fsb main --record`,
    from a checkout) in docs/figures/main-job.md and README.md's marked line instead (`write_record`).
    """
    started, began, machine = time.monotonic(), dt.datetime.now(dt.UTC), machine_now()
    page = planned_page(default_job=not skip_eval and sample is None and per_bin is None, results=results, record=record, force=force)
    steps, mark = _step_clock(started)
    if not skip_eval:
        from fsb.evaluate.runner import check_main_job_files

        check_main_job_files(results, force=force)
    _step("1/4 build the dataset from the release")
    folder = release_dir(raw_dir)
    print(f"release: {folder}")
    built = build_dataset(folder / GENERATIONS, folder / ANNOTATIONS, out)
    stats = built.stats
    print(f"built {built.out} (fingerprint {stats['fingerprint'][:16]})")
    mark("1/4 build the dataset from the release")

    _step("2/4 load it back with datasets.load_dataset")
    default = spec.load("default", source=built.out)
    annotations = spec.load("annotations", source=built.out)
    rows = default[spec.SPLIT]
    print(f"default: {rows.num_rows} rows, features {', '.join(rows.features)}")
    print(f"annotations: {annotations[spec.SPLIT].num_rows} rows")
    from fsb.data.reference import placed_split_half

    for line in placed_split_half(stats["shr"], sentences=rows.num_rows, release=bool(stats["release"]["is_release"])):
        print(line)
    print(
        "bins low/medium/high: " + " / ".join(f"{stats['bins']['counts'][b]} (paper {spec.PAPER['bin_counts'][b]})" for b in spec.BIN_NAMES)
    )
    mark("2/4 load it back with datasets.load_dataset")

    _step("3/4 the paper's analyses: score histogram, seed and prompt type by bin, distinctive words")
    from fsb.analyse import analysis

    figures = Path(results) / "analysis"
    found = analysis.write_analysis(analysis.read_sentences(str(built.out)), figures)
    print(f"histogram (bins of 0.1): {' '.join(str(c) for c in found['histogram']['counts'])}")
    for b in spec.BIN_NAMES:
        print(analysis.marking_line(b, found["distinctive"]["unigrams"][b]))
    print(f"figures and report.md: {figures}")
    mark("3/4 the paper's analyses")

    if skip_eval:
        print(f"\ndone in {time.monotonic() - started:.0f} s (evaluation skipped)")
        return 0
    _step("4/4 evaluate the default model on a sample, beside the baselines")
    from fsb.evaluate.runner import main_job_eval

    tasks: list[dict[str, Any]] = []
    code = main_job_eval(built.out, Path(results), sample=sample, per_bin=per_bin, force=force, record=tasks)
    mark("4/4 evaluate the default model and the baselines, report")
    total = time.monotonic() - started
    print(f"\ndone in {total:.0f} s ({sum(st.cpu for st in steps):.0f} s of CPU time)")
    if page is not None and code == 0:
        text = page_text(began, machine, machine_now(), steps, total, tasks=tasks)
        _write_measured(page, text, record=record, force=force)
    return code
