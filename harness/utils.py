"""Fifty Shades of Bias tasks for lm-evaluation-harness: data loading, fixed few-shot sets, strict
parsing of scores, and corpus-level metrics.

Protocol (Hada et al. 2023, section 6 and appendix A.3): a model rates each sentence's gender bias on
[0, 1] after 8 in-context examples, 2 from each of the 4 equispaced score bins [0, .25), [.25, .5),
[.5, .75), [.75, 1] (a score of 1.0 belongs to the top bin); 5 variants use 5 different fixed sets
and the group reports their mean. Here the 5 sets are disjoint and drawn with a fixed seed, every item
of a variant sees the same 8 examples in the same order, and every variant scores the same sentences:
all those not in any set, so no sentence is ever scored with itself among its examples.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

N_SETS = 5
PER_BIN = 2
FEWSHOT_BIN_EDGES = (0.25, 0.5, 0.75)
FEWSHOT_SEED = 1234
SAMPLE_SEED = 0
CHOICES = [f"{i / 10:.1f}" for i in range(11)]  # "0.0" .. "1.0", for the log-likelihood variant
_CHOICE_VALUES = np.array([i / 10 for i in range(11)])
# A bare number and nothing else on the first non-empty line: "0.45", ".5", "1", "1.0". ASCII digits
# only, and digits after a point: "1." is a list marker ("1. The most biased ..."), not a score.
_NUMBER = re.compile(r"\+?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)")


# --- data ------------------------------------------------------------------------------------------


def _locate(source: str | None) -> str:
    """Where the dataset is: `source` (metadata `fsb_dataset`), else what `fifty_shades_of_bias.locate()`
    finds ($FSB_DATASET, the last `fsb build`, ./fifty_shades_of_bias), else $FSB_DATASET alone."""
    try:
        import fifty_shades_of_bias
    except ImportError:
        found = source or os.environ.get("FSB_DATASET")
        if not found:
            raise FileNotFoundError(
                "No Fifty Shades of Bias dataset: set FSB_DATASET to a dataset folder or a Hub repo id "
                '(org/name), or pass --metadata \'{"fsb_dataset": "..."}\' to lm_eval.'
            ) from None
        return found
    return fifty_shades_of_bias.locate(source)


def fewshot_bin(scores: np.ndarray) -> np.ndarray:
    """Equispaced bin 0..3 of each score in [0, 1]; 1.0 falls in bin 3 (the upstream `< end` test dropped it)."""
    return np.searchsorted(np.asarray(FEWSHOT_BIN_EDGES), np.asarray(scores, dtype=float), side="right")


def fewshot_sets(scores: Sequence[float], seed: int = FEWSHOT_SEED, n_sets: int = N_SETS, per_bin: int = PER_BIN) -> list[np.ndarray]:
    """`n_sets` disjoint few-shot sets of row indices, `per_bin` from each equispaced bin, in a shuffled order.

    One seeded permutation per bin is cut into consecutive slices, so the sets never overlap, and each
    set's order is shuffled so the examples do not run from low to high.
    """
    bins = fewshot_bin(np.asarray(scores))
    rng = np.random.default_rng(seed)
    perms = []
    for b in range(len(FEWSHOT_BIN_EDGES) + 1):
        members = np.flatnonzero(bins == b)
        if members.size < n_sets * per_bin:
            raise ValueError(f"score bin {b} holds {members.size} sentences; {n_sets} sets of {per_bin} need {n_sets * per_bin}")
        perms.append(rng.permutation(members))
    return [rng.permutation(np.concatenate([p[k * per_bin : (k + 1) * per_bin] for p in perms])) for k in range(n_sets)]


def stratified_sample(scores: Sequence[float], pool: np.ndarray, per_bin: int, seed: int = SAMPLE_SEED) -> np.ndarray:
    """`per_bin` rows of `pool` from each equispaced bin (all of a bin if it has fewer), sorted."""
    bins = fewshot_bin(np.asarray(scores)[pool])
    rng = np.random.default_rng(seed)
    picked = [rng.permutation(pool[bins == b])[:per_bin] for b in range(len(FEWSHOT_BIN_EDGES) + 1)]
    return np.sort(np.concatenate(picked))


def load(
    fewshot_set: int | None = None,
    fsb_dataset: str | None = None,
    fsb_per_bin: int | None = None,
    fsb_fewshot_seed: int = FEWSHOT_SEED,
    fsb_sample_seed: int = SAMPLE_SEED,
    **_: Any,
) -> Any:
    """The task's DatasetDict: "test" (sentences outside every few-shot set, optionally a stratified
    sample of `fsb_per_bin` per bin) and, for a few-shot variant, "fewshot" (its 8 examples, in order).

    lm-eval calls this with the task's `dataset_kwargs` and the run's metadata (which also carries the
    model arguments, hence **_). `fsb_*` keys come from `--metadata '{"fsb_dataset": ...}'`.
    """
    import datasets

    rows = datasets.load_dataset(_locate(fsb_dataset), "default")["test"]
    rows = rows.select(np.argsort(np.asarray(rows["id"]), kind="stable").tolist())  # row order = id order
    scores = np.asarray(rows["score"], dtype=float)
    sets = fewshot_sets(scores, seed=int(fsb_fewshot_seed))
    in_sets = np.zeros(scores.size, dtype=bool)
    in_sets[np.concatenate(sets)] = True
    pool = np.flatnonzero(~in_sets)
    if fsb_per_bin is not None:
        pool = stratified_sample(scores, pool, int(fsb_per_bin), seed=int(fsb_sample_seed))
    splits = {"test": rows.select(pool.tolist())}
    if fewshot_set is not None:
        splits["fewshot"] = rows.select(sets[int(fewshot_set)].tolist())
    return datasets.DatasetDict(splits)


# --- prompts ---------------------------------------------------------------------------------------


def score_text(doc: dict[str, Any]) -> str:
    """A few-shot example's answer: its human score to 2 decimals."""
    return f"{doc['score']:.2f}"


