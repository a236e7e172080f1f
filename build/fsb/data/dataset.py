"""Validated tables -> scores -> a Hugging Face dataset folder.

`build_dataset` reads the generations and the individual judgments, scores every sentence by counting,
measures split-half reliability, and writes OUT atomically: a README.md card (YAML configs and
features, prose with the computed figures), Parquet files under data/, and stats.json.

Data files are named by their content hash (data/<config>/test-<sha256[:16]>.parquet) and the card's
YAML lists them by name. datasets 5 keys its cache for a local folder on the card's YAML alone, so a
rebuild with new content must change the YAML, and content-addressed names do exactly that.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

import fifty_shades_of_bias as spec
from fsb import __version__, bws
from fsb.bws import maxdiff, scoring
from fsb.core.files import (
    SEAL_FILE,
    InputError,
    atomic_dir,
    atomic_write,
    check_replaceable_dir,
    content_fingerprint,
    list_tree,
    read_seal,
    seal_difference,
    sha256_file,
    write_file,
)
from fsb.core.tables import Annotations, Generations, check_coverage, read_annotations, read_generations, refuse_unknown_ids
from fsb.data import card

__all__ = [
    "BuildResult",
    "Round",
    "ScoredDataset",
    "arrow_schema",
    "build_dataset",
    "build_folder_difference",
    "is_build_folder",
    "read_rounds",
    "score_dataset",
    "write_last_build",
]

DEFAULT_OUT = Path(spec.NAME)


def arrow_schema(config: str) -> pa.Schema:
    """The Parquet schema of a config, derived from `fifty_shades_of_bias.features` (the one schema):
    ClassLabel columns are stored as their string names (the card declares the names), lists of a
    fixed length as plain Arrow lists."""
    from datasets import ClassLabel, List, Value

    def arrow_type(feature: Any) -> pa.DataType:
        if isinstance(feature, ClassLabel):
            return pa.string()
        if isinstance(feature, Value):
            return feature.pa_type
        if isinstance(feature, List):
            return pa.list_(arrow_type(feature.feature))
        raise TypeError(f"no Parquet type for the feature {feature!r} of config {config!r}")

    return pa.schema([(name, arrow_type(f)) for name, f in spec.features(config).items()])


@dataclass(frozen=True)
class ScoredDataset:
    """Both configs as tables plus the figures computed on them (the future stats.json)."""

    default: pd.DataFrame
    annotations: pd.DataFrame
    stats: dict[str, Any]


@dataclass(frozen=True)
class BuildResult:
    """The folder written and its figures; `warnings` are one-line notes about a build that succeeded
    (e.g. its record for the loaders could not be written); `notes` one-line warnings about its inputs
    (e.g. judgments repeated across rounds, counted)."""

    out: Path
    stats: dict[str, Any]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def score_dataset(
    gens: Generations,
    ann: Annotations,
    *,
    trials: int = 100,
    seed: int = 0,
    gen_round: np.ndarray | None = None,
    ann_round: np.ndarray | None = None,
    round_names: dict[int, str] | None = None,
) -> ScoredDataset:
    """Score every sentence by counting and by the MaxDiff fit, and compute the dataset's figures (no I/O).

    `gen_round` / `ann_round` give the round of each generations row and judgment (default: all round 1,
    the plain build); the scores are computed over every round's judgments together."""
    k = ann.items.shape[1]
    if k != spec.TUPLE_SIZE:
        raise InputError(
            ann.path, f"the dataset's judgments are over {spec.TUPLE_SIZE}-tuples; this file has {k} item columns", line=1, field=f"Item{k}"
        )
    if gen_round is None:
        check_coverage(gens, ann)
    gen_round = np.ones(len(gens.frame), dtype=np.int64) if gen_round is None else np.asarray(gen_round, dtype=np.int64)
    ann_round = np.ones(len(ann), dtype=np.int64) if ann_round is None else np.asarray(ann_round, dtype=np.int64)
    frame = gens.frame.assign(round=gen_round).sort_values("uid", kind="stable").reset_index(drop=True)
    uids = frame["uid"].to_numpy()
    item_round = frame["round"].to_numpy()
    coded = scoring.encode(ann, labels=uids)
    design, tuple_index = coded.design, coded.tuple_index
    counts = bws.count_best_worst(design, coded.best, coded.worst, n_items=uids.size, tuple_index=tuple_index)
    shr = bws.split_half_reliability(design, coded.best, coded.worst, tuple_index, n_items=uids.size, trials=trials, seed=seed)
    fit = maxdiff.fit_maxdiff(design, coded.best, coded.worst, tuple_index, uids.size)
    # The logit scale fixes only differences: anchor it on the first round's sentences (mean 0), so that a
    # later round's sentences land on the scale the earlier version published and old scores stay put.
    first_round = int(item_round.min())
    score_maxdiff = fit.utility - fit.utility[item_round == first_round].mean()
    score_raw = counts.score_raw
    score = counts.score
    # score = (n + best - worst) / (2n): bins are computed from these integers, not from floats.
    num = counts.appearances + counts.best - counts.worst
    den = 2 * counts.appearances
    bin_code = spec.exact_bin_codes(num, den, spec.ANALYSIS_BIN_EDGES)
    default = pd.DataFrame(
        {
            "id": uids.astype(np.int32),
            "text": frame["response"].to_numpy(),
            "seed": frame["query"].to_numpy(),
            "seed_type": frame["seed_type"].to_numpy(),
            "prompt_type": frame["prompt_type"].to_numpy(),
            "round": item_round.astype(np.int32),
            "score": score,
            "score_raw": score_raw,
            "score_maxdiff": score_maxdiff,
            "bin": np.asarray(spec.BIN_NAMES)[bin_code],
            "n_judgments": counts.appearances.astype(np.int32),
            "n_best": counts.best.astype(np.int32),
            "n_worst": counts.worst.astype(np.int32),
        }
    )
    annotations = pd.DataFrame(
        {
            "tuple_id": tuple_index.astype(np.int32),
            "items": list(ann.items.astype(np.int32)),
            "best": ann.best.astype(np.int32),
            "worst": ann.worst.astype(np.int32),
            "annotator": ann.annotator if ann.annotator is not None else [None] * len(ann),
            "timestamp": ann.timestamp if ann.timestamp is not None else [None] * len(ann),
            "round": ann_round.astype(np.int32),
        }
    )
    rounded_bin = spec.rounded_bin_codes(score_raw, spec.ANALYSIS_BIN_EDGES)
    per_tuple = np.bincount(tuple_index)
    fewshot = spec.exact_bin_codes(num, den, spec.FEWSHOT_BIN_EDGES)
    histogram = np.bincount(np.minimum(spec.exact_bin_codes(num, den, spec.HISTOGRAM_BIN_EDGES), 9), minlength=10)
    stats: dict[str, Any] = {
        "n_items": int(uids.size),
        "n_tuples": int(design.shape[0]),
        "n_annotations": len(ann),
        "has_annotators": ann.annotator is not None,
        "has_timestamps": ann.timestamp is not None,
        "annotations_per_tuple": {str(n): int(c) for n, c in enumerate(np.bincount(per_tuple)) if c},
        "judgments_per_item": {"min": int(counts.appearances.min()), "max": int(counts.appearances.max())},
        "bins": {
            "edges": list(spec.ANALYSIS_BIN_EDGES),
            "counts": {name: int((bin_code == i).sum()) for i, name in enumerate(spec.BIN_NAMES)},
            # The release's score file rounds score_raw to 3 decimals; a sentence within rounding of an
            # edge lands in another bin with those rounded scores. Shown so the two counts reconcile.
            "counts_from_rounded_scores": {name: int((rounded_bin == i).sum()) for i, name in enumerate(spec.BIN_NAMES)},
        },
        "fewshot_bins": {"edges": list(spec.FEWSHOT_BIN_EDGES), "counts": [int((fewshot == i).sum()) for i in range(4)]},
        "histogram": {"edges": [round(0.1 * i, 1) for i in range(11)], "counts": [int(c) for c in histogram]},
        "score": {"mean": float(score.mean()), "sd": float(score.std(ddof=1)), "min": float(score.min()), "max": float(score.max())},
        "seed_type": {t: int((default["seed_type"] == t).sum()) for t in spec.SEED_TYPES},
        "prompt_type": {t: int((default["prompt_type"] == t).sum()) for t in spec.PROMPT_TYPES},
        "seed_type_by_prompt_type": {
            s: {p: int(((default["seed_type"] == s) & (default["prompt_type"] == p)).sum()) for p in spec.PROMPT_TYPES}
            for s in spec.SEED_TYPES
        },
        "design": bws.design_report(design, uids.size),
        "shr": shr.summary(),
        "maxdiff": {
            "converged": fit.converged,
            "iterations": fit.iterations,
            "anchor_round": first_round,
            "spearman_with_counting": _spearman(score_maxdiff, score),
            "min": float(score_maxdiff.min()),
            "max": float(score_maxdiff.max()),
        },
        "annotators": _annotator_figures(ann.annotator),
        "rounds": _round_table(item_round, ann_round, tuple_index, design, ann.annotator, round_names or {}),
    }
    return ScoredDataset(default, annotations, stats)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho: Pearson's r of average ranks (as `scipy.stats.spearmanr`)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def _annotator_figures(annotator: np.ndarray | None) -> dict[str, Any]:
    """What the judgments say about who made them: the number of distinct annotator ids, judgments per
    annotator (min, median, max), and how many judgments carry no id."""
    if annotator is None:
        return {"n": 0, "judgments_without_id": None}
    ids = pd.Series(annotator, dtype=object)
    missing = ids.isna() | (ids.astype(str).str.strip() == "")
    per = ids[~missing].value_counts()
    return {
        "n": int(per.size),
        "judgments_per_annotator": ({"min": int(per.min()), "median": float(per.median()), "max": int(per.max())} if per.size else None),
        "judgments_without_id": int(missing.sum()),
    }


