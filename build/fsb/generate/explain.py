"""Ask a model why a sentence has its score (the paper's appendix A.4 prompt), for a stratified sample.

The sample takes up to `per_bin` sentences from each score bin (the paper's three analysis bins, or the
four equispaced few-shot bins), drawn by a reproducible rank keyed on the seed, so the same inputs and
seed always ask about the same sentences. Scores come from the built dataset (the human scores) or from
a scores file (for example a model's scores, as the paper asked GPT for the reasons behind its own).
Requests run through the request engine (`fsb.engine`: journal, retries, resume after a kill), like `fsb generate`'s.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import fifty_shades_of_bias as spec
from fsb.core.readers import InputError, quoted
from fsb.engine import Request, RequestPlan, Sampling, request_id
from fsb.generate.keys import rank_key
from fsb.generate.prompts import REASONING_INSTRUCTION, TEMPLATE_VERSION, reasoning_messages

__all__ = ["EXPLAIN_MAX_TOKENS", "Item", "build_explain_plan", "load_items", "sample_by_bin", "score_text"]

EXPLAIN_MAX_TOKENS = 200  # completion tokens per request: a reason is a few sentences
BIN_SCHEMES = ("analysis", "equispaced")
_ID_COLUMNS = ("id", "uid", "item")


@dataclass(frozen=True)
class Item:
    """A sentence with its score in [0, 1]."""

    uid: int
    text: str
    score: float


def _read_scores(path: Path, column: str | None) -> dict[int, float]:
    import pandas as pd

    from fsb.tables.csvrows import INT64_MAX, id_problem, read_csv_table

    table = read_csv_table(path)
    frame = table.frame
    id_col = next((c for c in _ID_COLUMNS if c in frame.columns), None)
    if id_col is None:
        raise InputError(path, f"no id column (expected one of {', '.join(_ID_COLUMNS)})", line=1)
    if column is None:
        column = "score_normalized" if "score_normalized" in frame.columns else "score"
    if column not in frame.columns:
        shown = ", ".join(quoted(c) for c in frame.columns[:20])
        raise InputError(path, f"no score column {quoted(column)} (the header has: {shown}); choose one with --score-column", line=1)
    values = pd.to_numeric(frame[column], errors="coerce")
    out: dict[int, float] = {}
    for i, (text, value) in enumerate(zip(frame[id_col], values)):
        if problem := id_problem(text.strip(), INT64_MAX):
            raise table.fail(i, id_col, problem)
        uid = int(text.strip())
        if pd.isna(value) or not 0.0 <= float(value) <= 1.0:
            raise table.fail(i, column, f"not a score in [0, 1]: {quoted(frame[column].iloc[i])} (the prompt speaks of a 0 to 1 scale)")
        if int(uid) in out:
            raise table.fail(i, id_col, f"duplicate id {int(uid)}")
        out[int(uid)] = float(value)
    return out


def load_items(
    *,
    dataset: str | os.PathLike[str] | None = None,
    generations: str | os.PathLike[str] | None = None,
    scores: str | os.PathLike[str] | None = None,
    score_column: str | None = None,
) -> list[Item]:
    """Sentences and scores: a generations file joined with a scores file, or the built dataset (its human scores)."""
    if (generations is None) != (scores is None):
        raise InputError(generations or scores or "-", "give both --generations and --scores, or neither (then the built dataset is used)")
    if generations is not None and scores is not None:
        from fsb.tables.csvrows import read_generations

        gens = read_generations(generations).frame
        text = dict(zip(gens["uid"].astype(int), gens["response"]))
        by_id = _read_scores(Path(scores), score_column)
        missing = sorted(set(by_id) - set(text))
        if missing:
            raise InputError(scores, f"{len(missing)} ids have no sentence in {generations} (first: {missing[0]})")
        return [Item(uid, text[uid], s) for uid, s in sorted(by_id.items())]
    ds = spec.load("default", source=dataset)[spec.SPLIT]
    column = score_column or "score"
    if column not in ds.column_names:
        raise InputError(str(dataset or spec.locate()), f"the dataset has no column {column!r}")
    return [Item(int(i), str(t), float(s)) for i, t, s in zip(ds["id"], ds["text"], ds[column])]


def bin_names(scheme: str) -> tuple[str, ...]:
    """The bins' names in order: low/medium/high (analysis) or 0.00-0.25 ... 0.75-1.00 (equispaced)."""
    return spec.BIN_NAMES if scheme == "analysis" else spec.FEWSHOT_BIN_LABELS


def bin_of(score: float, scheme: str) -> str:
    """The bin name of a score under `scheme` (fifty_shades_of_bias's bins)."""
    if scheme == "analysis":
        return spec.analysis_bin(score)
    return spec.FEWSHOT_BIN_LABELS[spec.equispaced_bin(score)]


def sample_by_bin(items: Sequence[Item], per_bin: int, *, seed: int = 0, scheme: str = "analysis") -> list[tuple[Item, str]]:
    """Up to `per_bin` items from each bin (fewer when a bin is smaller), bins in order, items by uid, drawn by
    `rank_key` (not the harness's `stratified_sample`, which draws rows of the lm-eval test split with numpy)."""
    if scheme not in BIN_SCHEMES:
        raise ValueError(f"unknown bin scheme {scheme!r}; expected one of {BIN_SCHEMES}")
    by_bin: dict[str, list[Item]] = {}
    for item in items:
        by_bin.setdefault(bin_of(item.score, scheme), []).append(item)
    out: list[tuple[Item, str]] = []
    for name in bin_names(scheme):
        pool = by_bin.get(name, [])
        chosen = sorted(pool, key=lambda it: rank_key(seed, "explain", name, it.uid))[: max(0, per_bin)]
        out.extend((it, name) for it in sorted(chosen, key=lambda it: it.uid))
    return out


def score_text(score: float) -> str:
    """The score as the model is told it: at most 3 decimals (the release's precision), no trailing zeros."""
    text = f"{round(score, 3):.3f}".rstrip("0").rstrip(".")
    return text or "0"


def build_explain_plan(sample: Sequence[tuple[Item, str]], model: str, sampling: Sampling, *, seed: int, scheme: str) -> RequestPlan:
    """One appendix A.4 request per sampled sentence; output rows carry uid, text, score, bin and the reason."""
    requests = []
    for item, name in sample:
        if not math.isfinite(item.score):
            raise ValueError(f"score of {item.uid} is not finite")
        body = {"model": model, "messages": reasoning_messages(item.text, score_text(item.score)), **sampling.params(EXPLAIN_MAX_TOKENS)}
        rid = request_id(body, ["explain", item.uid])
        fields = {"uid": item.uid, "text": item.text, "score": item.score, "bin": name}
        requests.append(Request(item.uid, rid, body, fields, {"template_version": TEMPLATE_VERSION}, "reason", one_line=False))
    counts: dict[str, int] = {}
    for _, name in sample:
        counts[name] = counts.get(name, 0) + 1
    summary = {
        "kind": "explain",
        "model": model,
        "instruction": REASONING_INSTRUCTION,
        "bins": scheme,
        "per_bin": counts,
        "seed": seed,
        "sampling": sampling.params(EXPLAIN_MAX_TOKENS),
        "template_version": TEMPLATE_VERSION,
        "requests": len(requests),
    }
    return RequestPlan(requests, summary)
