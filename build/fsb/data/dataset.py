"""Validated tables -> scores -> a Hugging Face dataset folder.

(size: just over 400 lines: scoring, the two tables, the figures and the atomic build stay together so the
one place that defines FSB's `default` config is readable end to end.)

`build_dataset` reads the generations and the individual judgments, scores every sentence by counting,
measures split-half reliability, and writes OUT atomically: a README.md card (YAML configs and
features, prose with the computed figures), Parquet files under data/, and stats.json.

Data files are named by their content hash (data/<config>/test-<sha256[:16]>.parquet) and the card's
YAML lists them by name. datasets 5 keys its cache for a local folder on the card's YAML alone, so a
rebuild with new content must change the YAML, and content-addressed names do exactly that.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import fifty_shades_of_bias as spec
from fsb import bws
from fsb.bws import maxdiff
from fsb.bws.bounds import bound_column, bound_counts, score_bounds
from fsb.bws.coded import encode
from fsb.core.atomic import write_file
from fsb.core.folders import atomic_dir, check_replaceable_dir
from fsb.core.readers import InputError, content_fingerprint
from fsb.data import annotators, card, intervals
from fsb.data.annotators import annotator_figures
from fsb.data.buildfolder import (
    BUILD_KIND,
    BUILD_SEAL,
    build_folder_difference,
    check_record_writable,
    is_build_folder,
    write_last_build,
)
from fsb.data.rounds import Round, merge_rounds, provenance_stats, read_rounds, repeated_judgments, round_table
from fsb.tables.csvrows import Generations, read_generations
from fsb.tables.judgments import Annotations, check_coverage, read_annotations

__all__ = [
    "BUILD_KIND",
    "BUILD_SEAL",
    "BuildResult",
    "Round",
    "ScoredDataset",
    "arrow_schema",
    "build_dataset",
    "build_folder_difference",
    "is_build_folder",
    "parquet_bytes",
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
    n_boot: int = intervals.N_BOOT,
) -> ScoredDataset:
    """Score every sentence by counting and by the MaxDiff fit, with 95% bootstrap intervals for both
    (`fsb.data.intervals.item_intervals`, as a study build; `seed` seeds them too), and compute the
    dataset's figures (no I/O).

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
    coded = encode(ann, labels=uids)
    design, tuple_index = coded.design, coded.tuple_index
    counts = bws.count_best_worst(design, coded.best, coded.worst, n_items=uids.size, tuple_index=tuple_index)
    shr = bws.split_half_reliability(design, coded.best, coded.worst, tuple_index, n_items=uids.size, trials=trials, seed=seed)
    fit = maxdiff.fit_maxdiff(design, coded.best, coded.worst, tuple_index, uids.size)
    # The logit scale fixes only differences: anchor it on the first round's sentences (mean 0), so that a
    # later round's sentences land on the scale the earlier version published and old scores stay put.
    first_round = int(item_round.min())
    anchor = fit.utility[item_round == first_round].mean()
    score_maxdiff = fit.utility - anchor
    iv = intervals.item_intervals(coded, fit.utility, n_boot=n_boot, seed=seed)  # MaxDiff bounds: in fit.utility's frame
    iv = dataclasses.replace(iv, maxdiff_low=iv.maxdiff_low - anchor, maxdiff_high=iv.maxdiff_high - anchor)
    score_raw = counts.score_raw
    score = counts.score
    # score = (n + best - worst) / (2n): bins are computed from these integers, not from floats.
    num = counts.appearances + counts.best - counts.worst
    den = 2 * counts.appearances
    bin_code = spec.exact_bin_codes(num, den, spec.ANALYSIS_BIN_EDGES)
    bound = bound_column(score_bounds(design, coded.best, coded.worst, tuple_index, uids.size, counts))
    default = _default_table(frame, counts, score_maxdiff, bin_code, iv).assign(bound=bound)
    annotations = _annotation_table(ann, tuple_index, ann_round)
    per_tuple = np.bincount(tuple_index)
    stats: dict[str, Any] = {
        "n_items": int(uids.size),
        "n_tuples": int(design.shape[0]),
        "n_annotations": len(ann),
        "has_annotators": ann.annotator is not None,
        "has_timestamps": ann.timestamp is not None,
        "annotations_per_tuple": {str(n): int(c) for n, c in enumerate(np.bincount(per_tuple)) if c},
        "judgments_per_item": {"min": int(counts.appearances.min()), "max": int(counts.appearances.max())},
        **_bin_figures(num, den, bin_code, score_raw),
        "score": {"mean": float(score.mean()), "sd": float(score.std(ddof=1)), "min": float(score.min()), "max": float(score.max())},
        **_type_figures(default),
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
        # counting intervals of width 0: every resample scored the sentence the same (best-always: [1, 1]; or tallies never varied)
        "intervals": {**iv.summary(n_boot, seed), **intervals.zero_width_counts(iv, bound)},
        "bounds": bound_counts(bound),  # sentences whose scores are bounds, not estimates, by reason (the `bound` column)
        "annotators": annotator_figures(ann.annotator),
        "rounds": round_table(item_round, ann_round, tuple_index, design, ann.annotator, round_names or {}),
    }
    return ScoredDataset(default, annotations, stats)


