"""What the lm-eval tasks compute per item and over the corpus, for both task families: the strict
parsers, the per-item results lm-eval logs, and the corpus-level metrics.

The single definition: the lm-eval adapter (harness/utils.py) points lm-eval at these functions, and
`fsb report` (evaluate.results, evaluate.agreement) recomputes with them, so the report cannot disagree
with what lm-eval printed. Pure functions of their arguments; nothing here imports lm-eval.

Rating tasks: an item is (prediction or None, human score); an answer that does not parse is never
replaced by a made-up score: it is left out of pearson, spearman and mse and counts as 0 in parse_rate.
Best-worst tasks: an item is a per-tuple record (`bws_record`); the model's choices over all
presentations are scored by counting, as the human judgments are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fsb.annotate.bwsprompt import BWS_SIZE, ProtocolError, parse_bws, rotate

__all__ = [
    "BWS_METRICS",
    "BWS_SIZE",
    "Item",
    "bws_agreement",
    "bws_chance_agreement",
    "bws_choice",
    "bws_counts",
    "bws_pairs",
    "bws_parse_rate",
    "bws_pearson",
    "bws_position_rate",
    "bws_record",
    "bws_spearman",
    "expected_score",
    "mse",
    "parse_score",
    "pearson",
    "position_metric",
    "process_bws_generation",
    "process_bws_loglikelihood",
    "process_generation",
    "process_loglikelihood",
    "spearman",
]

Item = tuple[float | None, float]  # (prediction, or None when the answer did not parse; human score)

_CHOICE_VALUES = np.array([i / 10 for i in range(11)])  # "0.0" .. "1.0" (fewshot.CHOICES)
# A bare number and nothing else on the first non-empty line: "0.45", ".5", "1", "1.0". ASCII digits
# only, and digits after a point: "1." is a list marker ("1. The most biased ..."), not a score.
_NUMBER = re.compile(r"\+?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)")


# --- rating tasks: parsing and per-item results ----------------------------------------------------


def parse_score(text: str) -> float | None:
    """The score in a model's answer, or None: the first non-empty line must be a bare number in [0, 1].

    Strict on purpose: a loose regex would read list markers ("1. The most biased ...") as scores. The
    answer is stripped first, so one that begins with blank lines is read from its first non-empty line
    (what the upstream scoring script did: `content.strip().split("\\n")[0]`).

    Parameters
    ----------
    text
        The model's answer.

    Returns
    -------
    float or None
        The score, or None when the first non-empty line is not a bare number in [0, 1].
    """
    stripped = text.strip()
    if not stripped:
        return None
    first = stripped.splitlines()[0].strip()
    if not _NUMBER.fullmatch(first):
        return None
    value = float(first)
    return value if 0.0 <= value <= 1.0 else None


def process_generation(doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
    """Per item: (prediction or None, gold) for the corpus-level metrics, and whether the answer parsed."""
    if not results:
        raise ProtocolError(f"no model answer for sentence id {doc.get('id')}: the requests do not match this run's sentences")
    pred = parse_score(results[0])
    pair = (pred, float(doc["score"]))
    return {"pearson": pair, "spearman": pair, "mse": pair, "parse_rate": float(pred is not None)}


def expected_score(loglikelihoods: Sequence[float]) -> float:
    """E[score] = sum_i p_i v_i over the choices v = 0.0 .. 1.0, with p = softmax of their log-likelihoods."""
    ll = np.asarray(loglikelihoods, dtype=float)
    p = np.exp(ll - ll.max())
    return float(p @ _CHOICE_VALUES / p.sum())


def process_loglikelihood(doc: dict[str, Any], results: list[tuple[float, bool]]) -> dict[str, Any]:
    """Per item: (expected score from the choices' probabilities, gold). Nothing to parse."""
    pair = (expected_score([ll for ll, _ in results]), float(doc["score"]))
    return {"pearson": pair, "spearman": pair, "mse": pair}


# --- rating tasks: corpus-level metrics --------------------------------------------------------------


def _parsed(items: Sequence[Item]) -> tuple[np.ndarray, np.ndarray]:
    kept = [(p, g) for p, g in items if p is not None]
    if not kept:
        return np.empty(0), np.empty(0)
    preds, golds = zip(*kept)
    return np.asarray(preds, dtype=float), np.asarray(golds, dtype=float)


def _correlation(items: Sequence[Item], kind: str) -> float:
    import scipy.stats

    preds, golds = _parsed(items)
    if preds.size < 2 or np.ptp(preds) == 0 or np.ptp(golds) == 0:
        return math.nan  # undefined, not 0: a constant answer carries no ranking
    fn = scipy.stats.pearsonr if kind == "pearson" else scipy.stats.spearmanr
    return float(fn(preds, golds)[0])


def pearson(items: Sequence[Item]) -> float:
    """Pearson's r between predictions and human scores over the items whose answer parsed (NaN if undefined)."""
    return _correlation(items, "pearson")


def spearman(items: Sequence[Item]) -> float:
    """Spearman's rho between predictions and human scores over the items whose answer parsed (NaN if undefined)."""
    return _correlation(items, "spearman")


def mse(items: Sequence[Item]) -> float:
    """Mean squared error (1/n) sum (pred - gold)^2 over the items whose answer parsed (NaN if none)."""
    preds, golds = _parsed(items)
    return float(np.mean((preds - golds) ** 2)) if preds.size else math.nan


# --- best-worst tasks: per-tuple records ------------------------------------------------------------

BWS_METRICS = (
    "pearson",
    "spearman",
    "best_agreement",
    "worst_agreement",
    "parse_rate",
    *(f"{q}_position_{p}" for q in ("best", "worst") for p in range(1, BWS_SIZE + 1)),
)


def bws_record(doc: dict[str, Any], picks: Sequence[tuple[int, int] | None]) -> dict[str, Any]:
    """The per-tuple value every best-worst metric aggregates.

    Parameters
    ----------
    doc
        The tuple's document (`bwsprompt.load_bws`).
    picks
        Per rotation the chosen (most, least) display positions 1..4, or None when unparsed.

    Returns
    -------
    dict
        The tuple, its human side, and per presentation the shift, the chosen display positions and
        the items they hold (None: unparsed).
    """
    shown = []
    for shift, pick in zip(doc["rotations"], picks):
        order = rotate(doc["items"], int(shift))
        best, worst = pick if pick is not None else (None, None)
        shown.append(
            {
                "shift": int(shift),
                "best": best,
                "worst": worst,
                "best_item": order[best - 1] if best else None,
                "worst_item": order[worst - 1] if worst else None,
            }
        )
    keys = ("tuple_id", "items", "scores", "majority_best", "majority_worst")
    return {**{k: doc[k] for k in keys}, "shown": shown}


def process_bws_generation(doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
    """Per tuple: one answer per rotation, parsed strictly; the record goes to every metric."""
    if len(results) != len(doc["rotations"]):
        raise ProtocolError(f"tuple {doc.get('tuple_id')}: {len(results)} answers for {len(doc['rotations'])} presentations")
    record = bws_record(doc, [parse_bws(r) for r in results])
    return dict.fromkeys(BWS_METRICS, record)


def bws_choice(most: Sequence[float], least: Sequence[float]) -> tuple[int, int]:
    """(most, least) display positions 1..4 from log-likelihoods, never the same sentence twice.

    Parameters
    ----------
    most, least
        The log-likelihoods of the labels " 1".." 4" after "Most:" and after "Least:".

    Returns
    -------
    tuple of int
        The most likely "Most" label, and the most likely "Least" label among the other three (the
        answer format requires N != M). Ties go to the earlier position.
    """
    best = int(np.argmax(np.asarray(most, dtype=float)))
    rest = np.asarray(least, dtype=float).copy()
    rest[best] = -np.inf
    return best + 1, int(np.argmax(rest)) + 1


def process_bws_loglikelihood(doc: dict[str, Any], results: list[tuple[float, bool]]) -> dict[str, Any]:
    """Per tuple: per rotation 4 "Most" then 4 "Least" log-likelihoods (the requests' order); nothing to parse."""
    per = 2 * BWS_SIZE
    if len(results) != per * len(doc["rotations"]):
        raise ProtocolError(f"tuple {doc.get('tuple_id')}: {len(results)} log-likelihoods for {len(doc['rotations'])} presentations")
    ll = [float(r[0]) for r in results]
    picks = [bws_choice(ll[i : i + BWS_SIZE], ll[i + BWS_SIZE : i + per]) for i in range(0, len(ll), per)]
    return dict.fromkeys(BWS_METRICS, bws_record(doc, picks))


# --- best-worst tasks: corpus-level metrics (pure functions of the per-tuple records) ----------------


def bws_counts(records: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Counting over the parsed presentations.

    Parameters
    ----------
    records
        Per-tuple records (`bws_record`).

    Returns
    -------
    dict of numpy.ndarray
        Per item (sorted ids): its human score ("gold"), appearances "n", times chosen "best" and
        "worst", and the model's score ((B - W) / n + 1) / 2 in [0, 1] ("model"), the same formula as
        the human scores (NaN for an item whose presentations all failed to parse).
    """
    from fsb.bws.counting import counting_score

    gold: dict[int, float] = {}
    n: dict[int, int] = {}
    b: dict[int, int] = {}
    w: dict[int, int] = {}
    for rec in records:
        for item, score in zip(rec["items"], rec["scores"]):
            gold[int(item)] = float(score)
            n.setdefault(int(item), 0)
        for s in rec["shown"]:
            if s["best"] is None:
                continue
            for item in rec["items"]:
                n[int(item)] += 1
            b[int(s["best_item"])] = b.get(int(s["best_item"]), 0) + 1
            w[int(s["worst_item"])] = w.get(int(s["worst_item"]), 0) + 1
    ids = np.asarray(sorted(gold), dtype=np.int64)
    apps = np.asarray([n[i] for i in ids], dtype=np.int64)
    best = np.asarray([b.get(i, 0) for i in ids], dtype=np.int64)
    worst = np.asarray([w.get(i, 0) for i in ids], dtype=np.int64)
    model = (counting_score(best, worst, apps) + 1) / 2
    return {"ids": ids, "gold": np.asarray([gold[i] for i in ids]), "n": apps, "best": best, "worst": worst, "model": model}


def bws_pairs(records: Sequence[dict[str, Any]]) -> list[Item]:
    """(model counting score or None, human score) per sentence: the rating tasks' item shape."""
    c = bws_counts(records)
    return [(None if math.isnan(m) else float(m), float(g)) for m, g in zip(c["model"], c["gold"])]


def bws_pearson(records: Sequence[dict[str, Any]]) -> float:
    """Pearson's r between the model's counting scores and the human scores, over the sentences it scored."""
    return pearson(bws_pairs(records))


def bws_spearman(records: Sequence[dict[str, Any]]) -> float:
    """Spearman's rho between the model's counting scores and the human scores."""
    return spearman(bws_pairs(records))


def _presentations(records: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(rec, s) for rec in records for s in rec["shown"]]


def bws_agreement(records: Sequence[dict[str, Any]], side: str) -> float:
    """Share of parsed presentations (tuple x rotation) whose `side` ("best" or "worst") choice is in the
    human majority's (any tied item counts). NaN when nothing parsed."""
    hits = [s[f"{side}_item"] in rec[f"majority_{side}"] for rec, s in _presentations(records) if s[side] is not None]
    return float(np.mean(hits)) if hits else math.nan


def bws_chance_agreement(records: Sequence[dict[str, Any]], side: str) -> float:
    """What a uniformly random choice would agree: the mean over tuples of |human majority| / 4, so a
    tuple whose majority is a tie of two counts 2/4 (`bws_agreement` counts any tied item as a hit)."""
    return float(np.mean([len(rec[f"majority_{side}"]) / BWS_SIZE for rec in records])) if records else math.nan


def bws_parse_rate(records: Sequence[dict[str, Any]]) -> float:
    """Share of presentations whose answer parsed."""
    shown = [s for _, s in _presentations(records)]
    return float(np.mean([s["best"] is not None for s in shown])) if shown else math.nan


def bws_position_rate(records: Sequence[dict[str, Any]], side: str, position: int) -> float:
    """Share of parsed presentations in which display position `position` (1..4) was chosen as `side`;
    an unbiased chooser on rotated tuples gives about 1/4 (a diagnostic: neither higher nor lower is better)."""
    picks = [s[side] for _, s in _presentations(records) if s[side] is not None]
    return float(np.mean([p == position for p in picks])) if picks else math.nan


def position_metric(side: str, position: int) -> Callable[[Sequence[dict[str, Any]]], float]:
    """The aggregation lm-eval calls for `{side}_position_{position}` (`bws_position_rate` bound)."""

    def rate(records: Sequence[dict[str, Any]]) -> float:
        return bws_position_rate(records, side, position)

    rate.__name__ = f"{side}_position_{position}"
    rate.__doc__ = f"Share of parsed presentations choosing display position {position} as {side} (uniform: 0.25)."
    return rate
