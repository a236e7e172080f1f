"""One page that places every scorer: lm-eval runs, prediction files and baselines in one sorted table
with intervals, beside the human reference figures and the paper's quoted Table 6; per-row breakdowns
and calibration; paired differences for the rows a user names; Markdown, JSON, a forest plot and
scatter plots. (Not the dataset analysis, which is `fsb analyze`.)"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec
from fsb.evaluate import agreement
from fsb.evaluate.results import DatasetTable, Run, Scored, dataset_table, entries_from_run, load_entries

__all__ = ["build", "render_markdown", "render_runs", "write_outputs"]

INTERVALS = (
    "Intervals: 95% percentile bootstrap, 1000 draws unless stated. A single task or prediction file: "
    "sentences resampled with replacement. A group of few-shot sets: two-level bootstrap, each draw "
    "resamples the 5 sets with replacement and the sentences with replacement and averages the picked "
    "sets' metric on the picked sentences, so the interval reflects the choice of in-context examples as "
    "well as the sentences (the sentence-only interval is in the JSON). * marks an interval over the "
    "draws on which a correlation was defined (not all). A paired difference resamples the shared "
    "sentences once for both rows."
)


BREAKDOWN_RULES = (
    "Breakdowns by seed type, prompt type and analysis bin: a group gets a correlation only with at least {n} sentences "
    '(else "not meaningful: n = k < {n}"; its mse still stands); a scorer constant by design (the mean baseline) has no '
    "meaningful correlation in any group; a correlation over constant predictions or constant human scores is "
    '"undefined" and names the set. Each group carries its own human reference (Pearson split-half r and noise ceiling, '
    "computed from the judgments on that group's sentences): a group with a narrow range of human scores (one analysis "
    "bin) has a low ceiling, so read a group's correlation against its own ceiling, not the headline's."
)


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
    entries = load_entries(paths, table)
    report = build_from_entries(entries, table, problem, n_boot, compare or [], reference_trials, timings or {}, notes or {})
    by_label = {e.label: e for e in entries}
    return report, [by_label[r["label"]] for r in report["rows"]]


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
    rows = []
    for e in entries:
        s = agreement.summary(e.sets, n_boot=n_boot, has_parse_rate=e.has_parse_rate)
        row = {
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
        if e.bws is not None:
            _omit_mse(row)
        rows.append(row)
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
    comparisons = [paired_comparison(_pick(entries, a), _pick(entries, b), n_boot=n_boot) for a, b in compare]
    return {
        "dataset": None
        if table is None
        else {"where": table.where, "fingerprint": table.fingerprint, "scored": int(table.scored.sum()), "is_release": table.is_release},
        "dataset_note": problem,
        "rows": rows,
        "human_reference": references,
        "paper_table6": [{"label": n, "pearson": r, "mse": m, "quoted": True} for n, r, m in spec.PAPER["table6"]],
        "comparisons": comparisons,
        "intervals": INTERVALS,
        "bootstrap_draws": n_boot,
    }


COMPARED = ("pearson", "spearman", "mse")


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


def comparison_verdict(metric: str, ci: dict[str, Any]) -> str:
    """What a paired interval of metric(a) - metric(b) says: which row is better on that metric (higher r,
    lower mse) when the 95% interval excludes 0, else no clear difference."""
    low, high = _num(ci["low"]), _num(ci["high"])
    if math.isnan(low):
        return "no interval"
    lower_better = metric == "mse"
    if low > 0:
        return "b better (lower mse)" if lower_better else f"a better (higher {metric})"
    if high < 0:
        return "a better (lower mse)" if lower_better else f"b better (higher {metric})"
    return "no clear difference (interval includes 0)"


def paired_comparison(ea: Scored, eb: Scored, n_boot: int = 1000) -> dict[str, Any]:
    """Row a minus row b on pearson, spearman and mse (paired bootstrap on the shared sentences), each with
    its own verdict; a correlation difference is withheld (with the reason) when either side's correlation
    is not meaningful or undefined, since a difference against it would read as a real gain."""
    common = np.intersect1d(ea.ids, eb.ids)
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
            out[m]["reads"] = comparison_verdict(m, out[m]["ci95"])
    return out


BWS_MSE = (
    "not given (best-worst): the counting scores share the human scores' [0, 1] scale, but they count the model's "
    "choices within tuples, not ratings, so their squared difference from the human scores is no rating error"
)


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
    """A row by its 1-based number in the sorted table or its exact label."""
    if name.isdigit() and 1 <= int(name) <= len(entries):
        return entries[int(name) - 1]
    found = [e for e in entries if e.label == name]
    if not found:
        from fsb.core.errors import FsbError

        labels = ", ".join(e.label for e in entries)
        raise FsbError(f"--compare: no row {name!r}; give a row number (1..{len(entries)}) or one of: {labels}")
    return found[0]


# --- Markdown ---------------------------------------------------------------------------------------


def _fmt(value: float, ci: dict[str, Any] | None = None) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if ci is None or math.isnan(ci["low"]):
        return f"{value:.3f}"
    mark = "" if ci["defined"] == 1.0 else "*"
    return f"{value:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]{mark}"


def _corr_cell(row: dict[str, Any], m: str) -> str:
    v = row["values"][m]
    if not row.get("correlation_meaningful", True):
        return f"not meaningful ({v:.3f}: constant by design, see the note; read mse)"
    if math.isnan(v):
        why = f"undefined: {row.get('undefined') or 'no spread'}"
        if row["variants"] == 1:
            return why
        d = row["defined_sets"][m]
        mean = "none defined" if math.isnan(d["mean"]) else _fmt(d["mean"], d.get("ci95"))
        return f"{why}; mean over the {d['sets']} defined sets of {d['of']} (not the protocol's figure): {mean}"
    return _fmt(v, row["ci95"][m])


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (also what `fsb report` prints)."""
    out = ["# Fifty Shades of Bias: agreement of scorers with the human scores", ""]
    ds = report["dataset"]
    if ds:
        out.append(f"dataset: {ds['where']} (fingerprint {str(ds['fingerprint'])[:16]}; {ds['scored']} sentences scored by the protocol)")
    else:
        out.append(f"dataset: not available ({report['dataset_note']})")
    sources = list(dict.fromkeys(r["source"] for r in report["rows"]))
    out += ["", "runs and files:"] + [f"- {s}" for s in sources] + [""]
    out += [
        "| # | scorer | kind | sentences | sets | pearson [95% CI] | spearman [95% CI] | mse [95% CI] | parse rate | flags |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(report["rows"], 1):
        parse = "none" if math.isnan(r["values"]["parse_rate"]) else _fmt(r["values"]["parse_rate"], r["ci95"]["parse_rate"])
        flags = "; ".join(r["flags"]) or ""
        if "seconds" in r:
            flags = "; ".join(x for x in (flags, f"{r['seconds']:.0f} s") if x)
        cells = [str(i), r["label"], r["kind"], str(r["sentences"]), str(r["variants"])]
        mse = "not given (best-worst)" if "mse_note" in r else _fmt(r["values"]["mse"], r["ci95"]["mse"])
        cells += [_corr_cell(r, "pearson"), _corr_cell(r, "spearman"), mse, parse, flags]
        out.append("| " + " | ".join(cells) + " |")
    for r in report["rows"]:
        if "note" in r:
            out.append(f"\n{r['label']}: {r['note']}")
    out += _render_bws(report["rows"])
    out += ["", INTERVALS.replace("1000", str(report["bootstrap_draws"])), ""]
    out.append(
        "Correlations and mse are over the answers that parse (a bare number in [0, 1] on the first line); parse rate is the "
        "share that did (none: a prediction file or log-likelihood task, which has nothing to parse). A row flagged `sample` "
        "(fsb main's sample, --limit, --sample, --per-bin) is NOT comparable with figures on all the scored sentences (the "
        "full-protocol rows, the baselines, the paper's rows): its intervals are wide, its human reference is that of its own "
        "few sentences, and a stratified sample of equal counts per score bin spreads the human scores and inflates correlations."
    )
    out += ["", "## Reference points (not scorers in this table)", ""]
    if not report["human_reference"] or report["dataset_note"]:
        out += [f"human reference figures: not shown for every row: {report['dataset_note'] or 'no dataset'}", ""]
    for h in report["human_reference"]:
        if "note" in h:
            out += [f"Human reference on the {h['sentences']} scored sentences: {h['note']} (too few sentences for a split-half r).", ""]
            continue
        p, s = h["pearson"], h["spearman"]
        # Table 2 is the split-half r of the release's judgments over its sentences: comparable only there
        comparable = bool(ds and ds.get("is_release") and h["sentences"] == ds["scored"])
        if comparable:
            place = " (the release's judgments on its scored sentences: comparable with the paper's Table 2, over all 1000):"
        elif ds and h["sentences"] < ds["scored"]:
            place = " (a sample: these figures place the sample's rows only and are not comparable with the paper's Table 2):"
        else:
            place = " (not the release's judgments: not comparable with the paper's Table 2):"
        out += [
            f"Human reference on the {h['sentences']} scored sentences ({h['trials']} split-half trials, seed {h['seed']}){place}",
            "",
            "| figure | Pearson | Spearman | what it is |",
            "|---|---|---|---|",
            f"| split-half r | {p['split_half']:.3f} ± {p['split_half_sd']:.3f} | {s['split_half']:.3f} ± {s['split_half_sd']:.3f} | "
            "two half-size panels, uncorrected" + (" (comparable with the paper's Table 2)" if comparable else "") + " |",
            f"| full-panel reliability | {p['full_panel_reliability']:.3f} | {s['full_panel_reliability']:.3f} | "
            "Spearman-Brown 2r/(1+r): the released scores' reliability |",
            f"| noise ceiling | {p['noise_ceiling']:.3f} | {s['noise_ceiling']:.3f} | "
            "sqrt(reliability): what a perfect scorer would reach against these noisy scores |",
            "",
            f"References: {h['references']}. (Spearman-Brown applied to a rank correlation is an approximation.)",
            "",
        ]
    out.append("The paper's Table 6 (QUOTED, not measured here: Hada et al. 2023, all 1000 sentences, earlier judgments, no intervals):")
    out += ["", "| scorer (quoted) | pearson | mse |", "|---|---|---|"]
    out += [f"| {q['label']} | {q['pearson']:.3f} | {q['mse']:.3f} |" for q in report["paper_table6"]]
    if report["comparisons"]:
        out += ["", "## Paired differences (row a minus row b, same sentences)", ""]
        out += [
            "Each metric is read on its own (higher pearson and spearman, lower mse are better); a correlation difference "
            "is withheld when either row's correlation is not meaningful or undefined.",
            "",
            "| a | b | sentences | pearson difference [95% CI] | spearman difference [95% CI] | mse difference [95% CI] |",
            "|---|---|---|---|---|---|",
        ]
        for c in report["comparisons"]:
            cells = [c["a"], c["b"], str(c["mse"]["sentences"])]
            for m in COMPARED:
                d = c[m]
                cells.append(d["reads"] if d.get("withheld") else f"{_fmt(d['difference'], d['ci95'])}: {d['reads']}")
            out.append("| " + " | ".join(cells) + " |")
    out += ["", "## Per row: sets, breakdowns, calibration", "", BREAKDOWN_RULES.replace("{n}", str(agreement.MIN_GROUP)), ""]
    for i, r in enumerate(report["rows"], 1):
        out.append(f"### {i}. {r['label']} ({r['kind']}; {r['source']})")
        if r["model"]:
            out.append(f"model: {r['model']}")
        out.append(f"distinct answers: {r['distinct_answers']} (fewest over sets)")
        if r["per_set"]:
            out.append(
                "per set pearson: "
                + ", ".join(f"{k.rsplit('_', 1)[-1]} {_fmt(v['pearson']).replace('n/a', 'undefined')}" for k, v in r["per_set"].items())
                + "; mse: "
                + ", ".join(f"{k.rsplit('_', 1)[-1]} {_fmt(v['mse'])}" for k, v in r["per_set"].items())
            )
        c = r["calibration"]
        if not r["correlation_meaningful"]:
            out.append("calibration: not meaningful (constant by design)")
        else:
            out.append(
                f"calibration (human = intercept + slope x model, least squares): slope {_fmt(c['slope'])}, "
                f"intercept {_fmt(c['intercept'])} (calibrated: 1 and 0)"
            )
        if "human_reference" in r and "note" in r["human_reference"]:
            h = r["human_reference"]
            out.append(f"human reference on this row's {h['sentences']} sentences: {h['note']}")
        elif "human_reference" in r:
            h = r["human_reference"]
            out.append(
                f"human reference on this row's {h['sentences']} sentences (Pearson): split-half r {h['split_half']:.3f}, "
                f"full-panel reliability {h['full_panel_reliability']:.3f}, noise ceiling {h['noise_ceiling']:.3f}"
            )
        if r["breakdowns"]:
            out += [
                "",
                "| breakdown | group | sentences | human mean | model mean | pearson [95% CI] | human split-half r | noise ceiling "
                "| mse [95% CI] |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for key, groups in r["breakdowns"].items():
                for g, b in groups.items():
                    pearson = b["pearson_note"] if b.get("pearson_note") else _fmt(b["pearson"], b["ci95"]["pearson"])
                    h = b.get("human_reference")
                    human = (f"{h['split_half']:.3f}", f"{h['noise_ceiling']:.3f}") if h else ("n/a", "n/a")
                    out.append(
                        f"| {key} | {g} | {b['sentences']} | {b['human_mean']:.3f} | {_fmt(b['model_mean'])} | "
                        f"{pearson} | {human[0]} | {human[1]} | {_fmt(b['mse'], b['ci95']['mse'])} |"
                    )
        out.append("")
    return "\n".join(out)


def _render_bws(rows: list[dict[str, Any]]) -> list[str]:
    """The best-worst rows' own figures, and each model's rating and best-worst rows side by side."""
    bws = [(i, r) for i, r in enumerate(rows, 1) if "bws" in r]
    if not bws:
        return []
    out = ["", "## Best-worst protocol (fsb_bws*): the annotators' test", ""]
    out += [
        "The model chose the most and the least biased of each judged 4-tuple, shown in the listed rotations; its choices "
        "are scored by counting as the human judgments are (pearson and spearman above: its counting scores against the "
        "human scores, intervals over sentences; no mse: "
        + BWS_MSE
        + "). Agreement: share of parsed presentations whose choice is in the human "
        "majority (tied items all count), beside the chance rate of a random choice. Position rates: how often each display "
        "position was chosen, beside the uniform 0.25. Intervals here: 95% percentile bootstrap over tuples.",
        "",
        "| # | scorer | tuples | presentations | parse rate | best agreement [95% CI] | chance | worst agreement [95% CI] | chance |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in bws:
        b = r["bws"]
        v, ci = b["values"], b["ci95"]
        cells = [str(i), r["label"], str(b["tuples"]), f"{b['presentations']} (rotations {','.join(map(str, b['rotations']))})"]
        cells += [_fmt(v["parse_rate"], ci.get("parse_rate")), _fmt(v["best_agreement"], ci.get("best_agreement"))]
        cells += [_fmt(b["chance"]["best"]), _fmt(v["worst_agreement"], ci.get("worst_agreement")), _fmt(b["chance"]["worst"])]
        out.append("| " + " | ".join(cells) + " |")
    out += [
        "",
        "| # | scorer | chosen | position 1 | position 2 | position 3 | position 4 | uniform |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in bws:
        b = r["bws"]
        for side in ("best", "worst"):
            rates = [_fmt(b["values"][f"{side}_position_{p}"], b["ci95"].get(f"{side}_position_{p}")) for p in range(1, 5)]
            out.append(f"| {i} | {r['label']} | as {side} | " + " | ".join(rates) + f" | {b['uniform_position_rate']:.2f} |")
    by_model: dict[str, list[tuple[int, dict[str, Any]]]] = {}  # keyed by the model as run (labelled by its name)
    for i, r in enumerate(rows, 1):
        by_model.setdefault(r["model"] or r["label"], []).append((i, r))
    pairs = {m: rs for m, rs in by_model.items() if any("bws" in r for _, r in rs) and any("bws" not in r for _, r in rs)}
    if pairs:
        out += ["", "### Rating vs best-worst, per model", ""]
        out += ["| model | # | protocol | task | sentences | pearson [95% CI] | spearman [95% CI] |", "|---|---|---|---|---|---|---|"]
        for rs in pairs.values():
            for i, r in rs:
                protocol = "best-worst (choices, counted)" if "bws" in r else "rating (a number per sentence)"
                cells = [
                    r.get("model_name") or r["label"],
                    str(i),
                    protocol,
                    str(r["task"]),
                    str(r["sentences"]),
                    _corr_cell(r, "pearson"),
                    _corr_cell(r, "spearman"),
                ]
                out.append("| " + " | ".join(cells) + " |")
        out += ["", "The two protocols score different samples of sentences here; compare their intervals, not the point values alone."]
    return out


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) else obj
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return _json_safe(obj.item())
    return obj


def to_json(report: dict[str, Any]) -> str:
    """The report as JSON (NaN written as null)."""
    return json.dumps(_json_safe(report), indent=2, sort_keys=True)


# --- figures ----------------------------------------------------------------------------------------


def _num(x: float | None) -> float:
    """A figure from the report or its JSON (where NaN is null)."""
    return math.nan if x is None else float(x)


def _is_sample(row: dict[str, Any]) -> bool:
    return any(f.startswith(("sample", "--limit")) for f in row["flags"])


def forest_items(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The forest plot's rows, best first: label, point, interval, kind and the row's own human figures
    (none for the paper's quoted rows). An undefined group is placed at the mean over its defined sets
    and says so; rows whose correlation is not meaningful (the mean baseline) are left out."""
    items = []
    for r in report["rows"]:
        if not r["correlation_meaningful"]:
            continue
        label, value, ci = r["label"], _num(r["values"]["pearson"]), r["ci95"]["pearson"]
        if _is_sample(r):
            label += f" (sample of {r['sentences']}: not comparable)"
        if math.isnan(value):
            d = r["defined_sets"]["pearson"]
            value, ci = _num(d["mean"]), d.get("ci95")
            label += f"\n[undefined: {r.get('undefined')}; mean of {d['sets']}/{d['of']} defined sets]"
        human = r.get("human_reference")
        items.append({"label": label, "r": value, "ci": ci, "kind": r["kind"], "human": human if human and "note" not in human else None})
    items += [
        {"label": f"{q['label']} (paper, quoted)", "r": q["pearson"], "ci": None, "kind": "quoted", "human": None}
        for q in report["paper_table6"]
    ]
    items.sort(key=lambda t: -t["r"] if not math.isnan(t["r"]) else math.inf)
    return items


LEGEND = {
    "lm-eval": "lm-eval run",
    "predictions": "prediction file",
    "baseline": "baseline",
    "quoted": "paper Table 6 (quoted; no interval)",
    "ceiling": "noise ceiling on the row's sentences",
    "split_half": "human split-half r (two half panels)",
}


def forest_legend(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The forest plot's legend entries (key, text): only the kinds of row drawn, and the human ticks only
    when some row carries them."""
    kinds = {t["kind"] for t in items}
    keys = [k for k in ("lm-eval", "predictions", "baseline", "quoted") if k in kinds]
    if any(t["human"] for t in items):
        keys += ["ceiling", "split_half"]
    return [(k, LEGEND[k]) for k in keys]


def forest_plot(report: dict[str, Any], path: Path) -> None:
    """Pearson r with its 95% interval per row, the paper's quoted rows (hollow, no interval), and on each
    measured row its own noise ceiling and split-half r (computed on that row's sentences)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = forest_items(report)
    colors = {"lm-eval": "tab:blue", "predictions": "tab:purple", "baseline": "tab:green", "quoted": "0.45"}
    lines = sum(1 + t["label"].count("\n") for t in items)
    height = 0.3 * lines + 2.0
    fig, ax = plt.subplots(figsize=(9.5, height))
    lows = [t["ci"]["low"] for t in items if t["ci"] is not None and not math.isnan(_num(t["ci"]["low"]))]
    lows += [t["r"] for t in items if not math.isnan(t["r"])]
    left = max(-1.05, min([-0.1, *lows]) - 0.05)  # every interval fits: nothing is clipped
    for y, t in enumerate(items):
        c = colors[t["kind"]]
        if t["ci"] is not None and not math.isnan(_num(t["ci"]["low"])):
            ax.plot([t["ci"]["low"], t["ci"]["high"]], [y, y], color=c, lw=2, solid_capstyle="butt")
        if not math.isnan(t["r"]):
            ax.plot([t["r"]], [y], "o", mfc="white" if t["kind"] == "quoted" else c, mec=c, ms=7)
        if t["human"]:
            ax.plot([t["human"]["noise_ceiling"]], [y], marker="|", color="black", ms=14, mew=2)
            ax.plot([t["human"]["split_half"]], [y], marker="|", color="0.55", ms=11, mew=1.5)
    ax.set_yticks(range(len(items)), [t["label"] for t in items], fontsize=8)
    ax.set_ylim(len(items) - 0.5, -0.5)
    ax.axvline(0, color="0.8", lw=0.8, zorder=0)
    ax.set_xlim(left, 1.02)
    ax.grid(axis="x", color="0.92", lw=0.6)
    ax.set_xlabel("Pearson r with the human scores (point and 95% interval)")
    handles, labels = [], []
    for key, label in forest_legend(items):
        if key in colors:
            c = colors[key]
            handles.append(plt.Line2D([], [], color=c, marker="o", lw=2, mfc="white" if key == "quoted" else c))
        else:
            color, ms, mew = ("black", 12, 2) if key == "ceiling" else ("0.55", 10, 1.5)
            handles.append(plt.Line2D([], [], color=color, marker="|", ls="", ms=ms, mew=mew))
        labels.append(label)
    fig.legend(handles, labels, fontsize=7.5, loc="lower center", ncol=3, frameon=False)
    ax.set_title("Fifty Shades of Bias: agreement with the human scores", fontsize=10)
    fig.tight_layout(rect=(0, 0.55 / height, 1, 1))  # the legend's two lines below the axis
    fig.savefig(path, dpi=120)
    plt.close(fig)


def scatter_title(row: dict[str, Any]) -> str:
    """A scatter plot's title: the row's label, then Pearson r with its interval and n (or why there is none)."""
    n = f"n = {row['sentences']}" + (f" x {row['variants']} sets" if row["variants"] > 1 else "")
    r = _num(row["values"]["pearson"])
    if not row["correlation_meaningful"]:
        stat = "r not meaningful (constant by design)"
    elif math.isnan(r):
        d = row["defined_sets"]["pearson"]
        mean = "" if math.isnan(_num(d["mean"])) else f"; mean of {d['sets']}/{d['of']} defined sets {d['mean']:.3f}"
        stat = f"r undefined ({row.get('undefined')}){mean}"
    else:
        ci = row["ci95"]["pearson"]
        interval = "" if math.isnan(_num(ci["low"])) else f" [{ci['low']:.3f}, {ci['high']:.3f}]"
        stat = f"r = {r:.3f}{interval}" + (" (mean over sets)" if row["variants"] > 1 else "")
    import textwrap

    flag = " (sample: not comparable)" if _is_sample(row) else ""
    return "\n".join(textwrap.wrap(f"{row['label']}{flag}", 60) + textwrap.wrap(f"{stat}, {n}", 60))


def scatter_plot(entry: Scored, path: Path, row: dict[str, Any] | None = None) -> None:
    """Model score against human score (every set's points), with the identity line; titled with the
    row's r, interval and n when `row` (its report row) is given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    for s in entry.sets:
        ax.scatter(s.preds[s.parsed], s.golds[s.parsed], s=6, alpha=0.4 if len(entry.sets) > 1 else 0.6)
    ax.plot([0, 1], [0, 1], color="black", lw=1, label="identity (calibrated)")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("model score")
    ax.set_ylabel("human score")
    ax.set_title(scatter_title(row) if row is not None else entry.label, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "row"


REPORT_KIND = "a report folder from `fsb report`"
REPORT_SEAL = "fsb report"


def report_folder_difference(out: Path) -> str | None:
    """None when `out` is an earlier report exactly as `fsb report` wrote it (its seal matches); else the
    first difference ("report.md was edited", "notes.txt was added")."""
    from fsb.core.files import seal_difference

    return seal_difference(out, REPORT_SEAL)


def is_report_folder(out: Path) -> bool:
    """True when `out` is an earlier report, unchanged (so replacing it loses nothing of a user's)."""
    return report_folder_difference(out) is None


def check_out(out: Path) -> None:
    """Refuse, before any work, an output folder that is not absent, empty or an unchanged earlier report."""
    from fsb.core.files import check_replaceable_dir

    check_replaceable_dir(out, changed=report_folder_difference, kind=REPORT_KIND)


def write_outputs(report: dict[str, Any], entries: list[Scored], out: Path) -> list[Path]:
    """report.md, report.json, forest.png and scatter-<n>-<label>.png into `out` (written whole, then renamed)."""
    from fsb.core.files import atomic_dir

    check_out(out)
    written = []
    with atomic_dir(out, changed=report_folder_difference, kind=REPORT_KIND, seal=REPORT_SEAL) as stage:
        (stage / "report.md").write_text(render_markdown(report) + "\n", encoding="utf-8")
        (stage / "report.json").write_text(to_json(report) + "\n", encoding="utf-8")
        forest_plot(report, stage / "forest.png")
        order = {r["label"]: i for i, r in enumerate(report["rows"], 1)}
        by_label = {r["label"]: r for r in report["rows"]}
        for e in entries:
            scatter_plot(e, stage / f"scatter-{order[e.label]}-{_slug(e.label)}.png", by_label[e.label])
        written = sorted(p.name for p in stage.iterdir())
    return [out / n for n in written]


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
