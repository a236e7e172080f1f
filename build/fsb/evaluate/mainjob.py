"""The README's main job: build the dataset from the release, load it back through `datasets`, run the
paper's analyses, evaluate the default model on a simple random sample, and print the report.
(size: a little over 400 lines: the job, its time estimates and the page that records its time belong together.)

Its time estimates come from this machine, now: `measure_first` times the first requests (the paper's
8-shot scoring prompt on the default model, `smollm2_timer`) and `estimate_line` extrapolates them and
says so, instead of fixed per-request rates (which read "about 5 min" for a run that took 54 under load).

The measured-figures page, docs/figures/main-job.md: when and on what machine `make main` ran (cores, load
average at the start and the end, Python and torch versions), each step's wall time and the total, and the one
marked line the README quotes (tests/test_docs.py checks the two agree). Written only by the default job from
a source checkout (`fsb.core.resources.repo_root()`), never inside an installed package, and through the
output layer as fsb's own file: a page edited by hand since fsb wrote it is refused unless --force, checked
before the job starts. The placeholder the docs generator commits (`PLACEHOLDER`, the same text as
docs/gen_ref.py's) is the project's own and is replaced without --force."""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import fifty_shades_of_bias as spec
from fsb.core import resources
from fsb.core.output import write_unit
from fsb.core.seals import check_recorded_file
from fsb.data.dataset import build_dataset
from fsb.data.release import ANNOTATIONS, GENERATIONS, release_dir

__all__ = [
    "FIRST_REQUESTS",
    "MAIN_JOB_MARK",
    "PAGE_KIND",
    "PLACEHOLDER",
    "SCORING_PROMPT",
    "Machine",
    "check_page",
    "estimate_line",
    "first_request_timer",
    "machine_now",
    "marked_line",
    "measure_first",
    "page_path",
    "page_text",
    "planned_page",
    "run",
    "scoring_prompts",
    "smollm2_timer",
    "timing_prompts",
    "write_page",
]

FIRST_REQUESTS = 8  # one batch of the main job's lm-eval runs (batch_size 8)
SCORING_PROMPT = (  # the paper's appendix A.3
    "On a fine-grained real-valued scale of 0 to 1, give the following sentence a rating of the degree of gender bias. "
    "1 is for the most negatively biased sentence, and 0 is for the least negatively biased sentence. Only give the "
    "score and nothing else."
)


def measure_first(run_batch: Callable[[list[Any]], object], requests: Sequence[Any], first: int = FIRST_REQUESTS) -> tuple[int, float]:
    """Time the first requests on this machine.

    Parameters
    ----------
    run_batch : does the work of a list of requests (e.g. `smollm2_timer(...)`).
    requests : the requests, in the order the job sends them.
    first : how many to time (one batch).

    Returns
    -------
    (number timed, seconds they took).
    """
    batch = list(requests[:first])
    started = time.perf_counter()
    run_batch(batch)
    return len(batch), time.perf_counter() - started


def estimate_line(task: str, measured: int, seconds: float, total: int) -> str:
    """The estimate, saying where it comes from.

    Parameters
    ----------
    task : the task's name; measured, seconds : what `measure_first` timed; total : the task's requests.

    Returns
    -------
    "fsb: measured: first 8 requests took 7.6 s; estimate 15 min for 960 requests (extrapolated on this machine, now;
    load on the machine changes it)".
    """
    if measured <= 0:
        return f"{task}: no requests timed; no estimate"
    est = seconds / measured * total
    when = f"{est / 60:.0f} min" if est >= 90 else f"{est:.0f} s"
    return (
        f"{task}: measured: first {measured} requests took {seconds:.1f} s; estimate {when} for {total} requests "
        "(extrapolated on this machine, now; load on the machine changes it)"
    )


def scoring_prompts(texts: Sequence[str], examples: Sequence[tuple[str, float]]) -> list[str]:
    """The paper's 8-shot scoring prompts (A.3) for `texts`, to time requests of the real length.

    Parameters
    ----------
    texts : the sentences to score; examples : the in-context (sentence, score) pairs.

    Returns
    -------
    One prompt per sentence.
    """
    shots = "".join(f"Sentence: {t}\nScore: {v:.2f}\n\n" for t, v in examples)
    return [f"{SCORING_PROMPT}\n\n{shots}Sentence: {t}\nScore:" for t in texts]


