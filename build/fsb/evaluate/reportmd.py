"""The report as Markdown, to be read in one screen: one compact table (scorer, n, Pearson and MSE with
their intervals, parse rate, the human ceiling on the row's sentences, short flags with their key) and
the reference points right below it, each note once; then the best-worst section, paired differences,
and the details (per-set figures, breakdowns, calibration, the human reference tables) further down.
Every ± names what it is; every figure says what it is comparable to."""

from __future__ import annotations

import math
from typing import Any

from fsb.evaluate import agreement
from fsb.evaluate.reportbws import render_bws
from fsb.evaluate.reportcells import BWS_MSE, corr_cell, fmt, parse_cell

__all__ = ["BREAKDOWN_RULES", "BWS_MSE", "COMPARED", "INTERVALS", "corr_cell", "fmt", "parse_cell", "render_markdown", "row_flags"]

COMPARED = ("pearson", "spearman", "mse")

INTERVALS = (
    "Intervals: 95% percentile bootstrap, 1000 draws unless stated. A single task or prediction file: "
    "sentences resampled with replacement. A group of few-shot sets: two-level bootstrap, each draw "
    "resamples the 5 sets with replacement and the sentences with replacement and averages the picked "
    "sets' metric on the picked sentences, so the interval reflects the choice of in-context examples as "
    "well as the sentences (the sentence-only interval is in the JSON). * marks an interval over the "
    "draws on which a correlation was defined (not all). A paired difference resamples the shared "
    "sentences and the few-shot sets, the same draw for both rows; a verdict that could not resample "
    'something names it ("for these 5 few-shot sets").'
)

BREAKDOWN_RULES = (
    "Breakdowns by seed type, prompt type and analysis bin: a group gets a correlation only with at least {n} sentences "
    '(else "not meaningful: n = k < {n}"; its mse still stands); a scorer constant by design (the mean baseline) has no '
    "meaningful correlation in any group; a correlation over constant predictions or constant human scores is "
    '"undefined" and names the set. Each group carries its own human reference: its split-half r, and its ceiling, what '
    "a perfect scorer reaches in that group with these judgments (the 95th percentile over 200 studies simulated from "
    "the MaxDiff scale fitted to the judgments, on the study's own tuples; an analysis bin is re-cut on each simulated "
    "study's scores, since it is cut on the noisy human score and the split-half formula fails there). Read a group's "
    "correlation against its own ceiling, not the headline's."
)

CHAT_TEMPLATE = (
    'lm-eval prints "chat template is not applied" once per task: expected. The fsb tasks send the paper\'s plain '
    "prompt (no chat template) so that every model reads the same text; pass --apply_chat_template to lm_eval to "
    "try the model's own template (a different protocol, not comparable with these rows)."
)

FLAG_KEY = {
    "S": "a sample (fsb main's sample, --limit, --sample): NOT comparable with figures on all the scored sentences",
    "B": "a stratified sample (--per-bin: equal counts per score bin), which spreads the human scores and inflates correlations",
    "U": "undefined in some few-shot set (constant answers): the figure is the mean over the defined sets, not the protocol's",
    "C": "constant by design: its correlation is not meaningful (read its mse)",
    "W": "best-worst: counting scores of the model's choices (no mse; see the best-worst section)",
}


def _compact_corr(row: dict[str, Any]) -> str:
    """The compact table's Pearson cell: figure and interval only; the flags say what else to know."""
    v = row["values"]["pearson"]
    if not row.get("correlation_meaningful", True):
        return "n/a (C)"
    if math.isnan(v):
        d = row["defined_sets"]["pearson"]
        return "undefined" if row["variants"] == 1 or math.isnan(d["mean"]) else f"({fmt(d['mean'], d.get('ci95'))})"
    return fmt(v, row["ci95"]["pearson"])


