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
from fsb.core.errors import FsbError

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
            if self._first_argument(first.doc, kwargs) != first.arguments[0]:
                return "the prompts differ (other few-shot examples or instructions)"
            return None

        def _first_argument(self, doc: dict[str, Any], kwargs: dict[str, Any]) -> Any:
            """The first request's first argument (its prompt) for `doc`, freshly built."""
            return self.fewshot_context(
                doc,
                num_fewshot=self.config.num_fewshot or 0,
                system_instruction=kwargs.get("system_instruction"),
                apply_chat_template=kwargs.get("apply_chat_template", False),
                fewshot_as_multiturn=kwargs.get("fewshot_as_multiturn", False),
                chat_template=kwargs.get("chat_template"),
                gen_prefix=self.doc_to_prefix(doc),
            )

    return FsbTask


def __getattr__(name: str) -> Any:
    """`!function utils.FsbTask` and `utils.FsbSampler` in the YAML files: the classes subclass lm-eval's,
    so they are built on first access (fsb report loads this module without lm-eval)."""
    if name == "FsbTask":
        return _cached("FsbTask", _task_class)
    if name == "FsbSampler":
        return _cached("FsbSampler", _sampler_class)
    if name == "FsbBwsTask":
        return _cached("FsbBwsTask", _bws_task_class)
    raise AttributeError(name)


def _cached(name: str, make: Any) -> type:
    cls = globals().get(f"_{name}")
    if cls is None:
        cls = globals()[f"_{name}"] = make()
    return cls


# --- best-worst scaling: the comparative test the annotators took (fsb_bws, fsb_bws_ll) -------------
# Each document is one judged 4-tuple of the `annotations` config, shown to the model in every rotation
# of BWS_ROTATIONS (cyclic shift k: display position p, 0-based, holds items[(p + k) % 4], items in the
# order the first annotator saw them). The model answers which sentence is the most and which the least
# negatively biased; its choices over all presentations are scored by counting, as the human judgments
# are, and correlated with the human scores.

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


def bws_rotations(value: Any = None) -> tuple[int, ...]:
    """The cyclic shifts to present each tuple in: `value` (the `fsb_bws_rotations` metadata key, "0,2" or
    a list), else $FSB_BWS_ROTATIONS, else (0, 2), which shows every item in two positions two apart."""
    import os

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
    """One document per distinct judged tuple of the `annotations` config, in tuple_id order: its items
    (in the first annotator's order), texts, human scores, the human majority's best and worst, and the
    number of judgments."""
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
    """The best-worst tasks' DatasetDict: "test" holds the distinct judged tuples (all 2000 of the release,
    or a simple random sample of `fsb_sample` TUPLES, or `fsb_per_bin` tuples per equispaced bin of the
    tuple's mean human score), each with the rotations it is shown in (`bws_rotations`)."""
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
    """(most, least) display positions 1..4 from an answer "Most: N\\nLeast: M", or None (N = M included)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    found = [_BWS_LINE[q].fullmatch(line) for q, line in zip(BWS_QUESTIONS, lines)]
    if not all(found):
        return None
    most, least = (int(m.group(1)) for m in found if m is not None)
    return (most, least) if most != least else None


def _bws_record(doc: dict[str, Any], picks: Sequence[tuple[int, int] | None]) -> dict[str, Any]:
    """The per-tuple value every best-worst metric aggregates: the tuple, its human side, and per
    presentation the shift, the chosen display positions and the items they hold (None: unparsed)."""
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


BWS_METRICS = (
    "pearson",
    "spearman",
    "best_agreement",
    "worst_agreement",
    "parse_rate",
    *(f"{q}_position_{p}" for q in ("best", "worst") for p in BWS_LABELS),
)


def process_bws_generation(doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
    """Per tuple: one answer per rotation, parsed strictly; the record goes to every metric."""
    if len(results) != len(doc["rotations"]):
        raise ProtocolError(f"tuple {doc.get('tuple_id')}: {len(results)} answers for {len(doc['rotations'])} presentations")
    record = _bws_record(doc, [parse_bws(r) for r in results])
    return dict.fromkeys(BWS_METRICS, record)


def bws_choice(most: Sequence[float], least: Sequence[float]) -> tuple[int, int]:
    """(most, least) display positions 1..4 from the log-likelihoods of the labels after "Most:" and after
    "Least:": the most likely "Most" label, and the most likely "Least" label among the other three (the
    answer format requires N != M). Ties go to the earlier position."""
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
    return dict.fromkeys(BWS_METRICS, _bws_record(doc, picks))


# --- best-worst corpus-level metrics (pure functions of the per-tuple records) ---------------------


def bws_counts(records: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Counting over the parsed presentations: per item (sorted ids) its human score, appearances n,
    times chosen best B and worst W, and the model's score ((B - W) / n + 1) / 2 in [0, 1], the same
    formula as the human scores (NaN for an item whose presentations all failed to parse)."""
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