def _round_table(
    item_round: np.ndarray,
    ann_round: np.ndarray,
    tuple_index: np.ndarray,
    design: np.ndarray,
    annotator: np.ndarray | None,
    names: dict[int, str],
) -> list[dict[str, Any]]:
    """Per round: sentences introduced, judgments, annotators, tuples judged (new ones, and those that
    tie the round's sentences to earlier rounds' sentences)."""
    first_round_of_tuple = np.full(design.shape[0], np.iinfo(np.int64).max)
    np.minimum.at(first_round_of_tuple, tuple_index, ann_round)
    rounds_in_tuple = item_round[design]  # (n_tuples, k): the round of each sentence shown
    table = []
    for r in sorted(set(item_round.tolist()) | set(ann_round.tolist())):
        rows = ann_round == r
        judged = np.unique(tuple_index[rows])
        mixed = (rounds_in_tuple[judged] == r).any(axis=1) & (rounds_in_tuple[judged] < r).any(axis=1)
        table.append(
            {
                "round": int(r),
                "name": names.get(int(r), f"round {r}"),
                "sentences": int((item_round == r).sum()),
                "judgments": int(rows.sum()),
                "annotators": _annotator_figures(None if annotator is None else annotator[rows]),
                "tuples": int(judged.size),
                "new_tuples": int((first_round_of_tuple == r).sum()),
                "tuples_linking_earlier_rounds": int(mixed.sum()),
            }
        )
    return table