def row_flags(row: dict[str, Any]) -> list[str]:
    """The short flags (keys of FLAG_KEY) of a report row.

    Parameters
    ----------
    row : a report row.

    Returns
    -------
    The flag letters, in the key's order.
    """
    text = " ".join(row["flags"])
    out = []
    if any(f.startswith(("sample", "--limit")) for f in row["flags"]) and "per bin" not in text:
        out.append("S")
    if "per bin" in text or "stratified" in text:
        out.append("B")
    if row.get("undefined") and row["variants"] > 1 and row.get("correlation_meaningful", True):
        out.append("U")
    if not row.get("correlation_meaningful", True):
        out.append("C")
    if "bws" in row:
        out.append("W")
    return out


def _notes(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Each distinct row note once, numbered in order of appearance."""
    out: dict[str, int] = {}
    for r in rows:
        if r.get("note") and r["note"] not in out:
            out[r["note"]] = len(out) + 1
    return out


def _ceiling_cell(row: dict[str, Any]) -> str:
    h = row.get("human_reference")
    if not h:
        return "n/a"
    return "n/a (n < 10)" if "note" in h else fmt(h["noise_ceiling"])


def _compact_table(report: dict[str, Any]) -> list[str]:
    notes = _notes(report["rows"])
    out = [
        "| # | scorer | n | Pearson [95% CI] | MSE [95% CI] | parse rate | noise ceiling (its sentences) | flags |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        n = f"{r['sentences']}" + (f" x {r['variants']} sets" if r["variants"] > 1 else "")
        mse = "not given (best-worst)" if "mse_note" in r else fmt(r["values"]["mse"], r["ci95"]["mse"])
        flags = row_flags(r) + ([f"note {notes[r['note']]}"] if r.get("note") else [])
        cells = [str(r.get("given", "")), r["label"], n, _compact_corr(r), mse, parse_cell(r), _ceiling_cell(r), " ".join(flags)]
        out.append("| " + " | ".join(cells) + " |")
    used = sorted({f for r in report["rows"] for f in row_flags(r)}, key=list(FLAG_KEY).index)
    key = ("Flags: " + "; ".join(f"{k}: {FLAG_KEY[k]}" for k in used)) if used else "No flags: every row is on all the scored sentences."
    out += ["", f"# = the row as given (the inputs in command-line order; --compare uses it). {key}"]
    out += [f"note {i}: {text}" for text, i in notes.items()]
    return out


def _reference_points(report: dict[str, Any]) -> list[str]:
    """The reference points, right below the table: the human figures on all the scored sentences, the
    annotators' own best-worst agreement and the paper's Table 6 (quoted), one line each."""
    out = ["", "Reference points (not scorers):"]
    ds = report["dataset"]
    full = [h for h in report["human_reference"] if "note" not in h and ds and h["sentences"] == ds["scored"]]
    if full:
        p = full[0]["pearson"]
        out.append(
            f"- humans on all {full[0]['sentences']} scored sentences: noise ceiling {p['noise_ceiling']:.3f} (what a perfect scorer "
            f"reaches), split-half r {p['split_half']:.3f} (sd {p['split_half_sd']:.3f} over {full[0]['trials']} trials; two half panels)"
        )
    if report["dataset_note"] or not report["human_reference"]:
        out.append(f"- human reference figures: not shown for every row: {report['dataset_note'] or 'no dataset'}")
    a = report.get("annotator_agreement")
    if a:
        best, worst = (fmt(a[s]["value"], {**a[s]["ci95"], "defined": 1.0}) for s in ("best", "worst"))
        out.append(
            f"- annotators' own best-worst agreement (each judgment vs the leave-one-out majority of its tuple; 95% CI over "
            f"tuples): best {best}, worst {worst}"
        )
    out.append(
        "- the paper's Table 6 (QUOTED, all 1000 sentences, earlier judgments, no intervals), Pearson / MSE: "
        + "; ".join(f"{q['label']} {q['pearson']:.3f} / {q['mse']:.3f}" for q in report["paper_table6"])
    )
    return out


def render_markdown(report: dict[str, Any], forest: str | None = None) -> str:
    """The report as Markdown (also what `fsb report` prints and the main job's report.txt).

    Parameters
    ----------
    report : the report from `fsb.evaluate.report.build`.
    forest : the forest plot's file name, shown right below the table (report.md), or None.

    Returns
    -------
    The page.
    """
    out = ["# Fifty Shades of Bias: agreement of scorers with the human scores", ""]
    ds = report["dataset"]
    if ds:
        out.append(f"dataset: {ds['where']} (fingerprint {str(ds['fingerprint'])[:16]}; {ds['scored']} sentences scored by the protocol)")
    else:
        out.append(f"dataset: not available ({report['dataset_note']})")
    out += ["", *_compact_table(report), *_reference_points(report)]
    if forest:
        out += ["", f"![Pearson r of every row with its 95% interval, the human ceilings and the paper's rows]({forest})"]
    out += render_bws(report["rows"], report.get("annotator_agreement"))
    out += _comparisons(report["comparisons"])
    out += ["", "## Notes", "", INTERVALS.replace("1000", str(report["bootstrap_draws"])), ""]
    out.append(
        "Correlations and mse are over the answers that parse (a bare number in [0, 1] on the first line); parse rate is the "
        "share that did, with the count (none: a prediction file or log-likelihood task, which has nothing to parse)."
    )
    if any(r["kind"] == "lm-eval" for r in report["rows"]):
        out += ["", CHAT_TEMPLATE]
    out += ["", "runs and files:"] + [f"- {s}" for s in dict.fromkeys(r["source"] for r in report["rows"])]
    out += _human_tables(report)
    out += _details(report["rows"])
    return "\n".join(out)


def _comparisons(comparisons: list[dict[str, Any]]) -> list[str]:
    if not comparisons:
        return []
    out = ["", "## Paired differences (row a minus row b, same sentences)", ""]
    out += [
        "Each metric is read on its own (higher pearson and spearman, lower mse are better); a correlation difference "
        "is withheld when either row's correlation is not meaningful or undefined.",
        "",
        "| a | b | sentences | resampled | pearson difference [95% CI] | spearman difference [95% CI] | mse difference [95% CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        how = c["mse"].get("resampled", "")
        cells = [c["a"], c["b"], str(c["mse"]["sentences"]), how]
        for m in COMPARED:
            d = c[m]
            cells.append(d["reads"] if d.get("withheld") else f"{fmt(d['difference'], d['ci95'])}: {d['reads']}")
        out.append("| " + " | ".join(cells) + " |")
    return out


def _human_tables(report: dict[str, Any]) -> list[str]:
    """Each distinct human reference (all the scored sentences, and each sample's own) as a table."""
    ds = report["dataset"]
    out = ["", "## Human reference figures", ""]
    for h in report["human_reference"]:
        if "note" in h:
            out += [f"On the {h['sentences']} scored sentences: {h['note']} (too few sentences for a split-half r).", ""]
            continue
        p, s = h["pearson"], h["spearman"]
        comparable = bool(ds and ds.get("is_release") and h["sentences"] == ds["scored"])
        if comparable:
            place = "the release's judgments on its scored sentences: comparable with the paper's Table 2, over all 1000"
        elif ds and h["sentences"] < ds["scored"]:
            place = "a sample: these place the sample's rows only, not comparable with the paper's Table 2"
        else:
            place = "not the release's judgments: not comparable with the paper's Table 2"
        sd = f"sd over {h['trials']} trials"
        out += [
            f"On {h['sentences']} sentences ({h['trials']} split-half trials, seed {h['seed']}; {place}):",
            "",
            "| figure | Pearson | Spearman | what it is |",
            "|---|---|---|---|",
            f"| split-half r | {p['split_half']:.3f} ({sd} {p['split_half_sd']:.3f}) | {s['split_half']:.3f} ({sd} "
            f"{s['split_half_sd']:.3f}) | two half-size panels, uncorrected"
            + (" (comparable with the paper's Table 2)" if comparable else "")
            + " |",
            f"| full-panel reliability | {p['full_panel_reliability']:.3f} | {s['full_panel_reliability']:.3f} | "
            "Spearman-Brown 2r/(1+r): the released scores' reliability |",
            f"| noise ceiling | {p['noise_ceiling']:.3f} | {s['noise_ceiling']:.3f} | "
            "sqrt(reliability): what a perfect scorer would reach against these noisy scores |",
            "",
            f"References: {h['references']}. (Spearman-Brown applied to a rank correlation is an approximation.)",
            "",
        ]
    return out


def _details(rows: list[dict[str, Any]]) -> list[str]:
    out = ["## Per row: sets, breakdowns, calibration", "", BREAKDOWN_RULES.replace("{n}", str(agreement.MIN_GROUP)), ""]
    for r in rows:
        out.append(f"### {r.get('given', '')}. {r['label']} ({r['kind']}; {r['source']})")
        if r["model"]:
            out.append(f"model: {r['model']}")
        if r["flags"]:
            out.append("flags: " + "; ".join(r["flags"]))
        if "seconds" in r:
            out.append(f"time: {r['seconds']:.0f} s")
        out.append(f"pearson {corr_cell(r, 'pearson')}; spearman {corr_cell(r, 'spearman')}")
        out.append(f"distinct answers: {r['distinct_answers']} (fewest over sets)")
        if r["per_set"]:
            per = r["per_set"].items()
            out.append(
                "per set pearson: "
                + ", ".join(f"{agreement.set_label(k)} {fmt(v['pearson']).replace('n/a', 'undefined')}" for k, v in per)
                + "; mse: "
                + ", ".join(f"{agreement.set_label(k)} {fmt(v['mse'])}" for k, v in per)
            )
        c = r["calibration"]
        if not r["correlation_meaningful"]:
            out.append("calibration: not meaningful (constant by design)")
        else:
            out.append(
                f"calibration (human = intercept + slope x model, least squares): slope {fmt(c['slope'])}, "
                f"intercept {fmt(c['intercept'])} (calibrated: 1 and 0)"
            )
        h = r.get("human_reference")
        if h and "note" in h:
            out.append(f"human reference on this row's {h['sentences']} sentences: {h['note']}")
        elif h:
            out.append(
                f"human reference on this row's {h['sentences']} sentences (Pearson): split-half r {h['split_half']:.3f}, "
                f"full-panel reliability {h['full_panel_reliability']:.3f}, noise ceiling {h['noise_ceiling']:.3f}"
            )
        out += _breakdown_table(r)
        out.append("")
    return out


def _breakdown_table(r: dict[str, Any]) -> list[str]:
    if not r["breakdowns"]:
        return []
    out = [
        "",
        "| breakdown | group | sentences | human mean | model mean | pearson [95% CI] | human split-half r "
        "| perfect scorer's bound (simulated) | mse [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, groups in r["breakdowns"].items():
        for g, b in groups.items():
            pearson = b["pearson_note"] if b.get("pearson_note") else fmt(b["pearson"], b["ci95"]["pearson"])
            h = b.get("human_reference")
            human = (fmt(h.get("split_half")), fmt(h["noise_ceiling"])) if h else ("n/a", "n/a")
            out.append(
                f"| {key} | {g} | {b['sentences']} | {b['human_mean']:.3f} | {fmt(b['model_mean'])} | "
                f"{pearson} | {human[0]} | {human[1]} | {fmt(b['mse'], b['ci95']['mse'])} |"
            )
    out.append(
        "\nA group's bound is not the headline noise ceiling (sqrt of the full-panel reliability, an expected value): it"
        " is the 95th percentile, over studies simulated from the fitted MaxDiff scale on these tuples, of a perfect"
        " scorer's Pearson r within the group (bins re-cut on each simulated score): a perfect scorer stays below it in 19 studies of 20."
    )
    return out
