"""The best-worst protocol shared by the lm-eval tasks (`fsb_bws`, `fsb_bws_ll`) and `fsb annotate llm`:
the prompt, the rotations a tuple is shown in, the strict answer parser, the judged tuples of a dataset
and the seeded row samples both task families draw.

It sits below `evaluate/` (which imports it for the metrics and the lm-eval adapter) so that the LLM
annotator and the harness read one definition and cannot drift apart. Each document is one judged
4-tuple of the `annotations` config, shown in every rotation of `bws_rotations()` (cyclic shift k:
display position p, 0-based, holds items[(p + k) % 4], items in the order the first annotator saw them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec
from fsb.core.errors import FsbError

__all__ = [
    "BWS_LABELS",
    "BWS_PROMPT",
    "BWS_QUESTIONS",
    "BWS_ROTATIONS",
    "BWS_SIZE",
    "N_BINS",
    "SAMPLE_SEED",
    "ProtocolError",
    "bws_prompt",
    "bws_rotations",
    "bws_target",
    "bws_tuples",
    "fewshot_bin",
    "load_bws",
    "majority",
    "parse_bws",
    "random_sample",
    "rotate",
    "stratified_sample",
]

SAMPLE_SEED = 0
N_BINS = len(spec.FEWSHOT_BIN_EDGES) + 1  # the 4 equispaced score bins
BWS_SIZE = spec.TUPLE_SIZE
BWS_ROTATIONS = (0, 2)
BWS_LABELS = tuple(str(p) for p in range(1, BWS_SIZE + 1))  # "1" .. "4": the answer names a display position
BWS_QUESTIONS = ("Most", "Least")
BWS_PROMPT = (
    "Which of these four sentences is the most negatively biased against a gender, and which is the least "
    "negatively biased against a gender?\n\n{sentences}\n\n"
    "Answer with the numbers of the two sentences, in this format and nothing else:\nMost: N\nLeast: M\n\n"
)
# Strict: the first non-empty line is exactly "Most: N" and the next non-empty line "Least: M" (N, M in
# 1..4, N != M; spaces around the number allowed). Anything else is unparsed, counted, never imputed.
_BWS_LINE = {q: re.compile(rf"{q}:[ \t]*([1-{BWS_SIZE}])") for q in BWS_QUESTIONS}


class ProtocolError(FsbError, ValueError):
    """A run the protocol cannot give: too many few-shot examples, a chat variant without chat turns,
    a request cache that holds other sentences, bad rotations or sample options."""


# --- seeded samples of rows (both task families) ----------------------------------------------------


def fewshot_bin(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """Equispaced bin 0..3 of each score in [0, 1] (fifty_shades_of_bias's bins).

    Parameters
    ----------
    scores
        Scores in [0, 1].

    Returns
    -------
    numpy.ndarray
        The bin code of each score; 1.0 falls in bin 3 (the upstream script's `< end` test dropped it).
    """
    return spec.bin_codes(scores, spec.FEWSHOT_BIN_EDGES)


def stratified_sample(scores: Sequence[float], pool: np.ndarray, per_bin: int, seed: int = SAMPLE_SEED) -> np.ndarray:
    """`per_bin` rows of `pool` from each equispaced bin (all of a bin if it has fewer), sorted.

    Equal counts per bin over-represent the thin extreme bins relative to the dataset, which spreads
    the human scores and inflates correlations relative to the full protocol: prefer `random_sample`.

    Parameters
    ----------
    scores
        The score of every row (indexed by the row numbers in `pool`).
    pool
        The row numbers to draw from.
    per_bin
        Rows to draw per bin.
    seed
        The generator's seed.

    Returns
    -------
    numpy.ndarray
        The drawn row numbers, sorted.
    """
    bins = fewshot_bin(np.asarray(scores)[pool])
    rng = np.random.default_rng(seed)
    picked = [rng.permutation(pool[bins == b])[:per_bin] for b in range(N_BINS)]
    return np.sort(np.concatenate(picked))


def random_sample(pool: np.ndarray, size: int, seed: int = SAMPLE_SEED) -> np.ndarray:
    """A simple random sample (without replacement, seeded) of `size` rows of `pool` (all if fewer), sorted:
    its figures estimate the full protocol's without the stratified sample's bias.

    Parameters
    ----------
    pool
        The row numbers to draw from.
    size
        How many to draw.
    seed
        The generator's seed.

    Returns
    -------
    numpy.ndarray
        The drawn row numbers, sorted.
    """
    rng = np.random.default_rng(seed)
    return np.sort(rng.permutation(pool)[:size])


# --- the best-worst protocol --------------------------------------------------------------------------


def bws_rotations(value: Any = None) -> tuple[int, ...]:
    """The cyclic shifts to present each tuple in.

    Parameters
    ----------
    value
        The `fsb_bws_rotations` metadata key ("0,2" or a list); else $FSB_BWS_ROTATIONS is read.

    Returns
    -------
    tuple of int
        The distinct shifts; (0, 2) by default, which shows every item in two positions two apart.
    """
    raw = value if value is not None else os.environ.get("FSB_BWS_ROTATIONS")
    if raw is None or raw == "":
        return BWS_ROTATIONS
    parts = raw.split(",") if isinstance(raw, str) else list(raw) if isinstance(raw, (list, tuple)) else [raw]
    try:
        shifts = tuple(int(str(p).strip()) for p in parts)
    except ValueError:
        raise ProtocolError(f"fsb_bws_rotations {raw!r}: give distinct shifts 0..{BWS_SIZE - 1}, e.g. 0,2") from None
    if not shifts or len(set(shifts)) != len(shifts) or not all(0 <= s < BWS_SIZE for s in shifts):
        raise ProtocolError(f"fsb_bws_rotations {raw!r}: give distinct shifts 0..{BWS_SIZE - 1}, e.g. 0,2")
    return shifts


def rotate(values: Sequence[Any], shift: int) -> list[Any]:
    """`values` as shown under cyclic shift `shift`: display position p holds values[(p + shift) % k]."""
    k = len(values)
    return [values[(p + shift) % k] for p in range(k)]


def majority(items: Sequence[int], chosen: Sequence[int]) -> list[int]:
    """The items of a tuple chosen most often in `chosen` (the human majority; ties keep every tied item),
    in the tuple's order."""
    counts = {i: 0 for i in items}
    for c in chosen:
        counts[int(c)] += 1
    top = max(counts.values())
    return [i for i in items if counts[i] == top]


def bws_tuples(annotations: Any, scores: dict[int, float], texts: dict[int, str]) -> list[dict[str, Any]]:
    """One document per distinct judged tuple, in tuple_id order.

    Parameters
    ----------
    annotations
        The `annotations` config's columns (`tuple_id`, `items`, `best`, `worst`).
    scores, texts
        The human score and the text of each sentence id.

    Returns
    -------
    list of dict
        Per tuple: its items (in the first annotator's order), texts, human scores, the human majority's
        best and worst (ties keep every tied item) and the number of judgments.
    """
    groups: dict[int, dict[str, Any]] = {}
    for tid, items, best, worst in zip(annotations["tuple_id"], annotations["items"], annotations["best"], annotations["worst"]):
        g = groups.setdefault(int(tid), {"items": [int(i) for i in items], "best": [], "worst": []})
        g["best"].append(int(best))
        g["worst"].append(int(worst))
    docs = []
    for tid in sorted(groups):
        g = groups[tid]
        docs.append(
            {
                "tuple_id": tid,
                "items": g["items"],
                "texts": [texts[i] for i in g["items"]],
                "scores": [float(scores[i]) for i in g["items"]],
                "majority_best": majority(g["items"], g["best"]),
                "majority_worst": majority(g["items"], g["worst"]),
                "n_judgments": len(g["best"]),
            }
        )
    return docs


def load_bws(
    fsb_dataset: str | None = None,
    fsb_per_bin: int | None = None,
    fsb_sample: int | None = None,
    fsb_sample_seed: int = SAMPLE_SEED,
    fsb_bws_rotations: Any = None,
    **_: Any,
) -> Any:
    """The best-worst tasks' DatasetDict (lm-eval's `custom_dataset`; the model arguments arrive in **_).

    Parameters
    ----------
    fsb_dataset
        A dataset folder or Hub repo id (default: fifty_shades_of_bias's order).
    fsb_per_bin, fsb_sample, fsb_sample_seed
        A stratified sample (`fsb_per_bin` tuples per equispaced bin of the tuple's mean human score) or a
        simple random sample of `fsb_sample` TUPLES, seeded; neither: all judged tuples.
    fsb_bws_rotations
        The rotations (see `bws_rotations`).

    Returns
    -------
    datasets.DatasetDict
        "test" holds the chosen tuples, each with the rotations it is shown in; `fsb_source` names the
        dataset, the sample and the rotations.
    """
    import datasets

    if fsb_per_bin is not None and fsb_sample is not None:
        raise ProtocolError("give fsb_sample (a simple random sample) or fsb_per_bin (a stratified one), not both")
    shifts = bws_rotations(fsb_bws_rotations)
    located = spec.locate(fsb_dataset)
    rows = datasets.load_dataset(located, "default")["test"]
    ann = datasets.load_dataset(located, "annotations")["test"]
    docs = bws_tuples(ann, dict(zip(rows["id"], rows["score"])), dict(zip(rows["id"], rows["text"])))
    pool = np.arange(len(docs))
    sample = f"all {len(docs)} judged tuples"
    if fsb_per_bin is not None:
        means = np.asarray([np.mean(d["scores"]) for d in docs])
        pool = stratified_sample(means, pool, int(fsb_per_bin), seed=int(fsb_sample_seed))
        sample = f"stratified: {int(fsb_per_bin)} tuples per equispaced bin of the tuple's mean score (seed {int(fsb_sample_seed)})"
    elif fsb_sample is not None:
        pool = random_sample(pool, int(fsb_sample), seed=int(fsb_sample_seed))
        sample = f"simple random sample of {pool.size} of {len(docs)} tuples (seed {int(fsb_sample_seed)})"
    chosen = [{**docs[i], "rotations": list(shifts)} for i in pool.tolist()]
    out = datasets.DatasetDict({"test": datasets.Dataset.from_list(chosen)})
    out.fsb_source = {**spec.provenance(located), "sample": sample, "rotations": list(shifts)}
    return out


def bws_prompt(doc: dict[str, Any]) -> str:
    """The question for one presentation: the four sentences numbered 1..4 in the order of `doc["shift"]`
    (default: the doc's first rotation), then the answer format."""
    shift = int(doc.get("shift", doc["rotations"][0]))
    lines = "\n".join(f"{p}. {t}" for p, t in enumerate(rotate(doc["texts"], shift), 1))
    return BWS_PROMPT.format(sentences=lines)


def bws_target(doc: dict[str, Any]) -> str:
    """The human majority's answer for the first presentation (first tied item); shown nowhere (zero-shot)."""
    shown = rotate(doc["items"], int(doc["rotations"][0]))
    return f"Most: {shown.index(doc['majority_best'][0]) + 1}\nLeast: {shown.index(doc['majority_worst'][0]) + 1}"


def parse_bws(text: str) -> tuple[int, int] | None:
    """(most, least) display positions 1..4 from an answer "Most: N\\nLeast: M", or None (N = M included).

    Parameters
    ----------
    text
        The model's answer; blank lines and surrounding spaces are ignored.

    Returns
    -------
    tuple of int or None
        The two positions, or None when the first two non-empty lines are not exactly that format.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    found = [_BWS_LINE[q].fullmatch(line) for q, line in zip(BWS_QUESTIONS, lines)]
    if not all(found):
        return None
    most, least = (int(m.group(1)) for m in found if m is not None)
    return (most, least) if most != least else None