def _default_table(
    frame: pd.DataFrame, counts: Any, score_maxdiff: np.ndarray, bin_code: np.ndarray, iv: intervals.Intervals
) -> pd.DataFrame:
    """The `default` config: one row per sentence (`frame`: the generations sorted by uid, with their round);
    interval bounds NaN (null in Parquet) where the item has none."""
    return pd.DataFrame(
        {
            "id": frame["uid"].to_numpy().astype(np.int32),
            "text": frame["response"].to_numpy(),
            "seed": frame["query"].to_numpy(),
            "seed_type": frame["seed_type"].to_numpy(),
            "prompt_type": frame["prompt_type"].to_numpy(),
            "round": frame["round"].to_numpy().astype(np.int32),
            "score": counts.score,
            "score_raw": counts.score_raw,
            "score_ci_low": iv.score_low,
            "score_ci_high": iv.score_high,
            "score_maxdiff": score_maxdiff,
            "score_maxdiff_ci_low": iv.maxdiff_low,
            "score_maxdiff_ci_high": iv.maxdiff_high,
            "bin": np.asarray(spec.BIN_NAMES)[bin_code],
            "n_judgments": counts.appearances.astype(np.int32),
            "n_best": counts.best.astype(np.int32),
            "n_worst": counts.worst.astype(np.int32),
        }
    )


def _annotation_table(ann: Annotations, tuple_index: np.ndarray, ann_round: np.ndarray) -> pd.DataFrame:
    """The `annotations` config: one row per judgment, items in the order shown."""
    return pd.DataFrame(
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


def _bin_figures(num: np.ndarray, den: np.ndarray, bin_code: np.ndarray, score_raw: np.ndarray) -> dict[str, Any]:
    """Analysis bins (exact, and from 3-decimal rounded scores), the few-shot bins and the histogram."""
    rounded_bin = spec.rounded_bin_codes(score_raw, spec.ANALYSIS_BIN_EDGES)
    fewshot = spec.exact_bin_codes(num, den, spec.FEWSHOT_BIN_EDGES)
    histogram = np.bincount(np.minimum(spec.exact_bin_codes(num, den, spec.HISTOGRAM_BIN_EDGES), 9), minlength=10)
    return {
        "bins": {
            "edges": list(spec.ANALYSIS_BIN_EDGES),
            "counts": {name: int((bin_code == i).sum()) for i, name in enumerate(spec.BIN_NAMES)},
            # The release's score file rounds score_raw to 3 decimals; a sentence within rounding of an
            # edge lands in another bin with those rounded scores. Shown so the two counts reconcile.
            "counts_from_rounded_scores": {name: int((rounded_bin == i).sum()) for i, name in enumerate(spec.BIN_NAMES)},
        },
        "fewshot_bins": {"edges": list(spec.FEWSHOT_BIN_EDGES), "counts": [int((fewshot == i).sum()) for i in range(4)]},
        "histogram": {"edges": [round(0.1 * i, 1) for i in range(11)], "counts": [int(c) for c in histogram]},
    }


def _type_figures(default: pd.DataFrame) -> dict[str, Any]:
    """Sentences per seed type, per prompt type, and per both."""
    return {
        "seed_type": {t: int((default["seed_type"] == t).sum()) for t in spec.SEED_TYPES},
        "prompt_type": {t: int((default["prompt_type"] == t).sum()) for t in spec.PROMPT_TYPES},
        "seed_type_by_prompt_type": {
            s: {p: int(((default["seed_type"] == s) & (default["prompt_type"] == p)).sum()) for p in spec.PROMPT_TYPES}
            for s in spec.SEED_TYPES
        },
    }


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho: Pearson's r of average ranks (as `scipy.stats.spearmanr`)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def parquet_bytes(frame: pd.DataFrame, schema: pa.Schema) -> tuple[bytes, int]:
    """Deterministic Parquet bytes (no pandas or datasets metadata) and the table's Arrow size."""
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False).replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=9, write_statistics=True)
    return sink.getvalue().to_pybytes(), int(table.nbytes)