def bws_pairs(records: Sequence[dict[str, Any]]) -> list[tuple[float | None, float]]:
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
    """What a uniformly random choice would agree: the mean over tuples of |human majority| / 4."""
    return float(np.mean([len(rec[f"majority_{side}"]) / BWS_SIZE for rec in records])) if records else math.nan


def bws_parse_rate(records: Sequence[dict[str, Any]]) -> float:
    """Share of presentations whose answer parsed."""
    shown = [s for _, s in _presentations(records)]
    return float(np.mean([s["best"] is not None for s in shown])) if shown else math.nan


def bws_position_rate(records: Sequence[dict[str, Any]], side: str, position: int) -> float:
    """Share of parsed presentations in which display position `position` (1..4) was chosen as `side`;
    an unbiased chooser on rotated tuples gives about 1/4."""
    picks = [s[side] for _, s in _presentations(records) if s[side] is not None]
    return float(np.mean([p == position for p in picks])) if picks else math.nan


def best_agreement(records: Sequence[dict[str, Any]]) -> float:
    return bws_agreement(records, "best")


def worst_agreement(records: Sequence[dict[str, Any]]) -> float:
    return bws_agreement(records, "worst")


def _position_metric(side: str, position: int) -> Any:
    def rate(records: Sequence[dict[str, Any]]) -> float:
        return bws_position_rate(records, side, position)

    rate.__name__ = f"{side}_position_{position}"
    rate.__doc__ = f"Share of parsed presentations choosing display position {position} as {side} (uniform: 0.25)."
    return rate


for _side in ("best", "worst"):
    for _p in range(1, BWS_SIZE + 1):
        globals()[f"{_side}_position_{_p}"] = _position_metric(_side, _p)


def _bws_task_class() -> type:
    from lm_eval.api.instance import Instance

    base = _cached("FsbTask", _task_class)

    class FsbBwsTask(base):  # type: ignore[misc, valid-type]
        """FsbTask for the best-worst tasks: each document (a tuple) gives its requests for every rotation,
        `generate_until`: one answer per rotation; `loglikelihood`: per rotation the 4 labels after
        "Most:" and the 4 after "Least:" (two prompts, so a backend that caches a prompt's logits, as
        lm-eval's hf does, runs 2 forward passes per presentation)."""

        def build_all_requests(self, **kwargs: Any) -> None:
            # zero-shot, as the annotators were: lm-eval ignores --num_fewshot for a task configured with 0
            self._context_kwargs = kwargs
            super().build_all_requests(**kwargs)

        def _presentation(self, doc: dict[str, Any], shift: int, kwargs: dict[str, Any]) -> Any:
            return base._first_argument(self, {**doc, "shift": int(shift)}, kwargs)

        def _first_argument(self, doc: dict[str, Any], kwargs: dict[str, Any]) -> Any:
            ctx = self._presentation(doc, doc["rotations"][0], kwargs)
            return ctx if self.OUTPUT_TYPE == "generate_until" else ctx + f"{BWS_QUESTIONS[0]}:"

        def construct_requests(self, doc: dict[str, Any], ctx: Any, **kwargs: Any) -> list[Any]:
            kwargs.pop("apply_chat_template", None)
            kwargs.pop("chat_template", None)
            built = getattr(self, "_context_kwargs", {})
            out = []
            for shift in doc["rotations"]:
                prompt = self._presentation(doc, shift, built)
                if self.OUTPUT_TYPE == "generate_until":
                    args: list[tuple[Any, ...]] = [(prompt, dict(self.config.generation_kwargs or {}))]
                    kind = "generate_until"
                else:
                    args = [(prompt + f"{q}:", f" {label}") for q in BWS_QUESTIONS for label in BWS_LABELS]
                    kind = "loglikelihood"
                out += [Instance(request_type=kind, doc=doc, arguments=a, idx=len(out) + j, **kwargs) for j, a in enumerate(args)]
            return out

    return FsbBwsTask
