"""The cells of the report's tables: a figure with its interval, a parse rate with its count, a correlation
with why it is undefined; shared by the Markdown page (reportmd) and its best-worst section (reportbws)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["BWS_MSE", "corr_cell", "fmt", "parse_cell"]

BWS_MSE = (
    "not given (best-worst): the counting scores share the human scores' [0, 1] scale, but they count the model's "
    "choices within tuples, not ratings, so their squared difference from the human scores is no rating error"
)


def fmt(value: float | None, ci: dict[str, Any] | None = None) -> str:
    """A figure to 3 decimals, with its interval "[low, high]" (and * when over defined draws only).

    Parameters
    ----------
    value : the figure (None or NaN: "n/a").
    ci : its interval {low, high, defined}, or None.

    Returns
    -------
    The text; a figure that rounds to zero never reads "-0.000".
    """
    if value is None or math.isnan(value):
        return "n/a"

    def f(x: float) -> str:
        text = f"{x:.3f}"
        return "0.000" if text == "-0.000" else text

    if ci is None or ci.get("low") is None or math.isnan(ci["low"]):
        return f(value)
    mark = "" if ci["defined"] == 1.0 else "*"
    return f"{f(value)} [{f(ci['low'])}, {f(ci['high'])}]{mark}"


def parse_cell(row: dict[str, Any]) -> str:
    """The parse rate with its count, "0.969 (31/32)"; a best-worst row's is per presentation; "none" only
    for a row with nothing to parse (a prediction file, a log-likelihood task).

    Parameters
    ----------
    row : a report row.

    Returns
    -------
    The cell's text.
    """
    if "bws" in row and not math.isnan(row["bws"]["values"]["parse_rate"]):
        b = row["bws"]
        rate, total = b["values"]["parse_rate"], b["presentations"]
    elif math.isnan(row["values"]["parse_rate"]):
        return "none"
    else:
        rate, total = row["values"]["parse_rate"], row["sentences"] * row["variants"]
    return f"{fmt(rate)} ({round(rate * total)}/{total})"


def corr_cell(row: dict[str, Any], m: str) -> str:
    """A correlation's cell in full (the details): the value and interval, or why it is undefined with the
    mean over the defined sets, or "not meaningful" for a scorer constant by design.

    Parameters
    ----------
    row : a report row; m : "pearson" or "spearman".

    Returns
    -------
    The cell's text.
    """
    v = row["values"][m]
    if not row.get("correlation_meaningful", True):
        return f"not meaningful ({v:.3f}: constant by design, see the note; read mse)"
    if math.isnan(v):
        why = f"undefined: {row.get('undefined') or 'no spread'}"
        if row["variants"] == 1:
            return why
        d = row["defined_sets"][m]
        mean = "none defined" if math.isnan(d["mean"]) else fmt(d["mean"], d.get("ci95"))
        return f"{why}; mean over the {d['sets']} defined sets of {d['of']} (not the protocol's figure): {mean}"
    return fmt(v, row["ci95"][m])
