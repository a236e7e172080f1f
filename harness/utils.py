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
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec
from fsb.errors import FsbError

N_SETS = 5
PER_BIN = 2
N_BINS = len(spec.FEWSHOT_BIN_EDGES) + 1
MAX_FEWSHOT = N_BINS * PER_BIN  # 8: the size of one few-shot set
FEWSHOT_SEED = 1234
SAMPLE_SEED = 0
CHOICES = [f"{i / 10:.1f}" for i in range(11)]  # "0.0" .. "1.0", for the log-likelihood variant
_CHOICE_VALUES = np.array([i / 10 for i in range(11)])
# A bare number and nothing else on the first non-empty line: "0.45", ".5", "1", "1.0". ASCII digits
# only, and digits after a point: "1." is a list marker ("1. The most biased ..."), not a score.
_NUMBER = re.compile(r"\+?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)")


class ProtocolError(FsbError, ValueError):
    """A run the protocol cannot give: too many few-shot examples, a chat variant without chat turns,
    a request cache that holds other sentences."""


# --- data ------------------------------------------------------------------------------------------


def fewshot_bin(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """Equispaced bin 0..3 of each score in [0, 1] (fifty_shades_of_bias's bins); 1.0 falls in bin 3
    (the upstream `< end` test dropped it)."""
    return spec.bin_codes(scores, spec.FEWSHOT_BIN_EDGES)


def fewshot_sets(scores: Sequence[float], seed: int = FEWSHOT_SEED, n_sets: int = N_SETS, per_bin: int = PER_BIN) -> list[np.ndarray]:
    """`n_sets` disjoint few-shot sets of row indices, `per_bin` from each equispaced bin, in a shuffled order.

    One seeded permutation per bin is cut into consecutive slices, so the sets never overlap, and each
    set's order is shuffled so the examples do not run from low to high.
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


def balanced_subset(bins: Sequence[int], k: int) -> list[int]:
    """Positions of `k` of the examples whose bins are `bins`, as balanced over the bins as k allows
    (counts differ by at most 1), kept in their original order: bins take turns in the order of their
    first example, each giving its next example. k = len(bins) keeps every example in order."""
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


def stratified_sample(scores: Sequence[float], pool: np.ndarray, per_bin: int, seed: int = SAMPLE_SEED) -> np.ndarray:
    """`per_bin` rows of `pool` from each equispaced bin (all of a bin if it has fewer), sorted.

    Equal counts per bin over-represent the thin extreme bins relative to the dataset, which spreads
    the human scores and inflates correlations relative to the full protocol: prefer `random_sample`.
    """
    bins = fewshot_bin(np.asarray(scores)[pool])
    rng = np.random.default_rng(seed)
    picked = [rng.permutation(pool[bins == b])[:per_bin] for b in range(N_BINS)]
    return np.sort(np.concatenate(picked))


def random_sample(pool: np.ndarray, size: int, seed: int = SAMPLE_SEED) -> np.ndarray:
    """A simple random sample (without replacement, seeded) of `size` rows of `pool` (all if fewer), sorted:
    its figures estimate the full protocol's without the stratified sample's bias."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.permutation(pool)[:size])


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
    """The task's DatasetDict: "test" (sentences outside every few-shot set; optionally a simple random
    sample of `fsb_sample` sentences or a stratified one of `fsb_per_bin` per bin) and, for a few-shot
    variant, "fewshot" (its 8 examples, in order: shuffled, or low to high for `fsb_protocol: upstream`).

    lm-eval calls this with the task's `dataset_kwargs` and the run's metadata (which also carries the
    model arguments, hence **_). `fsb_*` keys come from `--metadata '{"fsb_dataset": ...}'`. The dataset
    is found in fifty_shades_of_bias's one order; the returned dict's `fsb_source` names it (path,
    fingerprint, sample), and FsbTask records that in the run's results.
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
        if fsb_protocol == "upstream":  # the upstream script showed its examples from low to high
            shots = shots[np.argsort(scores[shots], kind="stable")]
        splits["fewshot"] = rows.select(shots.tolist())
    out = datasets.DatasetDict(splits)
    out.fsb_source = {**spec.provenance(located), "sample": sample, "fewshot_seed": int(fsb_fewshot_seed)}
    return out


# --- prompts ---------------------------------------------------------------------------------------


def score_text(doc: dict[str, Any]) -> str:
    """A few-shot example's answer: its human score to 2 decimals."""
    return f"{doc['score']:.2f}"


def upstream_score_text(doc: dict[str, Any]) -> str:
    """A few-shot example's answer as the upstream script showed it: the release file's normalised score
    at full precision, (round(score_raw, 3) + 1) / 2 printed as Python prints it ("0.9775",
    "0.16649999999999998": the release's own float noise, kept so the prompts match upstream's)."""
    return str((round(float(doc["score_raw"]), 3) + 1) / 2)


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


# --- the task class and the few-shot sampler (built on first use: importing lm-eval costs seconds) --


def _sampler_class() -> type:
    from lm_eval.api.samplers import FirstNSampler

    class FsbSampler(FirstNSampler):
        """The first k of a variant's fixed examples, balanced over the score bins when k < 8
        (`balanced_subset`); k > 8 is an error, not lm-eval's AssertionError."""

        def sample(self, n: int, eval_doc: Any = None, df: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
            pool = list(df or self.df)
            return [pool[i] for i in balanced_subset(fewshot_bin([float(d["score"]) for d in pool]).tolist(), n)]

    return FsbSampler


def _task_class() -> type:
    import logging

    from lm_eval.api.task import ConfigurableTask

    log = logging.getLogger("lm_eval.tasks.fsb")

    class FsbTask(ConfigurableTask):
        """lm-eval's ConfigurableTask with three additions: the dataset it read (path, fingerprint,
        sample) is recorded in the task's config, hence in results_*.json (`dataset_path` and
        `metadata.fsb_source`); a request cache (`--cache_requests true`) built for other sentences,
        another dataset or other few-shot examples is detected and rebuilt, never paired by position
        with this run's sentences; the upstream chat variant refuses to run without chat turns."""

        def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
            super().__init__(config={k: v for k, v in (config or {}).items() if k != "class"}, **kwargs)

        def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
            # lm-eval's own download warns on every task that custom datasets take --metadata: noise here.
            self.dataset = self.config.custom_dataset(**(self.config.metadata or {}), **(self.config.dataset_kwargs or {}))
            source = getattr(self.dataset, "fsb_source", None)
            if source:
                self.config.metadata = {**(self.config.metadata or {}), "fsb_source": source}
                self.config.dataset_path = source["path"]

        def build_all_requests(self, **kwargs: Any) -> None:
            k = self.config.num_fewshot or 0
            if k > MAX_FEWSHOT:
                balanced_subset([0] * MAX_FEWSHOT, k)  # raises the one-line error
            protocol = (self.config.dataset_kwargs or {}).get("fsb_protocol")
            if protocol == "upstream" and k and not (kwargs.get("apply_chat_template") and kwargs.get("fewshot_as_multiturn")):
                raise ProtocolError(
                    f"{self.config.task} follows the upstream script's chat turns: run it with --apply_chat_template --fewshot_as_multiturn"
                )
            super().build_all_requests(**kwargs)
            if kwargs.get("cache_requests") and not kwargs.get("rewrite_requests_cache"):
                stale = self._stale_requests(kwargs)
                if stale:
                    log.warning("%s: the request cache does not match this run (%s); rebuilding it", self.config.task, stale)
                    super().build_all_requests(**{**kwargs, "rewrite_requests_cache": True})
                    if self._stale_requests(kwargs):
                        raise ProtocolError(f"{self.config.task}: rebuilt requests still do not match the sentences ({stale})")

        def _stale_requests(self, kwargs: dict[str, Any]) -> str | None:
            """Why the built or cached requests do not belong to this run's sentences, or None."""
            docs = self.eval_docs
            where = {"rank": kwargs.get("rank", 0), "world_size": kwargs.get("world_size", 1)}
            wanted = [i for i, _ in self.doc_iterator(limit=kwargs.get("limit"), samples=kwargs.get("samples"), **where)]
            seen: set[int] = set()
            for inst in self._instances:
                i = inst.doc_id
                if i >= len(docs) or inst.doc != docs[i]:
                    now = docs[i]["id"] if i < len(docs) else "none"
                    return f"the request for item {i} is for sentence id {inst.doc.get('id')}, not {now}"
                seen.add(i)
            if missing := set(wanted) - seen:
                return f"no request for {len(missing)} of the {len(wanted)} sentences"
            first = self._instances[0]
            ctx = self.fewshot_context(
                first.doc,
                num_fewshot=self.config.num_fewshot or 0,
                system_instruction=kwargs.get("system_instruction"),
                apply_chat_template=kwargs.get("apply_chat_template", False),
                fewshot_as_multiturn=kwargs.get("fewshot_as_multiturn", False),
                chat_template=kwargs.get("chat_template"),
                gen_prefix=self.doc_to_prefix(first.doc),
            )
            if ctx != first.arguments[0]:
                return "the prompts differ (other few-shot examples or instructions)"
            return None

    return FsbTask


def __getattr__(name: str) -> Any:
    """`!function utils.FsbTask` and `utils.FsbSampler` in the YAML files: the classes subclass lm-eval's,
    so they are built on first access (fsb report loads this module without lm-eval)."""
    if name == "FsbTask":
        return _cached("FsbTask", _task_class)
    if name == "FsbSampler":
        return _cached("FsbSampler", _sampler_class)
    raise AttributeError(name)


def _cached(name: str, make: Any) -> type:
    cls = globals().get(f"_{name}")
    if cls is None:
        cls = globals()[f"_{name}"] = make()
    return cls