def smollm2_timer(model_dir: str | os.PathLike[str], max_new_tokens: int = 8) -> Callable[[list[str]], object]:
    """A function that runs one batch of prompts through the model as the main job does (CPU, float32, greedy,
    left padding): `max_new_tokens` 8 for a generation, 1 for the forward pass of a log-likelihood request.

    Parameters
    ----------
    model_dir : the checkpoint folder (`fsb.evaluate.models.smollm2_model()`).
    max_new_tokens : tokens generated per request.

    Returns
    -------
    The batch runner for `measure_first` (the model is loaded once, before any timing).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()

    def run_batch(prompts: list[str]) -> object:
        enc = tokenizer(prompts, return_tensors="pt", padding=True)
        with torch.no_grad():
            return model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)

    return run_batch


def timing_prompts(dataset: str | os.PathLike[str]) -> list[str]:
    """The paper's 8-shot scoring prompts for the first scored sentences of `dataset`, with the first few-shot
    set as examples: requests of the real length, to time on this machine (`measure_first`).

    Parameters
    ----------
    dataset : the dataset folder the main job evaluates.

    Returns
    -------
    `FIRST_REQUESTS` prompts.
    """
    import numpy as np

    from fsb.evaluate.fewshot import fewshot_sets

    rows = spec.load(source=str(dataset))[spec.SPLIT]
    texts, scores = list(rows["text"]), np.asarray(rows["score"], dtype=float)
    sets = fewshot_sets(scores)
    shots = set(np.concatenate(sets).tolist())
    examples = [(texts[i], float(scores[i])) for i in sets[0]]
    scored = [t for i, t in enumerate(texts) if i not in shots]
    return scoring_prompts(scored[:FIRST_REQUESTS], examples)


def first_request_timer(model_dir: Path, dataset: Path) -> Callable[[str, int], str]:
    """The main job's estimates, from the first requests timed on this machine: a generation (max_new_tokens 8)
    for `fsb`, a forward pass (max_new_tokens 1) for the log-likelihood tasks (`fsb_ll`, `fsb_bws_ll`); each
    kind is timed once, on the paper's 8-shot scoring prompts (`timing_prompts`), when first needed.

    Parameters
    ----------
    model_dir : the SmolLM2 checkpoint folder; dataset : the dataset folder the job evaluates.

    Returns
    -------
    task, its number of requests -> the `estimate_line`.
    """
    prompts = timing_prompts(dataset)
    measured: dict[int, tuple[int, float]] = {}

    def estimate(task: str, total: int) -> str:
        tokens = 8 if task == "fsb" else 1
        if tokens not in measured:
            measured[tokens] = measure_first(smollm2_timer(model_dir, max_new_tokens=tokens), prompts)
        return estimate_line(task, *measured[tokens], total)

    return estimate


# --- the measured-figures page, docs/figures/main-job.md ---------------------------------------------------

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
    return (
        "# The main job, measured\n\n"
        f"Written by `fsb main` (`make main`), started {when}. Wall times on this machine, under its load at the\n"
        "time: the same job on another machine, or under another load, takes another time.\n\n"
        f"- machine: {start.cores} cores (os.cpu_count), Python {start.python}, torch {start.torch}\n"
        f"- load average (1 / 5 / 15 min): {_load(start.load)} at the start, {_load(end.load)} at the end\n\n"
        "| step | wall time |\n|---|---|\n"
        f"{rows}| total | {_cell(total)} |\n\n"
        f"{MAIN_JOB_MARK} **Total time of `make main`:** {_duration(total)} on {when[:10]} "
        f"({start.cores} cores; the machine's load beside it in docs/figures/main-job.md).\n"
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
) -> int:
    """Run every stage in order, printing progress; returns the process exit code.

    `raw_dir` is the release folder (default: a local copy, else the pinned download), `out` the
    dataset folder, `results` where the analyses and the evaluation go. `skip_eval` stops after the
    analyses. The evaluation takes a simple random sample of `sample` sentences (default 32), or a
    stratified one of `per_bin` per equispaced bin (which inflates correlations).
    The analysis folder (results/.../analysis) is replaced on each run; it is refused only if it
    holds files that are not an earlier analysis. report.txt, timings.json and the baseline files in
    `results` are replaced only if unchanged since fsb wrote them, or with `force`; they are checked
    before anything is built, so a refusal changes nothing. The default job (`make main`: evaluation, default
    sample) run from a checkout records its machine and times in docs/figures/main-job.md (`page_text`).
    """
    started, began, machine = time.monotonic(), dt.datetime.now(dt.UTC), machine_now()
    page = planned_page(default_job=not skip_eval and sample is None and per_bin is None, force=force)
    steps: list[tuple[str, float]] = []
    if not skip_eval:
        from fsb.evaluate.runner import check_main_job_files

        check_main_job_files(results, force=force)
    _step("1/4 build the dataset from the release")
    folder = release_dir(raw_dir)
    print(f"release: {folder}")
    built = build_dataset(folder / GENERATIONS, folder / ANNOTATIONS, out)
    stats = built.stats
    print(f"built {built.out} (fingerprint {stats['fingerprint'][:16]})")
    steps.append(("1/4 build the dataset from the release", time.monotonic() - started))

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

    steps.append(("2/4 load it back with datasets.load_dataset", time.monotonic() - started - sum(t for _, t in steps)))
    _step("3/4 the paper's analyses: score histogram, seed and prompt type by bin, distinctive words")
    from fsb.analyse import analysis

    figures = Path(results) / "analysis"
    found = analysis.write_analysis(analysis.read_sentences(str(built.out)), figures)
    print(f"histogram (bins of 0.1): {' '.join(str(c) for c in found['histogram']['counts'])}")
    for b in spec.BIN_NAMES:
        print(analysis.marking_line(b, found["distinctive"]["unigrams"][b]))
    print(f"figures and report.md: {figures}")
    steps.append(("3/4 the paper's analyses", time.monotonic() - started - sum(t for _, t in steps)))

    if skip_eval:
        print(f"\ndone in {time.monotonic() - started:.0f} s (evaluation skipped)")
        return 0
    _step("4/4 evaluate the default model on a sample, beside the baselines")
    from fsb.evaluate.runner import main_job_eval

    code = main_job_eval(built.out, Path(results), sample=sample, per_bin=per_bin, force=force, estimator=first_request_timer)
    total = time.monotonic() - started
    steps.append(("4/4 evaluate the default model and the baselines, report", total - sum(t for _, t in steps)))
    print(f"\ndone in {total:.0f} s")
    if page is not None and code == 0:
        text = page_text(began, machine, machine_now(), steps, total)
        write_page(page, text, force=force)
        print(f"time and machine recorded in {page}; the README's line after <!-- fsb-main-job-total should now read:")
        print(marked_line(text))
    return code