def nearest_tenth(doc: dict[str, Any]) -> int:
    """Index in CHOICES of the tenth nearest the human score (the log-likelihood variant's example answers).

    Halves round up (0.25 -> "0.3", 0.35 -> "0.4"), not to even as round() would; the small epsilon
    keeps a score such as 0.35 (0.3499999... in floating point) a tie.
    """
    return math.floor(doc["score"] * 10 + 0.5 + 1e-9)


# --- parsing and per-item results -----------------------------------------------------------------


def parse_score(text: str) -> float | None:
    """The score in a model's answer, or None: the first non-empty line must be a bare number in [0, 1].

    Strict on purpose: a loose regex would read list markers ("1. The most biased ...") as scores.
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
    """Per item: (prediction or None, gold) for the corpus-level metrics, and whether the answer parsed.

    An answer that does not parse is never replaced by a made-up score: it is left out of pearson,
    spearman and mse, and counts as 0 in parse_rate.
    """
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


# --- corpus-level aggregations ----------------------------------------------------------------------


def _parsed(items: Sequence[tuple[float | None, float]]) -> tuple[np.ndarray, np.ndarray]:
    kept = [(p, g) for p, g in items if p is not None]
    if not kept:
        return np.empty(0), np.empty(0)
    preds, golds = zip(*kept)
    return np.asarray(preds, dtype=float), np.asarray(golds, dtype=float)


def _correlation(items: Sequence[tuple[float | None, float]], kind: str) -> float:
    import scipy.stats

    preds, golds = _parsed(items)
    if preds.size < 2 or np.ptp(preds) == 0 or np.ptp(golds) == 0:
        return math.nan  # undefined, not 0: a constant answer carries no ranking
    fn = scipy.stats.pearsonr if kind == "pearson" else scipy.stats.spearmanr
    return float(fn(preds, golds)[0])


def pearson(items: Sequence[tuple[float | None, float]]) -> float:
    """Pearson's r between predictions and human scores over the items whose answer parsed."""
    return _correlation(items, "pearson")


def spearman(items: Sequence[tuple[float | None, float]]) -> float:
    """Spearman's rho between predictions and human scores over the items whose answer parsed."""
    return _correlation(items, "spearman")


def mse(items: Sequence[tuple[float | None, float]]) -> float:
    """Mean squared error (1/n) sum (pred - gold)^2 over the items whose answer parsed."""
    preds, golds = _parsed(items)
    return float(np.mean((preds - golds) ** 2)) if preds.size else math.nan
