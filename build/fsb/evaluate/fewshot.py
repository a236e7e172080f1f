"""The rating tasks' data (`fsb`, `fsb_ll`, `fsb_upstream`): the fixed few-shot sets, the sentences every
variant scores, and the answers the examples show.

Protocol (Hada et al. 2023, section 6 and appendix A.3): a model rates each sentence's gender bias on
[0, 1] after 8 in-context examples, 2 from each of the 4 equispaced score bins [0, .25), [.25, .5),
[.5, .75), [.75, 1] (a score of 1.0 belongs to the top bin); 5 variants use 5 different fixed sets
and the group reports their mean. Here the 5 sets are disjoint and drawn with a fixed seed, every item
of a variant sees the same 8 examples in the same order, and every variant scores the same sentences:
all those not in any set, so no sentence is ever scored with itself among its examples.

Where the upstream scoring script (github microsoft/fifty-shades-of-bias, scripts/gpt_scoring.py) is
knowable, `fsb_protocol: upstream` follows it: the examples run bin by bin from low to high (the two of a
bin in the order they were drawn, not sorted by score). Where it is not: upstream drew its examples
unseeded (which ones it showed is unknown) and took their scores from a per-model column of a
`--queries_file` that was never released, so the precision and values of the scores it showed are
unknown; `upstream_score_text` shows the release file's normalised scores at full precision, a stand-in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec
from fsb.annotate.bwsprompt import N_BINS, SAMPLE_SEED, ProtocolError, fewshot_bin, random_sample, stratified_sample

__all__ = [
    "CHOICES",
    "FEWSHOT_SEED",
    "MAX_FEWSHOT",
    "N_SETS",
    "PER_BIN",
    "balanced_subset",
    "fewshot_sets",
    "load",
    "nearest_tenth",
    "score_text",
    "upstream_order",
    "upstream_score_text",
]

N_SETS = 5
PER_BIN = 2
MAX_FEWSHOT = N_BINS * PER_BIN  # 8: the size of one few-shot set
FEWSHOT_SEED = 1234
CHOICES = [f"{i / 10:.1f}" for i in range(11)]  # "0.0" .. "1.0", for the log-likelihood variant


def fewshot_sets(scores: Sequence[float], seed: int = FEWSHOT_SEED, n_sets: int = N_SETS, per_bin: int = PER_BIN) -> list[np.ndarray]:
    """`n_sets` disjoint few-shot sets of row indices, `per_bin` from each equispaced bin, in a shuffled order.

    One seeded permutation per bin is cut into consecutive slices, so the sets never overlap, and each
    set's order is shuffled so the examples do not run from low to high.

    Parameters
    ----------
    scores
        Every row's human score, in row order.
    seed, n_sets, per_bin
        The generator's seed, how many sets, and how many examples per bin in each.

    Returns
    -------
    list of numpy.ndarray
        The row indices of each set, in the order the examples are shown.
    """
    bins = fewshot_bin(np.asarray(scores))
    rng = np.random.default_rng(seed)
    perms = []
    for b in range(N_BINS):
        members = np.flatnonzero(bins == b)
        if members.size < n_sets * per_bin:
            raise ValueError(f"score bin {b} holds {members.size} sentences; {n_sets} sets of {per_bin} need {n_sets * per_bin}")
        perms.append(rng.permutation(members))
    return [rng.permutation(np.concatenate([p[k * per_bin : (k + 1) * per_bin] for p in perms])) for k in range(n_sets)]


def upstream_order(shots: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The examples in the upstream script's order: bin by bin from the lowest equispaced bin to the
    highest, the examples of one bin in the order they were drawn (upstream: `random.sample` per bin;
    the bins are not sorted inside, so this is not a sort by score)."""
    return shots[np.argsort(fewshot_bin(scores[shots]), kind="stable")]


def balanced_subset(bins: Sequence[int], k: int) -> list[int]:
    """Positions of `k` of the examples whose bins are `bins`, as balanced over the bins as k allows.

    Counts differ by at most 1 and the examples keep their original order: bins take turns in the order
    of their first example, each giving its next example. k = len(bins) keeps every example in order.

    Parameters
    ----------
    bins
        The bin of each example of a set, in the order shown.
    k
        How many to keep (lm-eval's --num_fewshot).

    Returns
    -------
    list of int
        The kept positions, sorted.
    """
    if not 0 <= k <= len(bins):
        raise ProtocolError(
            f"--num_fewshot {k}: a Fifty Shades of Bias few-shot set holds {len(bins)} examples "
            f"({PER_BIN} per score bin); use 0 to {len(bins)}"
        )
    queues: dict[int, list[int]] = {}
    for pos, b in enumerate(bins):
        queues.setdefault(int(b), []).append(pos)
    picked: list[int] = []
    while len(picked) < k:
        for queue in queues.values():
            if queue and len(picked) < k:
                picked.append(queue.pop(0))
    return sorted(picked)


