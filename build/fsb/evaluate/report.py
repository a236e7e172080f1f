"""One page that places every scorer: lm-eval runs, prediction files and baselines in one sorted table
with intervals, beside the human reference figures and the paper's quoted Table 6; per-row breakdowns
(each group with its own simulated ceiling) and calibration; paired differences for the rows a user
names (by their number as given, or label); the annotators' own best-worst agreement. This module
computes the report (a JSON-able dict); reportmd and reportbws render it as Markdown, reportfig draws
its figures and reportout writes its folder. (Not the dataset analysis, which is `fsb analyze`.)"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec
from fsb.evaluate import agreement
from fsb.evaluate.reportfig import LEGEND, forest_items, forest_legend, forest_plot, is_sample, num, scatter_plot, scatter_title
from fsb.evaluate.reportmd import BREAKDOWN_RULES, BWS_MSE, COMPARED, INTERVALS, corr_cell, fmt, parse_cell, render_markdown, row_flags
from fsb.evaluate.reportout import (
    REPORT_KIND,
    REPORT_SEAL,
    check_out,
    is_report_folder,
    json_safe,
    report_folder_difference,
    to_json,
    write_outputs,
)
from fsb.evaluate.results import DatasetTable, Run, Scored, dataset_table, entries_from_run, load_entries

__all__ = [  # the report's parts live in reportmd (Markdown), reportbws, reportfig (figures) and reportout (files)
    "BREAKDOWN_RULES",
    "BWS_MSE",
    "COMPARED",
    "INTERVALS",
    "LEGEND",
    "REPORT_KIND",
    "REPORT_SEAL",
    "build",
    "build_from_entries",
    "check_out",
    "comparison_verdict",
    "corr_cell",
    "fmt",
    "forest_items",
    "forest_legend",
    "forest_plot",
    "group_reference",
    "is_report_folder",
    "is_sample",
    "json_safe",
    "num",
    "paired_comparison",
    "parse_cell",
    "render_markdown",
    "render_runs",
    "report_folder_difference",
    "row_flags",
    "scatter_plot",
    "scatter_title",
    "to_json",
    "with_baselines",
    "write_outputs",
]


def _find(dataset: str | None) -> tuple[DatasetTable | None, str]:
    try:
        return dataset_table(dataset), ""
    except spec.DatasetNotFound as e:
        return None, f"no dataset found ({e}); give --dataset"


def build(
    paths: list[str | Path],
    dataset: str | None = None,
    n_boot: int = 1000,
    compare: list[tuple[str, str]] | None = None,
    reference_trials: int = 100,
    timings: dict[str, float] | None = None,
    notes: dict[str, str] | None = None,
) -> tuple[dict[str, Any], list[Scored]]:
    """The whole comparison as a JSON-able dict (what every renderer reads), and the entries in its row order."""
    table, problem = _find(dataset)
    entries = load_entries(with_baselines(paths) if table is not None else paths, table)
    report = build_from_entries(entries, table, problem, n_boot, compare or [], reference_trials, timings or {}, notes or {})
    by_label = {e.label: e for e in entries}
    return report, [by_label[r["label"]] for r in report["rows"]]


def with_baselines(paths: list[str | Path]) -> list[str | Path]:
    """`paths` with, right after each folder that holds a `baselines` folder (the main job's results), the
    baseline prediction files in it that carry their provenance (`NAME.csv.json`, written by `fsb baseline`),
    so `fsb report results/main` shows the baselines report.txt shows.

    Parameters
    ----------
    paths : the inputs as given.

    Returns
    -------
    The inputs, each such folder followed by its baseline files (sorted by name); a file given already is not repeated.
    """
    given = {Path(p).resolve() for p in paths}
    out: list[str | Path] = []
    for p in paths:
        out.append(p)
        folder = Path(p) / "baselines"
        if Path(p).is_dir() and folder.is_dir():
            found = sorted(f for f in folder.iterdir() if f.suffix in (".csv", ".jsonl") and f.with_name(f.name + ".json").is_file())
            out += [f for f in found if f.resolve() not in given]
    return out


def _row(
    e: Scored, number: int, judgments: Any, n_boot: int, reference_trials: int, timings: dict[str, float], notes: dict[str, str]
) -> dict[str, Any]:
    """One scorer's row: its figures with intervals, breakdowns (each group with its human reference) and calibration."""
    s = agreement.summary(e.sets, n_boot=n_boot, has_parse_rate=e.has_parse_rate)
    row = {
        "given": number,
        "label": e.label,
        "kind": e.kind,
        "task": e.task,
        "source": e.source,
        "model": e.model,
        "model_name": e.model_name,
        "flags": e.flags,
        "correlation_meaningful": e.correlation_meaningful,
        **s,
        "calibration": agreement.calibration(e.sets),
        "breakdowns": {},
    }
    if e.bws is not None:  # a best-worst task: its agreement and position figures
        row["bws"] = agreement.bws_summary(e.bws, n_boot=n_boot)
    if e.task in timings:
        row["seconds"] = timings[e.task]
    if e.task in notes or e.note:
        row["note"] = notes.get(e.task) or e.note
    for key, order in (("seed_type", spec.SEED_TYPES), ("prompt_type", spec.PROMPT_TYPES), ("bin", spec.BIN_NAMES)):
        if key in e.fields:
            row["breakdowns"][key] = agreement.breakdown(
                e.sets, e.fields[key], order, n_boot=n_boot, correlation_meaningful=e.correlation_meaningful
            )
    if judgments is not None and e.matched:  # the human figures on exactly this row's (and group's) sentences
        row["human_reference"] = _pearson_reference(_reference(judgments, e.ids, reference_trials))
        for key, groups in row["breakdowns"].items():
            for g, b in groups.items():
                if b["sentences"] >= agreement.MIN_GROUP:
                    b["human_reference"] = group_reference(judgments, e.ids, e.fields[key] == g, key, g, reference_trials)
                else:  # the same keys, null: no ceiling is printed for a group this small
                    why = f"not meaningful: n = {b['sentences']} < {agreement.MIN_GROUP}"
                    b["human_reference"] = {"sentences": b["sentences"], "noise_ceiling": math.nan, "note": why}
    if e.bws is not None:
        _omit_mse(row)
    return row


def build_from_entries(
    entries: list[Scored],
    table: DatasetTable | None,
    problem: str,
    n_boot: int,
    compare: list[tuple[str, str]],
    reference_trials: int,
    timings: dict[str, float],
    notes: dict[str, str],
) -> dict[str, Any]:
    from fsb.data.reference import Judgments

    judgments = Judgments(table.where) if table is not None and any(e.matched for e in entries) else None
    given = list(entries)  # --compare numbers rows in the order the user gave them, never the sorted order
    pairs = [(_pick(given, a), _pick(given, b)) for a, b in compare]
    for ea, eb in pairs:  # refused before any figure is computed
        _check_shared(ea, eb)
    rows = [_row(e, number, judgments, n_boot, reference_trials, timings, notes) for number, e in enumerate(entries, 1)]
    order = sorted(range(len(rows)), key=lambda i: _sort_key(rows[i]))
    rows = [rows[i] for i in order]
    entries = [entries[i] for i in order]
    references = []
    if table is not None:
        for ids in _distinct([e for e in entries if e.matched]) if judgments is not None else []:
            references.append(_reference(judgments, ids, reference_trials))
        other = [e.label for e in entries if not e.matched]
        if other:
            problem = f"the gold scores of {', '.join(other)} are not those of {table.where} (give --dataset): no human reference for them"
    comparisons = [paired_comparison(ea, eb, n_boot=n_boot) for ea, eb in pairs]
    return {
        "dataset": None
        if table is None
        else {"where": table.where, "fingerprint": table.fingerprint, "scored": int(table.scored.sum()), "is_release": table.is_release},
        "dataset_note": problem,
        "rows": rows,
        "human_reference": references,
        "paper_table6": [{"label": n, "pearson": r, "mse": m, "quoted": True} for n, r, m in spec.PAPER["table6"]],
        "comparisons": comparisons,
        "annotator_agreement": judgments.agreement(n_boot=n_boot) if judgments is not None else None,
        "intervals": INTERVALS,
        "bootstrap_draws": n_boot,
    }


def _correlation_withheld(e: Scored, side: str, metric: str, common: np.ndarray) -> str | None:
    """Why a paired correlation difference involving row `e` would mean nothing, or None: a scorer
    constant by design (the mean baseline's correlation is an artefact of its folds), or a correlation
    undefined on the shared sentences (constant predictions or human scores)."""
    if not e.correlation_meaningful:
        return f"{side}'s correlation is not meaningful (constant by design)"
    sub = [s.subset(np.isin(s.ids, common)) for s in e.sets]
    if any(math.isnan(v) for v in agreement.metric_values(sub)[metric]):
        return f"{side}'s {metric} is undefined ({agreement.why_undefined(sub) or 'no spread'})"
    return None


def comparison_verdict(metric: str, ci: dict[str, Any], conditional_on: str = "") -> str:
    """What a paired interval of metric(a) - metric(b) says.

    Parameters
    ----------
    metric : the metric compared (higher pearson and spearman, lower mse are better).
    ci : its 95% interval {low, high}.
    conditional_on : what the interval held fixed (e.g. "these 5 few-shot sets"), named in the verdict.

    Returns
    -------
    Which row is better when the interval excludes 0, else "no clear difference"; "for <conditional_on>"
    appended when something was not resampled.
    """
    low, high = num(ci["low"]), num(ci["high"])
    if math.isnan(low):
        return "no interval"
    lower_better = metric == "mse"
    if low > 0:
        verdict = "b better (lower mse)" if lower_better else f"a better (higher {metric})"
    elif high < 0:
        verdict = "a better (lower mse)" if lower_better else f"b better (higher {metric})"
    else:
        verdict = "no clear difference (interval includes 0)"
    return f"{verdict}, for {conditional_on}" if conditional_on else verdict


def _check_shared(ea: Scored, eb: Scored) -> np.ndarray:
    """The sentences two rows share; one line (FsbError, exit 2) when fewer than 3 (no paired comparison)."""
    from fsb.core.errors import FsbError

    common = np.intersect1d(ea.ids, eb.ids)
    if common.size < 3:
        raise FsbError(
            f"--compare: {ea.label} and {eb.label} share {common.size} scored sentence{'s' if common.size != 1 else ''}; "
            "a paired comparison needs the same sentences (run both on the same sample or on all of them)"
        )
    return common


def paired_comparison(ea: Scored, eb: Scored, n_boot: int = 1000) -> dict[str, Any]:
    """Row a minus row b on pearson, spearman and mse (paired bootstrap on the shared sentences), each with
    its own verdict; a correlation difference is withheld (with the reason) when either side's correlation
    is not meaningful or undefined, since a difference against it would read as a real gain."""
    common = _check_shared(ea, eb)
    out: dict[str, Any] = {"a": ea.label, "b": eb.label}
    for m in COMPARED:
        why = None
        if m != "mse":
            why = _correlation_withheld(ea, "a", m, common) or _correlation_withheld(eb, "b", m, common)
        if why:
            nan = {"low": math.nan, "high": math.nan, "defined": 0.0}
            out[m] = {"metric": m, "sentences": int(common.size), "difference": math.nan, "ci95": nan, "withheld": why}
            out[m]["reads"] = f"withheld: {why}"
        else:
            out[m] = agreement.paired_difference(ea.sets, eb.sets, m, n_boot=n_boot)
            out[m]["reads"] = comparison_verdict(m, out[m]["ci95"], out[m]["conditional_on"])
    return out


def _omit_mse(row: dict[str, Any]) -> None:
    """A best-worst row has no mse (see BWS_MSE): every mse figure of the row is removed (NaN, null in JSON)."""
    nan = {"low": math.nan, "high": math.nan, "defined": 0.0}
    row["values"]["mse"], row["ci95"]["mse"], row["mse_note"] = math.nan, dict(nan), BWS_MSE
    for per in row["per_set"].values():
        per["mse"] = math.nan
    if "ci95_sentences_only" in row:
        row["ci95_sentences_only"]["mse"] = dict(nan)
    for groups in row["breakdowns"].values():
        for b in groups.values():
            b["mse"], b["ci95"]["mse"] = math.nan, dict(nan)


def _reference(judgments: Any, ids: np.ndarray, trials: int) -> dict[str, Any]:
    """The human reference on `ids`, or, below agreement.MIN_GROUP sentences (the breakdowns' rule), only
    why there is none: a split-half r over a handful of sentences is noise (0.77 ± 0.23 on 3)."""
    n = int(np.unique(ids).size)
    if n < agreement.MIN_GROUP:
        return {"sentences": n, "note": f"not meaningful: n = {n} < {agreement.MIN_GROUP}"}
    return judgments.reference(ids, trials=trials)


def group_reference(judgments: Any, ids: np.ndarray, member: np.ndarray, key: str, group: str, trials: int) -> dict[str, Any]:
    """A breakdown group's human reference: its split-half r (on the group's sentences) and its ceiling,
    the parametric-bootstrap one (`Judgments.group_ceiling`): a group cut on the human score (an analysis
    bin) is re-cut on each simulated study, where the split-half formula sqrt(2r/(1+r)) fails (kept in
    `noise_ceiling_split_half_formula` for comparison).

    Parameters
    ----------
    judgments : fsb.data.reference.Judgments of the dataset scored.
    ids : the row's sentences; member : boolean mask over `ids` for the group.
    key, group : the breakdown ("seed_type", "prompt_type", "bin") and the group's name.
    trials : split-half trials.

    Returns
    -------
    dict: sentences, split_half, split_half_sd, full_panel_reliability, noise_ceiling, noise_ceiling_sd,
    noise_ceiling_split_half_formula, ceiling_method.
    """
    out = _pearson_reference(judgments.reference(ids[member], trials=trials))
    if key == "bin":
        bounds = (0.0, *spec.ANALYSIS_BIN_EDGES, 1.0)
        i = spec.BIN_NAMES.index(group)
        sim = judgments.group_ceiling(ids, cut=(bounds[i], bounds[i + 1]))
    else:
        sim = judgments.group_ceiling(ids, group=member)
    out["noise_ceiling_split_half_formula"] = out["noise_ceiling"]
    out["noise_ceiling"], out["ceiling_method"] = sim["noise_ceiling"], sim["method"]
    out["noise_ceiling_mean"], out["noise_ceiling_sd"] = sim["noise_ceiling_mean"], sim["noise_ceiling_sd"]
    if math.isnan(sim["noise_ceiling"]):
        out["note"] = "no ceiling: in most simulated studies fewer than 3 sentences fall in this group"
    return out


def _pearson_reference(h: dict[str, Any]) -> dict[str, Any]:
    """The Pearson side of a human reference, as a row or a breakdown group carries it."""
    if "note" in h:
        return dict(h)
    p = h["pearson"]
    return {"sentences": h["sentences"], **{k: p[k] for k in ("split_half", "split_half_sd", "full_panel_reliability", "noise_ceiling")}}


def _sort_key(row: dict[str, Any]) -> tuple[int, float]:
    if not row["correlation_meaningful"]:
        return (2, 0.0)
    r = row["values"]["pearson"]
    if math.isnan(r):
        r = row["defined_sets"]["pearson"]["mean"]
        return (1, -r if not math.isnan(r) else math.inf)
    return (0, -r)


def _distinct(entries: list[Scored]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for e in entries:
        if not any(np.array_equal(e.ids, o) for o in out):
            out.append(e.ids)
    return out


def _pick(entries: list[Scored], name: str) -> Scored:
    """A row by its 1-based number in the order given (the inputs as on the command line, each run's tasks in
    the order read; the table's # column) or its exact label."""
    if name.isdigit() and 1 <= int(name) <= len(entries):
        return entries[int(name) - 1]
    found = [e for e in entries if e.label == name]
    if not found:
        from fsb.core.errors import FsbError

        labels = ", ".join(e.label for e in entries)
        raise FsbError(
            f"--compare: no row {name!r}; give a row number as given (1..{len(entries)}, the table's # column) or one of: {labels}"
        )
    return found[0]


def render_runs(
    runs: list[Run],
    dataset: str | None = None,
    timings: dict[str, float] | None = None,
    model_note: str | None = None,
    n_boot: int = 1000,
    predictions: list[Any] | None = None,
) -> str:
    """The Markdown page of `fsb report` for lm-eval runs (plus any prediction files, e.g. baselines):
    `timings` (seconds per task) and `model_note` are shown beside the run's rows."""
    try:
        table, problem = dataset_table(dataset), ""
    except spec.DatasetNotFound as e:
        table, problem = None, str(e)
    entries = [e for run in runs for e in entries_from_run(run, table)]
    if predictions:
        entries += load_entries(list(predictions), table)
    notes = {e.task: model_note for e in entries if e.task and model_note}
    report = build_from_entries(entries, table, problem, n_boot, [], 100, timings or {}, notes)
    return render_markdown(report)