def _parquet_bytes(frame: pd.DataFrame, schema: pa.Schema) -> tuple[bytes, int]:
    """Deterministic Parquet bytes (no pandas or datasets metadata) and the table's Arrow size."""
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False).replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=9, write_statistics=True)
    return sink.getvalue().to_pybytes(), int(table.nbytes)


# The release's two inputs, as pinned (by sha256) in fifty_shades_of_bias.RELEASE.
_RELEASE_INPUTS = {"generations": "FSB/FSB_text.csv", "annotations": "FSB/fsb-tuples-annotations.csv"}


@dataclass(frozen=True)
class Round:
    """One annotation round: its number and name, its generations file (the sentences it adds) and its
    judgments file (which may also show earlier rounds' sentences)."""

    number: int
    name: str
    generations: Path
    annotations: Path


def read_rounds(manifest: str | os.PathLike[str]) -> list[Round]:
    """Read a rounds manifest (YAML): `rounds:`, a list of {round: N, name: ..., generations: FILE,
    annotations: FILE}; paths are relative to the manifest's folder, `round` defaults to the position
    (1, 2, ...) and must increase, `name` defaults to "round N"."""
    path = Path(manifest)
    from fsb.core.files import read_utf8

    text = read_utf8(path)
    try:
        doc = yaml.load(text, Loader=_PlainLoader)  # a SafeLoader that also refuses aliases
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(path, f"not valid YAML: {getattr(e, 'problem', None) or e}", line=mark.line + 1 if mark else None) from None
    entries = doc.get("rounds") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError(path, "expected `rounds:`, a list of rounds, each with generations and annotations files", field="rounds")
    rounds: list[Round] = []
    for i, entry in enumerate(entries):
        where = f"rounds[{i}]"
        if not isinstance(entry, dict):
            raise InputError(path, "each round is a mapping with generations and annotations", field=where)
        unknown = sorted(set(entry) - {"round", "name", "generations", "annotations"})
        if unknown:
            raise InputError(path, f"unknown key {unknown[0]!r} (expected round, name, generations, annotations)", field=where)
        number = entry.get("round", i + 1)
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise InputError(path, f"round must be an integer >= 1, got {number!r}", field=f"{where}.round")
        if rounds and number <= rounds[-1].number:
            raise InputError(path, f"round {number} follows round {rounds[-1].number}: rounds must increase", field=f"{where}.round")
        files = {}
        for role in ("generations", "annotations"):
            value = entry.get(role)
            if not isinstance(value, str) or not value.strip():
                raise InputError(path, f"missing {role} file", field=f"{where}.{role}")
            files[role] = (path.parent / value).resolve() if not Path(value).is_absolute() else Path(value)
        name = entry.get("name", f"round {number}")
        problem = _name_problem(name)
        if problem:
            raise InputError(path, problem, field=f"{where}.name")
        rounds.append(Round(number, name, files["generations"], files["annotations"]))
    return rounds


