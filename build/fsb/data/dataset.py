"""Validated tables -> scores -> a Hugging Face dataset folder.

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
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

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
from fsb.core.tables import Annotations, Generations, check_coverage, read_annotations, read_generations
from fsb.data import annotators, card
from fsb.data.rounds import Round, merge_rounds, read_rounds, repeated_judgments, round_inputs

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


def parquet_bytes(frame: pd.DataFrame, schema: pa.Schema) -> tuple[bytes, int]:
    """Deterministic Parquet bytes (no pandas or datasets metadata) and the table's Arrow size."""
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False).replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=9, write_statistics=True)
    return sink.getvalue().to_pybytes(), int(table.nbytes)


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
    keep_annotator_ids: bool = False,
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
    agreement with the leave-one-out majority.
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
        gens, ann, gen_round, ann_round, read = merge_rounds(round_list, invalid)
        notes = repeated_judgments(read)
    published, people = annotators.pseudonymise(ann.annotator, keep_ids=keep_annotator_ids)
    if published is not None:  # every file below sees only the published ids (the release has none: unchanged)
        ann = dataclasses.replace(ann, annotator=published)
    scored = score_dataset(
        gens, ann, trials=trials, seed=seed, gen_round=gen_round, ann_round=ann_round, round_names={r.number: r.name for r in round_list}
    )
    stats = scored.stats
    files: dict[str, tuple[str, bytes, int]] = {}
    for config, frame in (("default", scored.default), ("annotations", scored.annotations)):
        data, nbytes = parquet_bytes(frame, arrow_schema(config))
        digest = hashlib.sha256(data).hexdigest()
        files[config] = (f"data/{config}/{spec.SPLIT}-{digest[:16]}.parquet", data, nbytes)
    fingerprint = content_fingerprint([hashlib.sha256(d).hexdigest() for _, d, _ in files.values()])
    provenance = round_inputs(read)
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
    if published is not None:
        stats["annotators"] = {**stats["annotators"], "published_as": people, "agreement": annotators.agreement(ann, published)}
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
