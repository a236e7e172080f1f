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

from . import agreement
from .results import DatasetTable, Scored, dataset_table, load_entries

__all__ = ["build", "render_markdown", "write_outputs"]

INTERVALS = (
    "Intervals: 95% percentile bootstrap, 1000 draws unless stated. A single task or prediction file: "
    "sentences resampled with replacement. A group of few-shot sets: two-level bootstrap, each draw "
    "resamples the 5 sets with replacement and the sentences with replacement and averages the picked "
    "sets' metric on the picked sentences, so the interval reflects the choice of in-context examples as "
    "well as the sentences (the sentence-only interval is in the JSON). * marks an interval over the "
    "draws on which a correlation was defined (not all). A paired difference resamples the shared "
    "sentences once for both rows."
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
    from .reference import human_reference

    rows = []
    for e in entries:
        s = agreement.summary(e.sets, n_boot=n_boot, has_parse_rate=e.has_parse_rate)
        row = {
            "label": e.label,
            "kind": e.kind,
            "task": e.task,
            "source": e.source,
            "model": e.model,
            "flags": e.flags,
            "correlation_meaningful": e.correlation_meaningful,
            **s,
            "calibration": agreement.calibration(e.sets),
            "breakdowns": {},
        }
        if e.task in timings:
            row["seconds"] = timings[e.task]
        if e.task in notes or e.note:
            row["note"] = notes.get(e.task) or e.note
        for key, order in (("seed_type", spec.SEED_TYPES), ("prompt_type", spec.PROMPT_TYPES), ("bin", spec.BIN_NAMES)):
            if key in e.fields:
                row["breakdowns"][key] = agreement.breakdown(e.sets, e.fields[key], order, n_boot=n_boot)
        rows.append(row)
    order = sorted(range(len(rows)), key=lambda i: _sort_key(rows[i]))
    rows = [rows[i] for i in order]
    entries = [entries[i] for i in order]
    references = []
    if table is not None:
        for ids in _distinct([e for e in entries if e.matched]):
            references.append(human_reference(table.where, ids, trials=reference_trials))
        other = [e.label for e in entries if not e.matched]
        if other:
            problem = f"the gold scores of {', '.join(other)} are not those of {table.where} (give --dataset): no human reference for them"
    comparisons = []
    for a, b in compare:
        ea, eb = _pick(entries, a), _pick(entries, b)
        comparisons.append(
            {
                "a": ea.label,
                "b": eb.label,
                **{m: agreement.paired_difference(ea.sets, eb.sets, m, n_boot=n_boot) for m in ("pearson", "mse")},
            }
        )
    return {
        "dataset": None if table is None else {"where": table.where, "fingerprint": table.fingerprint, "scored": int(table.scored.sum())},
        "dataset_note": problem,
        "rows": rows,
        "human_reference": references,
        "paper_table6": [{"label": n, "pearson": r, "mse": m, "quoted": True} for n, r, m in spec.PAPER["table6"]],
        "comparisons": comparisons,
        "intervals": INTERVALS,
        "bootstrap_draws": n_boot,
    }


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
        from .errors import FsbError

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
    if math.isnan(v) and row["variants"] > 1:
        d = row["defined_sets"][m]
        mean = "n/a" if math.isnan(d["mean"]) else _fmt(d["mean"], d.get("ci95"))
        return f"undefined (constant answers); mean of the {d['sets']} defined sets of {d['of']}: {mean}"
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
        cells += [_corr_cell(r, "pearson"), _corr_cell(r, "spearman"), _fmt(r["values"]["mse"], r["ci95"]["mse"]), parse, flags]
        out.append("| " + " | ".join(cells) + " |")
    for r in report["rows"]:
        if "note" in r:
            out.append(f"\n{r['label']}: {r['note']}")
    out += ["", INTERVALS.replace("1000", str(report["bootstrap_draws"])), ""]
    out.append(
        "Correlations and mse are over the answers that parse (a bare number in [0, 1] on the first line); parse rate is the "
        "share that did (none: a prediction file or log-likelihood task, which has nothing to parse). A sample (flagged) is not "
        "the full protocol: a stratified sample of equal counts per score bin spreads the human scores more than the full set "
        "and tends to inflate correlations."
    )
    out += ["", "## Reference points (not scorers in this table)", ""]
    if not report["human_reference"] or report["dataset_note"]:
        out += [f"human reference figures: not shown for every row: {report['dataset_note'] or 'no dataset'}", ""]
    for h in report["human_reference"]:
        p, s = h["pearson"], h["spearman"]
        out += [
            f"Human reference on the {h['sentences']} scored sentences ({h['trials']} split-half trials, seed {h['seed']}):",
            "",
            "| figure | Pearson | Spearman | what it is |",
            "|---|---|---|---|",
            f"| split-half r | {p['split_half']:.3f} ± {p['split_half_sd']:.3f} | {s['split_half']:.3f} ± {s['split_half_sd']:.3f} | "
            "two half-size panels, uncorrected (comparable with the paper's Table 2) |",
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
        out += ["| a | b | sentences | pearson difference [95% CI] | mse difference [95% CI] | reads |", "|---|---|---|---|---|---|"]
        for c in report["comparisons"]:
            pc = c["pearson"]["ci95"]
            reads = "a better" if pc["low"] > 0 else "b better" if pc["high"] < 0 else "no clear difference (interval includes 0)"
            out.append(
                f"| {c['a']} | {c['b']} | {c['pearson']['sentences']} | {_fmt(c['pearson']['difference'], pc)} | "
                f"{_fmt(c['mse']['difference'], c['mse']['ci95'])} | {reads} |"
            )
    out += ["", "## Per row: sets, breakdowns, calibration", ""]
    for i, r in enumerate(report["rows"], 1):
        out.append(f"### {i}. {r['label']} ({r['kind']}; {r['source']})")
        if r["model"]:
            out.append(f"model: {r['model']}")
        out.append(f"distinct answers: {r['distinct_answers']} (fewest over sets)")
        if r["per_set"]:
            out.append(
                "per set pearson: "
                + ", ".join(f"{k.rsplit('_', 1)[-1]} {_fmt(v['pearson'])}" for k, v in r["per_set"].items())
                + "; mse: "
                + ", ".join(f"{k.rsplit('_', 1)[-1]} {_fmt(v['mse'])}" for k, v in r["per_set"].items())
            )
        c = r["calibration"]
        out.append(
            f"calibration (human = intercept + slope x model, least squares): slope {_fmt(c['slope'])}, intercept {_fmt(c['intercept'])} "
            "(calibrated: 1 and 0)"
        )
        if r["breakdowns"]:
            out += ["", "| breakdown | group | sentences | human mean | model mean | pearson [95% CI] | mse [95% CI] |"]
            out.append("|---|---|---|---|---|---|---|")
            for key, groups in r["breakdowns"].items():
                for g, b in groups.items():
                    out.append(
                        f"| {key} | {g} | {b['sentences']} | {b['human_mean']:.3f} | {_fmt(b['model_mean'])} | "
                        f"{_fmt(b['pearson'], b['ci95']['pearson'])} | {_fmt(b['mse'], b['ci95']['mse'])} |"
                    )
        out.append("")
    return "\n".join(out)


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


def forest_plot(report: dict[str, Any], path: Path) -> None:
    """Pearson r with its 95% interval per row, the paper's quoted rows (hollow, no interval) and the
    human reference lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = [
        (
            r["label"] + (" (sample)" if any(f.startswith("sample") for f in r["flags"]) else ""),
            r["values"]["pearson"],
            r["ci95"]["pearson"],
            r["kind"],
            r,
        )
        for r in report["rows"]
        if r["correlation_meaningful"]
    ]
    items += [(f"{q['label']} (paper, quoted)", q["pearson"], None, "quoted", None) for q in report["paper_table6"]]
    items.sort(key=lambda t: -(t[1] if not math.isnan(t[1]) else (t[4]["defined_sets"]["pearson"]["mean"] if t[4] else -2)))
    fig, ax = plt.subplots(figsize=(8.5, 0.38 * len(items) + 1.8))
    colors = {"lm-eval": "tab:blue", "predictions": "tab:purple", "baseline": "tab:green", "quoted": "0.5"}
    for y, (label, r, ci, kind, row) in enumerate(items):
        if math.isnan(r) and row is not None:
            d = row["defined_sets"]["pearson"]
            r, ci = d["mean"], d.get("ci95")
            label = f"{label} [undefined; mean of {d['sets']}/{d['of']} sets]"
        if ci is not None and not math.isnan(ci["low"]):
            ax.plot([ci["low"], ci["high"]], [y, y], color=colors[kind], lw=2)
        face = "white" if kind == "quoted" else colors[kind]
        if not math.isnan(r):
            ax.plot([r], [y], "o", mfc=face, mec=colors[kind], ms=7)
        items[y] = (label, r, ci, kind, row)
    ax.set_yticks(range(len(items)), [t[0] for t in items], fontsize=8)
    ax.invert_yaxis()
    for h in sorted(report["human_reference"], key=lambda h: -h["sentences"])[:1]:
        p = h["pearson"]
        ax.axvline(p["noise_ceiling"], color="black", ls="-", lw=1, label=f"noise ceiling {p['noise_ceiling']:.3f}")
        ax.axvline(p["split_half"], color="black", ls="--", lw=1, label=f"human split-half r {p['split_half']:.3f}")
    ax.axvline(0, color="0.8", lw=0.8)
    ax.set_xlim(-0.4, 1.0)
    ax.set_xlabel("Pearson r with the human scores (95% interval)")
    handles = [plt.Line2D([], [], color=c, marker="o", ls="", mfc="white" if k == "quoted" else c) for k, c in colors.items()]
    labels = ["lm-eval run", "prediction file", "baseline", "paper Table 6 (quoted)"]
    extra, extra_labels = ax.get_legend_handles_labels()
    ax.legend(handles + extra, labels + extra_labels, fontsize=7, loc="lower right")
    ax.set_title("Fifty Shades of Bias: agreement with the human scores", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def scatter_plot(entry: Scored, path: Path) -> None:
    """Model score against human score (every set's points), with the identity line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    for s in entry.sets:
        ax.scatter(s.preds[s.parsed], s.golds[s.parsed], s=6, alpha=0.4 if len(entry.sets) > 1 else 0.6)
    ax.plot([0, 1], [0, 1], color="black", lw=1, label="identity (calibrated)")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("model score")
    ax.set_ylabel("human score")
    ax.set_title(entry.label, fontsize=9)
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
    from ._io import seal_difference

    return seal_difference(out, REPORT_SEAL)


def is_report_folder(out: Path) -> bool:
    """True when `out` is an earlier report, unchanged (so replacing it loses nothing of a user's)."""
    return report_folder_difference(out) is None


def check_out(out: Path) -> None:
    """Refuse, before any work, an output folder that is not absent, empty or an unchanged earlier report."""
    from ._io import check_replaceable_dir

    check_replaceable_dir(out, changed=report_folder_difference, kind=REPORT_KIND)


def write_outputs(report: dict[str, Any], entries: list[Scored], out: Path) -> list[Path]:
    """report.md, report.json, forest.png and scatter-<n>-<label>.png into `out` (written whole, then renamed)."""
    from ._io import atomic_dir

    check_out(out)
    written = []
    with atomic_dir(out, changed=report_folder_difference, kind=REPORT_KIND, seal=REPORT_SEAL) as stage:
        (stage / "report.md").write_text(render_markdown(report) + "\n", encoding="utf-8")
        (stage / "report.json").write_text(to_json(report) + "\n", encoding="utf-8")
        forest_plot(report, stage / "forest.png")
        order = {r["label"]: i for i, r in enumerate(report["rows"], 1)}
        for e in entries:
            scatter_plot(e, stage / f"scatter-{order[e.label]}-{_slug(e.label)}.png")
        written = sorted(p.name for p in stage.iterdir())
    return [out / n for n in written]
