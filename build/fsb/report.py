"""Compatibility names for the callers of the former `fsb.report` (`fsb eval`, the main job): reading
runs lives in `fsb.results`, the figures in `fsb.agreement`, the page in `fsb.compare`. New code
imports those modules; this one only keeps `format_report(runs, ...)` working."""

from __future__ import annotations

from typing import Any

from .agreement import bootstrap, summarize
from .results import Run, TaskSamples, harness_utils, load_run, load_runs

__all__ = ["Run", "TaskSamples", "bootstrap", "format_report", "harness_utils", "load_run", "load_runs", "summarize"]


def format_report(
    runs: list[Run],
    dataset: str | None = None,
    timings: dict[str, float] | None = None,
    model_note: str | None = None,
    n_boot: int = 1000,
    predictions: list[Any] | None = None,
) -> str:
    """The Markdown page of `fsb report` for lm-eval runs (plus any prediction files, e.g. baselines):
    `timings` (seconds per task) and `model_note` are shown beside the run's rows."""
    import fifty_shades_of_bias as spec

    from . import compare
    from .results import dataset_table, entries_from_run, load_entries

    try:
        table, problem = dataset_table(dataset), ""
    except spec.DatasetNotFound as e:
        table, problem = None, str(e)
    entries = [e for run in runs for e in entries_from_run(run, table)]
    if predictions:
        entries += load_entries(list(predictions), table)
    notes = {e.task: model_note for e in entries if e.task and model_note}
    report = compare.build_from_entries(entries, table, problem, n_boot, [], 100, timings or {}, notes)
    return compare.render_markdown(report)
