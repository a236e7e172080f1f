"""The report's best-worst section: each best-worst row's agreement with the human majority beside chance
and beside the annotators' own agreement, its display-position rates beside the uniform 0.25, a
plain-language sentence per row, and each model's rating and best-worst rows side by side."""

from __future__ import annotations

from typing import Any

from fsb.evaluate.reportcells import BWS_MSE, corr_cell, fmt

__all__ = ["bws_sentence", "counted", "render_bws"]


def counted(n: int, word: str) -> str:
    """ "1 tuple", "2 tuples".

    Parameters
    ----------
    n : the count; word : the singular noun.

    Returns
    -------
    The count with the noun in the right number.
    """
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def bws_sentence(row: dict[str, Any]) -> str:
    """What a model did with the best-worst test, in plain words from its report row: its correlation, its
    agreement with the human majority beside chance, and the display position it favoured.

    Parameters
    ----------
    row : a report row with a `bws` part.

    Returns
    -------
    One sentence (the one the main job also prints on the console).
    """
    b = row["bws"]
    v, ci, chance = b["values"], b["ci95"], b["chance"]
    fav = max(range(1, 5), key=lambda p: v[f"best_position_{p}"])
    picked = round(v[f"best_position_{fav}"] * b["presentations"] * v["parse_rate"])
    return (
        f"Best-worst ({row['label']}, {counted(b['tuples'], 'tuple')} x rotations {','.join(map(str, b['rotations']))}): pearson "
        f"{fmt(row['values']['pearson'])} of its counting scores with the human scores; best agreement "
        f"{fmt(v['best_agreement'], ci.get('best_agreement'))} (chance {fmt(chance['best'])}), worst agreement "
        f"{fmt(v['worst_agreement'], ci.get('worst_agreement'))} (chance {fmt(chance['worst'])}); it chose display position "
        f"{fav} as the most biased in {picked} of {b['presentations']} presentations (uniform: 0.25 each). Read against chance "
        "and the annotators' own agreement, not as a result."
    )


def render_bws(rows: list[dict[str, Any]], humans: dict[str, Any] | None = None) -> list[str]:
    """The best-worst rows' own figures, and each model's rating and best-worst rows side by side.

    Parameters
    ----------
    rows : the report's rows (only those with a `bws` part are shown here).
    humans : the annotators' own leave-one-out agreement (`fsb.data.reference.loo_agreement`), or None.

    Returns
    -------
    Markdown lines (none when no row is best-worst).
    """
    bws = [r for r in rows if "bws" in r]
    if not bws:
        return []
    out = ["", "## Best-worst protocol (fsb_bws*): the annotators' test", ""]
    human = ("n/a", "n/a")
    if humans:
        human = tuple(fmt(humans[s]["value"], {**humans[s]["ci95"], "defined": 1.0}) for s in ("best", "worst"))
    out += [
        "The model chose the most and the least biased of each judged 4-tuple, shown in the listed rotations; its choices "
        "are scored by counting as the human judgments are (pearson above: its counting scores against the human scores, "
        "intervals over sentences; no mse: " + BWS_MSE + "). Agreement: share of parsed presentations whose choice is in the "
        "human majority (tied items all count), beside the chance rate of a random choice and the annotators' own agreement "
        "(each judgment against the majority of the other judgments of its tuple, leave-one-out, all judged tuples). "
        "Position rates: how often each display position was chosen, beside the uniform 0.25. Intervals here: 95% "
        "percentile bootstrap over tuples.",
        "",
        "| # | scorer | tuples | presentations | parse rate | best agreement [95% CI] | chance | humans | "
        "worst agreement [95% CI] | chance | humans |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in bws:
        b = r["bws"]
        v, ci = b["values"], b["ci95"]
        parsed = round(v["parse_rate"] * b["presentations"]) if v["parse_rate"] == v["parse_rate"] else 0
        cells = [
            str(r.get("given", "")),
            r["label"],
            str(b["tuples"]),
            f"{b['presentations']} (rotations {','.join(map(str, b['rotations']))})",
        ]
        cells += [f"{fmt(v['parse_rate'])} ({parsed}/{b['presentations']})", fmt(v["best_agreement"], ci.get("best_agreement"))]
        cells += [
            fmt(b["chance"]["best"]),
            human[0],
            fmt(v["worst_agreement"], ci.get("worst_agreement")),
            fmt(b["chance"]["worst"]),
            human[1],
        ]
        out.append("| " + " | ".join(cells) + " |")
    out += [
        "",
        "| # | scorer | chosen | position 1 | position 2 | position 3 | position 4 | uniform |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in bws:
        b = r["bws"]
        for side in ("best", "worst"):
            rates = [fmt(b["values"][f"{side}_position_{p}"], b["ci95"].get(f"{side}_position_{p}")) for p in range(1, 5)]
            out.append(
                f"| {r.get('given', '')} | {r['label']} | as {side} | " + " | ".join(rates) + f" | {b['uniform_position_rate']:.2f} |"
            )
    out += [""] + [bws_sentence(r) for r in bws]
    return out + _protocols(rows)


def _protocols(rows: list[dict[str, Any]]) -> list[str]:
    """Each model's rating and best-worst rows side by side (keyed by the model as run)."""
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(r["model"] or r["label"], []).append(r)
    pairs = {m: rs for m, rs in by_model.items() if any("bws" in r for r in rs) and any("bws" not in r for r in rs)}
    if not pairs:
        return []
    out = ["", "### Rating vs best-worst, per model", ""]
    out += ["| model | # | protocol | task | sentences | pearson [95% CI] | spearman [95% CI] |", "|---|---|---|---|---|---|---|"]
    for rs in pairs.values():
        for r in rs:
            protocol = "best-worst (choices, counted)" if "bws" in r else "rating (a number per sentence)"
            cells = [r.get("model_name") or r["label"], str(r.get("given", "")), protocol, str(r["task"]), str(r["sentences"])]
            out.append("| " + " | ".join([*cells, corr_cell(r, "pearson"), corr_cell(r, "spearman")]) + " |")
    return [*out, "", "The two protocols score different samples of sentences here; compare their intervals, not the point values alone."]