def _round_list(
    generations: str | os.PathLike[str] | None,
    annotations: str | os.PathLike[str] | None,
    rounds: str | os.PathLike[str] | list[Round] | None,
    out: str | os.PathLike[str],
) -> tuple[list[Round], tuple[Any, ...]]:
    """The build's rounds (one for a generations + judgments pair) and every input path (for the --out checks)."""
    if rounds is None:
        if generations is None or annotations is None:
            raise InputError(str(out), "give a generations file and a judgments file, or a rounds manifest")
        round_list = [Round(1, "round 1", Path(generations), Path(annotations))]
    elif generations is not None or annotations is not None:
        raise InputError(str(rounds), "give a rounds manifest or a generations and a judgments file, not both")
    else:
        round_list = rounds if isinstance(rounds, list) else read_rounds(rounds)
    inputs: tuple[Any, ...] = tuple(p for r in round_list for p in (r.generations, r.annotations)) + (
        () if isinstance(rounds, list) or rounds is None else (rounds,)
    )
    return round_list, inputs


def _read_rounds_of(round_list: list[Round], single: bool, invalid: str) -> tuple[Any, ...]:
    """Read the inputs: (generations, judgments, round of each generations row and of each judgment, per-round reads, notes)."""
    if single:
        r = round_list[0]
        gens = read_generations(r.generations)
        # unknown ids compete with every other check for the first bad line (line 4 is reported before line 9)
        uids = gens.frame["uid"].to_numpy()
        ann = read_annotations(
            r.annotations,
            integer_ids=True,
            invalid=invalid,  # type: ignore[arg-type]
            known_ids=uids,
            unknown_why=f"no such uid in {gens.path}",
        )
        return gens, ann, None, None, [(r, gens, ann)], []
    gens, ann, gen_round, ann_round, read = merge_rounds(round_list, invalid)
    return gens, ann, gen_round, ann_round, read, repeated_judgments(read)


def _changes_since(
    previous: str | os.PathLike[str], label: str, new_label: str, target: Path, stats: dict[str, Any], scored: ScoredDataset
) -> dict[str, Any]:
    """The card's "Changes since" entry: `fsb diff` of the earlier build `previous` against this one."""
    from fsb.data import diff

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
    return {"label": label, "fingerprint": old_stats.get("fingerprint"), "summary": diff.format_diff(compared)}


