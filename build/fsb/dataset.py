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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import fifty_shades_of_bias as spec

from . import __version__, bws, card, scoring
from ._io import (
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
from .raw import Annotations, Generations, check_coverage, read_annotations, read_generations

__all__ = [
    "BuildResult",
    "ScoredDataset",
    "build_dataset",
    "build_folder_difference",
    "is_build_folder",
    "score_dataset",
    "write_last_build",
]

DEFAULT_OUT = Path(spec.NAME)

_SCHEMAS = {
    "default": pa.schema(
        [
            ("id", pa.int32()),
            ("text", pa.string()),
            ("seed", pa.string()),
            ("seed_type", pa.string()),
            ("prompt_type", pa.string()),
            ("score", pa.float64()),
            ("score_raw", pa.float64()),
            ("bin", pa.string()),
            ("n_judgments", pa.int32()),
            ("n_best", pa.int32()),
            ("n_worst", pa.int32()),
        ]
    ),
    "annotations": pa.schema(
        [
            ("tuple_id", pa.int32()),
            ("items", pa.list_(pa.int32())),
            ("best", pa.int32()),
            ("worst", pa.int32()),
            ("annotator", pa.string()),
            ("timestamp", pa.string()),
        ]
    ),
}


@dataclass(frozen=True)
class ScoredDataset:
    """Both configs as tables plus the figures computed on them (the future stats.json)."""

    default: pd.DataFrame
    annotations: pd.DataFrame
    stats: dict[str, Any]


@dataclass(frozen=True)
class BuildResult:
    """The folder written and its figures; `warnings` are one-line notes about a build that succeeded
    (e.g. its record for the loaders could not be written)."""

    out: Path
    stats: dict[str, Any]
    warnings: tuple[str, ...] = ()


def score_dataset(gens: Generations, ann: Annotations, *, trials: int = 100, seed: int = 0) -> ScoredDataset:
    """Score every sentence by counting and compute the dataset's figures (no I/O)."""
    k = ann.items.shape[1]
    if k != spec.TUPLE_SIZE:
        raise InputError(
            ann.path, f"the dataset's judgments are over {spec.TUPLE_SIZE}-tuples; this file has {k} item columns", line=1, field=f"Item{k}"
        )
    check_coverage(gens, ann)
    frame = gens.frame.sort_values("uid", kind="stable").reset_index(drop=True)
    uids = frame["uid"].to_numpy()
    coded = scoring.encode(ann, labels=uids)
    design, tuple_index = coded.design, coded.tuple_index
    counts = bws.count_best_worst(design, coded.best, coded.worst, n_items=uids.size, tuple_index=tuple_index)
    shr = bws.split_half_reliability(design, coded.best, coded.worst, tuple_index, n_items=uids.size, trials=trials, seed=seed)
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
            "score": score,
            "score_raw": score_raw,
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
        }
    )
    rounded_bin = np.searchsorted(np.asarray(spec.ANALYSIS_BIN_EDGES), (np.round(score_raw, 3) + 1) / 2, side="right")
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
    }
    return ScoredDataset(default, annotations, stats)


def _parquet_bytes(frame: pd.DataFrame, schema: pa.Schema) -> tuple[bytes, int]:
    """Deterministic Parquet bytes (no pandas or datasets metadata) and the table's Arrow size."""
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False).replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=9, write_statistics=True)
    return sink.getvalue().to_pybytes(), int(table.nbytes)


def _inputs(paths: dict[str, Path]) -> dict[str, Any]:
    pinned = {Path(k).name: v for k, v in spec.RELEASE["files"].items() if v}
    out = {}
    for role, p in paths.items():
        digest = sha256_file(p)
        out[role] = {"file": p.name, "sha256": digest, "pinned_release_file": pinned.get(p.name) == digest}
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
    except (OSError, ValueError, KeyError, TypeError):
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


def build_dataset(
    generations: str | os.PathLike[str],
    annotations: str | os.PathLike[str],
    out: str | os.PathLike[str] = DEFAULT_OUT,
    *,
    trials: int = 100,
    seed: int = 0,
    record: bool = True,
    hub_id: str | None = None,
    invalid: str = "refuse",
) -> BuildResult:
    """Build the dataset folder OUT from a generations file and a judgments file.

    OUT is replaced only if it is absent, empty or an unchanged earlier build (`build_folder_difference`; never
    the current folder, an ancestor of it or of an input, home or /). Nothing is written unless every
    check passes, and OUT is replaced in one rename: a failed build leaves the previous folder as it
    was. With `record`, the build becomes the one that loaders find; if that record cannot be written
    after the swap, the build stands and the result carries a warning. `hub_id` (org/name) makes the
    card's loading examples name that Hub repo instead of the local folder.
    """
    inputs = (generations, annotations)
    target = check_replaceable_dir(out, changed=build_folder_difference, kind=BUILD_KIND, inputs=inputs)
    if record:
        _check_record_writable()
    gens = read_generations(generations)
    ann = read_annotations(annotations, integer_ids=True, invalid=invalid)  # type: ignore[arg-type]
    scored = score_dataset(gens, ann, trials=trials, seed=seed)
    stats = scored.stats
    files: dict[str, tuple[str, bytes, int]] = {}
    for config, frame in (("default", scored.default), ("annotations", scored.annotations)):
        data, nbytes = _parquet_bytes(frame, _SCHEMAS[config])
        digest = hashlib.sha256(data).hexdigest()
        files[config] = (f"data/{config}/{spec.SPLIT}-{digest[:16]}.parquet", data, nbytes)
    fingerprint = content_fingerprint([hashlib.sha256(d).hexdigest() for _, d, _ in files.values()])
    stats = {
        **stats,
        "fingerprint": fingerprint,
        "inputs": _inputs({"generations": Path(generations), "annotations": Path(annotations)}),
        "release_commit": spec.RELEASE["commit"],
        "built_with": {"fsb": __version__, "scoring": "counting", "shr_procedure": "Kiritchenko & Mohammad split-half, no Spearman-Brown"},
        "paper": {k: spec.PAPER[k] for k in ("n_annotations", "shr", "bin_counts")},
    }
    if ann.irregular:  # only with --invalid count/drop: how many quality-control rows were counted or left out
        stats["invalid"] = {"policy": invalid, "irregular": ann.irregular, "dropped": ann.dropped}
    with atomic_dir(target, changed=build_folder_difference, kind=BUILD_KIND, inputs=inputs, seal=BUILD_SEAL) as stage:
        for rel, data, _ in files.values():
            write_file(stage / rel, data)
        layout = {
            config: {"path": rel, "num_bytes": nbytes, "num_examples": len(frame), "download_size": len(data)}
            for (config, (rel, data, nbytes)), frame in zip(files.items(), (scored.default, scored.annotations))
        }
        write_file(stage / "README.md", card.render(stats, layout, load_name=hub_id or spec.NAME))
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
    return BuildResult(target.resolve(), stats, tuple(warnings))
