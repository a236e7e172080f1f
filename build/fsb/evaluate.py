"""Run the lm-eval tasks of harness/ through lm-eval's Python API.

A TaskManager that indexes only this project's task folder (`include_defaults=False`) skips the
~14.7k built-in tasks that the `lm_eval` CLI indexes on every run, so `fsb eval` starts in a second
or two instead of about ten. Results and per-sample logs are written exactly as `lm_eval
--output_path ... --log_samples` writes them, so `fsb report` reads either.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import resources
from ._io import atomic_write

__all__ = ["main_job_eval", "run_eval", "task_manager"]

# Backends that run torch in this process: only these need torch seeded (importing torch costs ~2 s).
_TORCH_BACKENDS = {"hf", "hf-auto", "huggingface", "hf-multimodal", "vllm", "sglang"}


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
    dataset: str | None = None,
    batch_size: int | str = 1,
    device: str | None = None,
    apply_chat_template: bool = False,
    fewshot_as_multiturn: bool = False,
    gen_kwargs: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Evaluate `model` (an lm-eval model name or an `lm_eval.api.model.LM` instance) on the tasks;
    return lm-eval's results dict (with "samples") and save it under `output_path` as the CLI would.
    `per_bin` takes a stratified sample (per equispaced score bin, identical across variants);
    `dataset` is a folder or Hub repo id (default: what loaders find)."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    if device is None and isinstance(model, str) and model in _TORCH_BACKENDS:
        import torch  # the backend loads it anyway

        device = "cuda" if torch.cuda.is_available() else "cpu"  # lm-eval's own default is cuda

    metadata: dict[str, Any] = {}
    if per_bin is not None:
        metadata["fsb_per_bin"] = int(per_bin)
    if dataset is not None:
        metadata["fsb_dataset"] = str(dataset)
    tracker = EvaluationTracker(output_path=str(output_path)) if output_path is not None else None
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
        task_manager=task_manager(metadata),
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


def main_job_eval(dataset: Path, results_dir: Path, per_bin: int | None = None) -> int:
    """The main job's evaluation: SmolLM2-135M-Instruct on `fsb` and `fsb_ll`, then the report."""
    import logging

    from .models import smollm2_model
    from .report import format_report, load_runs

    per_bin = 8 if per_bin is None else per_bin
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never wait on a hub
    # lm-eval warns per task that custom datasets take --metadata, and that this instruct model runs
    # without its chat template: both deliberate here. Its progress bars stay.
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    started = time.monotonic()
    model_dir = smollm2_model()
    print(f"model: SmolLM2-135M-Instruct, {model_dir} (ready in {time.monotonic() - started:.0f} s)", flush=True)
    timings: dict[str, float] = {}
    for task in ("fsb", "fsb_ll"):
        print(f"\n-- {task}: {per_bin} sentences per score bin x 5 few-shot sets", flush=True)
        t0 = time.monotonic()
        run_eval(
            "hf",
            f"pretrained={model_dir},dtype=float32",
            [task],
            output_path=results_dir / task,
            per_bin=per_bin,
            dataset=str(dataset),
            batch_size=8,
            device="cpu",
        )
        timings[task] = time.monotonic() - t0
        print(f"{task} took {timings[task]:.0f} s", flush=True)
    runs = load_runs([results_dir / task for task in ("fsb", "fsb_ll")])
    note = (
        f"SmolLM2-135M-Instruct (plain prompt, greedy) on a stratified sample of {4 * per_bin} sentences: a check that "
        "the whole pipeline runs on a real model, NOT a result (a 135M model cannot do this task)"
    )
    report = format_report(runs, dataset=str(dataset), timings=timings, model_note=note)
    print()
    print(report)
    atomic_write(results_dir / "report.txt", report + "\n")
    atomic_write(results_dir / "timings.json", json.dumps(timings, indent=2) + "\n")
    print(f"\nreport saved to {results_dir / 'report.txt'}")
    return 0