def _record_build(target: Path, fingerprint: str) -> list[str]:
    """Record the build for the loaders; a warning line (not an error) when the record cannot be written."""
    try:
        write_last_build(target, fingerprint)
    except (OSError, InputError) as e:
        where = getattr(e, "filename", None) or spec.home() / "last_build.json"
        return [
            f"built {target}, but could not record it in {where} ({getattr(e, 'strerror', None) or e}): "
            "loaders still find the previous build; pass its path explicitly"
        ]
    return []


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
    keep_annotator_ids: bool = False,
    n_boot: int = intervals.N_BOOT,
) -> BuildResult:
    """Build the dataset folder OUT from a generations file and a judgments file (round 1), or from
    `rounds` (a manifest path, see `read_rounds`, or a list of `Round`s).

    OUT is replaced only if it is absent, empty or an unchanged earlier build (`build_folder_difference`; never
    the current folder, an ancestor of it or of an input, home or /). Nothing is written unless every
    check passes, and OUT is replaced in one rename: a failed build leaves the previous folder as it
    was. With `record`, the build becomes the one that loaders find; if that record cannot be written
    after the swap, the build stands and the result carries a warning. The card's loading examples name
    `hub_id` (org/name) when given, else OUT's own folder name. `previous` (an earlier build folder)
    adds a "Changes since PREVIOUS_LABEL" section to the card, from `fsb.data.diff`. Annotator ids are
    published as keyed-hash pseudonyms (`fsb.data.annotators`), or as given with `keep_annotator_ids`
    (contact-like values are pseudonymised either way); stats.json and the card add each annotator's
    agreement with the leave-one-out majority. `n_boot` bootstrap resamples (seeded by `seed`) give the
    default config's 95% intervals; stats.json and the card record how, and their nulls with the reasons.
    """
    round_list, inputs = _round_list(generations, annotations, rounds, out)
    target = check_replaceable_dir(out, changed=build_folder_difference, kind=BUILD_KIND, inputs=inputs)
    if record:
        check_record_writable()
    gens, ann, gen_round, ann_round, read, notes = _read_rounds_of(round_list, len(round_list) == 1 and rounds is None, invalid)
    published, people = annotators.pseudonymise(ann.annotator, keep_ids=keep_annotator_ids)
    if published is not None:  # every file below sees only the published ids (the release has none: unchanged)
        ann = dataclasses.replace(ann, annotator=published)
    scored = score_dataset(
        gens,
        ann,
        trials=trials,
        seed=seed,
        gen_round=gen_round,
        ann_round=ann_round,
        round_names={r.number: r.name for r in round_list},
        n_boot=n_boot,
    )
    stats = scored.stats
    files: dict[str, tuple[str, bytes, int]] = {}
    for config, frame in (("default", scored.default), ("annotations", scored.annotations)):
        data, nbytes = parquet_bytes(frame, arrow_schema(config))
        digest = hashlib.sha256(data).hexdigest()
        files[config] = (f"data/{config}/{spec.SPLIT}-{digest[:16]}.parquet", data, nbytes)
    fingerprint = content_fingerprint([hashlib.sha256(d).hexdigest() for _, d, _ in files.values()])
    stats = provenance_stats(stats, read, rounds is None, fingerprint)
    if published is not None:
        stats["annotators"] = {**stats["annotators"], "published_as": people, "agreement": annotators.agreement(ann, published)}
    if ann.irregular:  # only with --invalid count/drop: how many quality-control rows were counted or left out
        stats["invalid"] = {"policy": invalid, "irregular": ann.irregular, "dropped": ann.dropped}
    if previous is not None:
        label = previous_label or Path(previous).name
        stats["changes_since"] = _changes_since(previous, label, f"this build ({hub_id or target.name})", target, stats, scored)
    with atomic_dir(target, changed=build_folder_difference, kind=BUILD_KIND, inputs=inputs, seal=BUILD_SEAL) as stage:
        for rel, data, _ in files.values():
            write_file(stage / rel, data)
        layout = {
            config: {"path": rel, "num_bytes": nbytes, "num_examples": len(frame), "download_size": len(data)}
            for (config, (rel, data, nbytes)), frame in zip(files.items(), (scored.default, scored.annotations))
        }
        write_file(stage / "README.md", card.render(stats, layout, load_name=hub_id or target.name))
        write_file(stage / "stats.json", json.dumps(stats, indent=2, sort_keys=True) + "\n")
    warnings = _record_build(target, fingerprint) if record else []
    return BuildResult(target.resolve(), stats, tuple(warnings), tuple(notes))