class _PlainLoader(yaml.SafeLoader):
    """yaml.SafeLoader without anchors and aliases (`&a`, `*a`): a manifest needs neither, and nested
    aliases expand exponentially ("billion laughs") when the value is used."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (&name, *name) are not allowed in a rounds manifest", event.start_mark
            )
        return super().compose_node(parent, index)


NAME_MAX = 100


def _name_problem(name: object) -> str | None:
    """Why a round's `name` is not a plain one-line string of at most NAME_MAX characters, or None: the name
    goes into the card's tables and prose and into printed lines as written."""
    if not isinstance(name, str):
        return f'name must be a plain string, got a YAML {type(name).__name__} (quote it: name: "...")'
    if not name.strip():
        return "name is empty"
    if len(name) > NAME_MAX:
        return f"name has {len(name)} characters, at most {NAME_MAX} are allowed"
    bad = next((c for c in name if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        return f"name holds the control character {bad!r}: a name is one line of text"
    return None


def _refuse_shared_files(rounds: list[Round]) -> None:
    """Refuse a file listed in two rounds (or twice in one), by resolved path or by content (sha256): its
    judgments would be counted twice, inflating the judgment count and split-half reliability."""
    seen: dict[str, tuple[Round, str]] = {}
    for r in rounds:
        for role in ("generations", "annotations"):
            p = Path(getattr(r, role))
            keys = [f"path {p.resolve()}"]
            if p.is_file():
                keys.append(f"sha256 {sha256_file(p)}")
            for key in keys:
                if key in seen:
                    first, first_role = seen[key]
                    how = "is the same file" if key.startswith("path") else f"has the same content ({key[:16]}...)"
                    raise InputError(
                        p,
                        f"round {r.number}'s {role} file {how} as round {first.number}'s {first_role} file "
                        f"({Path(getattr(first, first_role)).name}): each file belongs to one round, or its rows would be counted twice",
                    )
            for key in keys:
                seen[key] = (r, role)


def _repeated_judgments(read: list[tuple[Round, Generations, Annotations]]) -> list[str]:
    """Judgment rows of a later round identical to a row of an earlier round (same Item1..ItemK in order,
    BestItem, WorstItem, and Timestamp when the files have one). With the same annotator id it is the
    same judgment counted twice: refused, naming both lines. Without an annotator id two people may well
    have given the same answer to the same tuple, so such rows are counted, and a warning gives their number."""
    import pandas as pd

    def keyed(r: Round, a: Annotations) -> pd.DataFrame:
        def text(values: np.ndarray | None) -> list[str]:
            return [""] * len(a) if values is None else ["" if v is None else str(v).strip() for v in values.tolist()]

        frame = pd.DataFrame(a.items, columns=a.item_columns).assign(BestItem=a.best, WorstItem=a.worst)
        return frame.assign(Annotator=text(a.annotator), Timestamp=text(a.timestamp), row=np.arange(len(a)), round=r.number)

    frames = [keyed(r, a) for r, _, a in read]
    notes = []
    for j in range(1, len(read)):
        r, _, a = read[j]
        keys = [c for c in frames[j].columns if c not in ("row", "round")]
        earlier = pd.concat(frames[:j]).drop_duplicates(keys)
        same = frames[j].merge(earlier, on=keys, suffixes=("", "_earlier")).sort_values("row", kind="stable")
        if same.empty:
            continue
        first_of = {rr.number: aa for rr, _, aa in read}
        named = same[same["Annotator"] != ""]
        if len(named):
            hit = named.iloc[0]
            old = first_of[int(hit["round_earlier"])]
            raise InputError(
                a.path,
                f"repeats round {int(hit['round_earlier'])}'s judgment on line {old.line_of(int(hit['row_earlier']))} of {old.path.name} "
                f"(same tuple, best, worst and annotator {_short_text(hit['Annotator'])!r}"
                f"{', timestamp' if hit['Timestamp'] else ''}): the same judgment would be counted twice"
                f"{'' if hit['Timestamp'] else '; if it was judged again, give the rows a Timestamp column'}",
                line=a.line_of(int(hit["row"])),
                field="Annotator",
            )
        hit = same.iloc[0]
        notes.append(
            f"{a.path}: {len(same)} of round {r.number}'s {len(a)} judgments repeat an earlier round's row exactly "
            f"(same tuple, best and worst; no annotator id tells them apart), first on line {a.line_of(int(hit['row']))}; "
            "they are counted as new judgments: check the file is not a copy"
        )
    return notes


def _short_text(value: object, limit: int = 40) -> str:
    from fsb.core.tables import _short

    return _short(str(value), limit)


def _merge_rounds(
    rounds: list[Round], invalid: str
) -> tuple[Generations, Annotations, np.ndarray, np.ndarray, list[tuple[Round, Generations, Annotations]]]:
    """Read every round and join them: one Generations (uids unique across rounds), one Annotations
    (labels re-coded over the union), and the round of each generations row and of each judgment.
    Every annotated id must be a sentence of some round, and every sentence judged in some round."""
    from fsb.core.tables import _first

    _refuse_shared_files(rounds)
    read = []
    for r in rounds:
        gens = read_generations(r.generations)
        ann = read_annotations(r.annotations, integer_ids=True, invalid=invalid)  # type: ignore[arg-type]
        if ann.item_codes.shape[1] != spec.TUPLE_SIZE:
            k = ann.item_codes.shape[1]
            raise InputError(
                ann.path,
                f"the dataset's judgments are over {spec.TUPLE_SIZE}-tuples; this file has {k} item columns",
                line=1,
                field=f"Item{k}",
            )
        read.append((r, gens, ann))
    owner: dict[int, tuple[int, Path]] = {}
    for r, gens, _ in read:
        for i, uid in enumerate(gens.frame["uid"].tolist()):
            if uid in owner:
                number, where = owner[uid]
                raise InputError(
                    gens.path, f"uid {uid} is already a sentence of round {number} ({where})", line=gens.line_of(i), field="uid"
                )
            owner[uid] = (r.number, gens.path)
    all_uids = np.fromiter(owner, dtype=np.int64, count=len(owner))
    for _, _, ann in read:
        refuse_unknown_ids(ann, all_uids, "no such uid in any round's generations")
    judged = np.unique(np.concatenate([ann.labels for _, _, ann in read]))
    for _, gens, _ in read:
        uids = gens.frame["uid"].to_numpy()
        bad = _first(~np.isin(uids, judged))
        if bad is not None:
            raise InputError(
                gens.path, f"no judgment of any round covers the sentence with uid {uids[bad]}", line=gens.line_of(bad), field="uid"
            )
    frame = pd.concat([g.frame for _, g, _ in read], ignore_index=True)
    gen_round = np.concatenate([np.full(len(g.frame), r.number) for r, g, _ in read])
    offsets = np.cumsum([0, *(len(g.frame) for _, g, _ in read)])

    def gen_line(i: int) -> int:
        j = int(np.searchsorted(offsets, i, side="right") - 1)
        return read[j][1].line_of(i - int(offsets[j]))

    labels = np.unique(np.concatenate([a.labels for _, _, a in read]))
    recode = [np.searchsorted(labels, a.labels) for _, _, a in read]
    item_codes = np.concatenate([m[a.item_codes] for m, (_, _, a) in zip(recode, read)])
    best = np.concatenate([m[a.best_codes] for m, (_, _, a) in zip(recode, read)])
    worst = np.concatenate([m[a.worst_codes] for m, (_, _, a) in zip(recode, read)])
    annotator = None
    if any(a.annotator is not None for _, _, a in read):
        annotator = np.concatenate([a.annotator if a.annotator is not None else np.full(len(a), None, dtype=object) for _, _, a in read])
    timestamp = None
    if any(a.timestamp is not None for _, _, a in read):
        timestamp = np.concatenate([a.timestamp if a.timestamp is not None else np.full(len(a), None, dtype=object) for _, _, a in read])
    ann_round = np.concatenate([np.full(len(a), r.number) for r, _, a in read])
    a_offsets = np.cumsum([0, *(len(a) for _, _, a in read)])

    def ann_line(i: int) -> int:
        j = int(np.searchsorted(a_offsets, i, side="right") - 1)
        return read[j][2].line_of(i - int(a_offsets[j]))

    irregular: dict[str, dict[str, Any]] = {}
    for r, _, a in read:
        for kind, v in a.irregular.items():
            if kind not in irregular:
                irregular[kind] = {"rows": 0, "first_line": v["first_line"], "file": a.path.name, "round": r.number}
            irregular[kind]["rows"] += v["rows"]
    first = read[0]
    merged_gens = Generations(first[1].path, frame, gen_line)
    merged_ann = Annotations(
        first[2].path,
        labels,
        item_codes,
        best,
        worst,
        annotator,
        ann_line,
        invalid,
        irregular,
        sum(a.dropped for _, _, a in read),
        timestamp=timestamp,
    )
    return merged_gens, merged_ann, gen_round, ann_round, read


def _round_inputs(read: list[tuple[Round, Generations, Annotations]]) -> list[dict[str, Any]]:
    """Each round's inputs: file name, sha256 and rows read, whether each file is the pinned release's,
    and whether the round IS the release (both files match and no row was left out)."""
    out = []
    for r, gens, ann in read:
        files = {}
        for role, p, rows in (("generations", r.generations, len(gens.frame)), ("annotations", r.annotations, len(ann) + ann.dropped)):
            digest = sha256_file(p)
            files[role] = {
                "file": Path(p).name,
                "sha256": digest,
                "rows": int(rows),
                "pinned_release_file": digest == spec.RELEASE["files"][_RELEASE_INPUTS[role]],
            }
        is_release = all(f["pinned_release_file"] for f in files.values()) and ann.dropped == 0
        out.append({"round": r.number, "name": r.name, "inputs": files, "is_release": is_release})
    return out


_CONFIGS = ("default", "annotations")  # the card's config order, which the fingerprint follows
BUILD_KIND = "a dataset folder written by `fsb build`"
BUILD_SEAL = "fsb build"


def build_folder_difference(folder: str | os.PathLike[str]) -> str | None:
    """None when `folder` is exactly what `fsb build` wrote, unchanged; else the first difference ("README.md
    was edited", "notes/ was added"), for the refusal message.

    A build seals what it wrote (.fsb-seal.json: the sha256 of every file, README.md and stats.json
    included, and the list of folders), and the folder must match the seal. A build made before seals
    has none: it is accepted only if it holds nothing but README.md, stats.json and one Parquet file per
    config under data/<config>/, and stats.json's fingerprint matches those files (an edited card or
    stats.json of such a build cannot be told apart; its next build carries a seal)."""
    root = Path(folder)
    if read_seal(root) is not None:
        return seal_difference(root, BUILD_SEAL)
    try:
        files, folders, others = list_tree(root)
        expected_folders = ["data", *(f"data/{c}" for c in _CONFIGS)]
        parquet = {c: [f for f in files if f.startswith(f"data/{c}/") and f.endswith(".parquet") and f.count("/") == 2] for c in _CONFIGS}
        allowed = {"README.md", "stats.json", *(f[0] for f in parquet.values() if len(f) == 1)}
        extra = [(r, f"{r} is a link or special file") for r in others]
        extra += [(r, f"{r}/ is not a folder fsb build writes") for r in folders if r not in expected_folders]
        extra += [(r, f"{r} is not a file fsb build writes") for r in files if r not in allowed]
        extra += [(f"data/{c}", f"data/{c}/ holds {len(f)} Parquet files, a build writes one") for c, f in parquet.items() if len(f) != 1]
        extra += [(r, f"{r} is missing") for r in ("README.md", "stats.json") if r not in files]
        if extra:
            return min(extra)[1] + f" (and it has no {SEAL_FILE}: a build made before seals, or not by fsb build)"
        recorded = json.loads((root / "stats.json").read_text(encoding="utf-8"))["fingerprint"]
        if recorded != content_fingerprint([sha256_file(root / parquet[c][0]) for c in _CONFIGS]):
            return "stats.json's fingerprint does not match the data files: a data file was changed"
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return "stats.json is not the one fsb build writes"
    return None


def is_build_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether `folder` is exactly what `fsb build` wrote, unchanged (`build_folder_difference` finds nothing).

    The test a build applies before replacing its --out: a folder failing it may hold a user's files."""
    return build_folder_difference(folder) is None


def write_last_build(out: Path, fingerprint: str) -> None:
    """Remember where the newest build went, so that `fifty_shades_of_bias.load()` and the lm-eval task find it."""
    record = {"path": str(out.resolve()), "fingerprint": fingerprint}
    atomic_write(spec.home() / "last_build.json", json.dumps(record, indent=2) + "\n")


def _check_record_writable() -> None:
    """Before any folder is replaced: refuse a build whose last-build record could not be written, so a
    failure is reported while nothing has changed (`--no-record` builds without it)."""
    home = spec.home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=home):  # unlinked at once: nothing is left even if killed here
            pass
    except OSError as e:
        cause = e.strerror or type(e).__name__
        raise InputError(home, f"cannot record the build here ({cause}); set FSB_HOME to a writable folder or pass --no-record") from None
    record = home / "last_build.json"
    if record.exists() and not record.is_file():  # a folder (or a link to one), a FIFO...: atomic_write would refuse it
        what = "a folder" if record.is_dir() else "not a file"
        raise InputError(
            record, f"is {what}, so the build cannot be recorded here; remove it, set FSB_HOME to another folder, or pass --no-record"
        )


def build_dataset(
    generations: str | os.PathLike[str] | None = None,
    annotations: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] = DEFAULT_OUT,
    *,
    rounds: str | os.PathLike[str] | list[Round] | None = None,
    trials: int = 100,
    seed: int = 0,
    record: bool = True,
    hub_id: str | None = None,
    invalid: str = "refuse",
    previous: str | os.PathLike[str] | None = None,
    previous_label: str | None = None,
) -> BuildResult:
    """Build the dataset folder OUT from a generations file and a judgments file (round 1), or from
    `rounds` (a manifest path, see `read_rounds`, or a list of `Round`s).

    OUT is replaced only if it is absent, empty or an unchanged earlier build (`build_folder_difference`; never
    the current folder, an ancestor of it or of an input, home or /). Nothing is written unless every
    check passes, and OUT is replaced in one rename: a failed build leaves the previous folder as it
    was. With `record`, the build becomes the one that loaders find; if that record cannot be written
    after the swap, the build stands and the result carries a warning. The card's loading examples name
    `hub_id` (org/name) when given, else OUT's own folder name. `previous` (an earlier build folder)
    adds a "Changes since PREVIOUS_LABEL" section to the card, from `fsb.data.diff`.
    """
    if rounds is None:
        if generations is None or annotations is None:
            raise InputError(str(out), "give a generations file and a judgments file, or a rounds manifest")
        round_list = [Round(1, "round 1", Path(generations), Path(annotations))]
    elif generations is not None or annotations is not None:
        raise InputError(str(rounds), "give a rounds manifest or a generations and a judgments file, not both")
    else:
        round_list = rounds if isinstance(rounds, list) else read_rounds(rounds)
    inputs = tuple(p for r in round_list for p in (r.generations, r.annotations)) + (
        () if isinstance(rounds, list) or rounds is None else (rounds,)
    )
    target = check_replaceable_dir(out, changed=build_folder_difference, kind=BUILD_KIND, inputs=inputs)
    if record:
        _check_record_writable()
    if len(round_list) == 1 and rounds is None:
        r = round_list[0]
        gens = read_generations(r.generations)
        ann = read_annotations(r.annotations, integer_ids=True, invalid=invalid)  # type: ignore[arg-type]
        read = [(r, gens, ann)]
        gen_round = ann_round = None
        notes = []
    else:
        gens, ann, gen_round, ann_round, read = _merge_rounds(round_list, invalid)
        notes = _repeated_judgments(read)
    scored = score_dataset(
        gens, ann, trials=trials, seed=seed, gen_round=gen_round, ann_round=ann_round, round_names={r.number: r.name for r in round_list}
    )
    stats = scored.stats
    files: dict[str, tuple[str, bytes, int]] = {}
    for config, frame in (("default", scored.default), ("annotations", scored.annotations)):
        data, nbytes = _parquet_bytes(frame, arrow_schema(config))
        digest = hashlib.sha256(data).hexdigest()
        files[config] = (f"data/{config}/{spec.SPLIT}-{digest[:16]}.parquet", data, nbytes)
    fingerprint = content_fingerprint([hashlib.sha256(d).hexdigest() for _, d, _ in files.values()])
    provenance = _round_inputs(read)
    for entry, row in zip(provenance, stats["rounds"]):
        name = row["name"]
        row.update(entry)
        if entry["is_release"] and name == f"round {row['round']}" and rounds is None:
            row["name"] = "the release"
    release_rounds = [e["round"] for e in provenance if e["is_release"]]
    stats = {
        **stats,
        "fingerprint": fingerprint,
        "inputs": provenance[0]["inputs"]
        if len(provenance) == 1
        else {f"round {e['round']} {role}": info for e in provenance for role, info in e["inputs"].items()},
        "release": {
            "repo": spec.RELEASE["repo"],
            "commit": spec.RELEASE["commit"],
            "rounds": release_rounds,
            # the build IS the release: one round, both files the pinned ones, nothing left out
            "is_release": release_rounds == [provenance[0]["round"]] and len(provenance) == 1,
        },
        "built_with": {
            "fsb": __version__,
            "scoring": "counting",
            "score_maxdiff": "best-worst multinomial logit (MaxDiff), ML fit, logit scale, mean of the first round's sentences = 0",
            "shr_procedure": "Kiritchenko & Mohammad split-half, no Spearman-Brown",
        },
        "paper": {k: spec.PAPER[k] for k in ("n_annotations", "shr", "bin_counts")},
    }
    if ann.irregular:  # only with --invalid count/drop: how many quality-control rows were counted or left out
        stats["invalid"] = {"policy": invalid, "irregular": ann.irregular, "dropped": ann.dropped}
    if previous is not None:
        from fsb.data import diff

        label = previous_label or Path(previous).name
        new_label = f"this build ({hub_id or target.name})"
        old_stats, old_tables = diff.read_build(previous)
        compared = diff.compare_builds(
            old_stats,
            old_tables,
            {**stats},
            {"default": scored.default, "annotations": scored.annotations},
            old_path=Path(previous),
            new_path=target,
            old_label=label,
            new_label=new_label,
        )
        stats["changes_since"] = {"label": label, "fingerprint": old_stats.get("fingerprint"), "summary": diff.format_diff(compared)}
    with atomic_dir(target, changed=build_folder_difference, kind=BUILD_KIND, inputs=inputs, seal=BUILD_SEAL) as stage:
        for rel, data, _ in files.values():
            write_file(stage / rel, data)
        layout = {
            config: {"path": rel, "num_bytes": nbytes, "num_examples": len(frame), "download_size": len(data)}
            for (config, (rel, data, nbytes)), frame in zip(files.items(), (scored.default, scored.annotations))
        }
        write_file(stage / "README.md", card.render(stats, layout, load_name=hub_id or target.name))
        write_file(stage / "stats.json", json.dumps(stats, indent=2, sort_keys=True) + "\n")
    warnings: list[str] = []
    if record:
        try:
            write_last_build(target, fingerprint)
        except (OSError, InputError) as e:
            where = getattr(e, "filename", None) or spec.home() / "last_build.json"
            warnings.append(
                f"built {target}, but could not record it in {where} ({getattr(e, 'strerror', None) or e}): "
                "loaders still find the previous build; pass its path explicitly"
            )
    return BuildResult(target.resolve(), stats, tuple(warnings), tuple(notes))