def load(
    fewshot_set: int | None = None,
    fsb_dataset: str | None = None,
    fsb_per_bin: int | None = None,
    fsb_sample: int | None = None,
    fsb_fewshot_seed: int = FEWSHOT_SEED,
    fsb_sample_seed: int = SAMPLE_SEED,
    fsb_protocol: str = "fsb",
    **_: Any,
) -> Any:
    """The rating task's DatasetDict (lm-eval's `custom_dataset`).

    lm-eval calls this with the task's `dataset_kwargs` and the run's metadata (which also carries the
    model arguments, hence **_). `fsb_*` keys come from `--metadata '{"fsb_dataset": ...}'`.

    Parameters
    ----------
    fewshot_set
        Which of the 5 sets gives the "fewshot" split (None: zero-shot, no such split).
    fsb_dataset
        A dataset folder or Hub repo id (default: fifty_shades_of_bias's order).
    fsb_per_bin, fsb_sample, fsb_sample_seed
        A stratified sample of `fsb_per_bin` sentences per bin or a simple random sample of `fsb_sample`.
    fsb_fewshot_seed
        The seed of the few-shot sets.
    fsb_protocol
        "upstream" orders the examples as the upstream script did (`upstream_order`).

    Returns
    -------
    datasets.DatasetDict
        "test" (the sentences outside every few-shot set, or the sample) and "fewshot" (the set's 8
        examples, in order); its `fsb_source` names the dataset (path, fingerprint) and the sample.
    """
    import datasets

    if fsb_per_bin is not None and fsb_sample is not None:
        raise ProtocolError("give fsb_sample (a simple random sample) or fsb_per_bin (a stratified one), not both")
    located = spec.locate(fsb_dataset)
    rows = datasets.load_dataset(located, "default")["test"]
    rows = rows.select(np.argsort(np.asarray(rows["id"]), kind="stable").tolist())  # row order = id order
    scores = np.asarray(rows["score"], dtype=float)
    sets = fewshot_sets(scores, seed=int(fsb_fewshot_seed))
    in_sets = np.zeros(scores.size, dtype=bool)
    in_sets[np.concatenate(sets)] = True
    pool = np.flatnonzero(~in_sets)
    sample = f"all {pool.size} sentences outside the few-shot sets"
    if fsb_per_bin is not None:
        pool = stratified_sample(scores, pool, int(fsb_per_bin), seed=int(fsb_sample_seed))
        sample = f"stratified: {int(fsb_per_bin)} per equispaced bin (seed {int(fsb_sample_seed)}); inflates correlations vs the full set"
    elif fsb_sample is not None:
        pool = random_sample(pool, int(fsb_sample), seed=int(fsb_sample_seed))
        sample = f"simple random sample of {pool.size} (seed {int(fsb_sample_seed)})"
    splits = {"test": rows.select(pool.tolist())}
    if fewshot_set is not None:
        shots = sets[int(fewshot_set)]
        if fsb_protocol == "upstream":
            shots = upstream_order(shots, scores)
        splits["fewshot"] = rows.select(shots.tolist())
    out = datasets.DatasetDict(splits)
    out.fsb_source = {**spec.provenance(located), "sample": sample, "fewshot_seed": int(fsb_fewshot_seed)}
    return out


def score_text(doc: dict[str, Any]) -> str:
    """A few-shot example's answer: its human score to 2 decimals."""
    return f"{doc['score']:.2f}"


def upstream_score_text(doc: dict[str, Any]) -> str:
    """A few-shot example's answer in the upstream framing: the release file's normalised score at full
    precision, (round(score_raw, 3) + 1) / 2 printed as Python prints it ("0.9775", "0.16649999999999998").

    This is a stand-in, not upstream's value: the upstream script read the example scores from a
    per-model column of a file it was given (`--queries_file`, never released), so what precision and
    which values the published runs showed is not knowable from the release."""
    return str((round(float(doc["score_raw"]), 3) + 1) / 2)


def nearest_tenth(doc: dict[str, Any]) -> int:
    """Index in CHOICES of the tenth nearest the human score (the log-likelihood variant's example answers).

    Halves round up (0.25 -> "0.3", 0.35 -> "0.4"), not to even as round() would; the small epsilon
    keeps a score such as 0.35 (0.3499999... in floating point) a tie.
    """
    return math.floor(doc["score"] * 10 + 0.5 + 1e-9)
