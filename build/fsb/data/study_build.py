"""Any best-worst study -> a documented Hugging Face dataset folder (`fsb build --annotations ...`).

`build_study` needs only the judgments file (Item1..ItemK, BestItem, WorstItem, optionally Annotator and
Timestamp); an items file adds `text` and further item columns (`fsb.data.study_items`), a study file the
wording (`fsb.annotate.study`). It writes OUT as FSB's own build does (`fsb.data.dataset`): content-named
Parquet files for two configs, `default` (one row per item: counting score, MaxDiff utility, both with
95% bootstrap intervals) and `annotations` (one row per judgment, annotators pseudonymised by
`fsb.data.annotators`), stats.json and a card from dataset_card/study.md, sealed like a build, so
`datasets.load_dataset(OUT)`, `fsb diff` and `fsb publish` take it. Ids keep their type (integer ids
stay int64, string ids strings); without texts there is no `text` column.

FSB's own build (a generations file) is `fsb.data.dataset.build_dataset`, unchanged by this module.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from fsb import __version__, bws
from fsb.annotate.study import Study, read_study
from fsb.bws import maxdiff
from fsb.bws.bounds import bound_column, bound_counts, bound_sentence, score_bounds
from fsb.bws.coded import encode, tuple_ids
from fsb.core.atomic import write_file
from fsb.core.folders import atomic_dir, check_replaceable_dir
from fsb.core.readers import InputError, content_fingerprint, sha256_file
from fsb.data import annotators, intervals, study_card
from fsb.data.buildfolder import BUILD_KIND, BUILD_SEAL, build_folder_difference
from fsb.data.dataset import BuildResult, parquet_bytes
from fsb.data.study_items import ItemsFile, read_items
from fsb.tables.judgments import Annotations, read_annotations, refuse_unknown_ids

__all__ = ["SPLIT", "build_study", "score_study", "study_features", "summary_lines"]

SPLIT = "test"
_SCORES = ("score", "score_raw", "score_ci_low", "score_ci_high", "score_maxdiff", "score_maxdiff_ci_low", "score_maxdiff_ci_high")


def _value_type(dtype: Any) -> str:
    """The datasets Value dtype of a pandas column of the default config."""
    if str(dtype) == "Int64" or np.dtype("int64") == dtype:
        return "int64"
    if str(dtype) == "boolean" or dtype == np.dtype(bool):
        return "bool"
    if dtype == np.dtype("float64"):
        return "float64"
    return "string"


def study_features(default: pd.DataFrame, tuple_size: int, integer_ids: bool) -> dict[str, Any]:
    """Both configs' `datasets.Features` for a study, derived from the frames the build writes (the study
    counterpart of `fifty_shades_of_bias.features`, whose FSB schema stays as it is)."""
    from datasets import Features, List, Value

    id_type = "int64" if integer_ids else "string"
    default_features = Features({name: Value(_value_type(default[name].dtype)) for name in default.columns})
    default_features["id"] = Value(id_type)
    for name in ("n_judgments", "n_best", "n_worst"):
        default_features[name] = Value("int32")
    annotations = Features(
        {
            "tuple_id": Value("int32"),
            "items": List(Value(id_type), length=tuple_size),
            "best": Value(id_type),
            "worst": Value(id_type),
            "annotator": Value("string"),
            "timestamp": Value("string"),
        }
    )
    return {"default": default_features, "annotations": annotations}


def _arrow_schema(features: Any) -> pa.Schema:
    return features.arrow_schema.remove_metadata()


def _item_frame(ann: Annotations, items: ItemsFile | None) -> pd.DataFrame:
    """The items, sorted by id: from the items file (every judged id must be there, every item judged), or
    the judged ids alone."""
    if items is None:
        return pd.DataFrame({"id": ann.labels if ann.integer_ids else ann.labels.astype(str)})
    ids = items.frame["id"].to_numpy()
    refuse_unknown_ids(ann, ids, f"no such id in the items file {items.path.name}")
    judged = np.isin(ids, ann.labels)
    if not judged.all():
        first = int(np.flatnonzero(~judged)[0])
        raise InputError(items.path, f"no judgment covers the item with id {str(ids[first])[:40]!r}: it would have no score", field="id")
    return items.frame


def score_study(ann: Annotations, items: ItemsFile | None, *, trials: int, seed: int, n_boot: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The default config's frame (items, scores, intervals, counts) and the scoring figures (no I/O)."""
    frame = _item_frame(ann, items)
    labels = frame["id"].to_numpy()
    coded = encode(ann, labels=labels)
    counts = bws.count_best_worst(coded.design, coded.best, coded.worst, n_items=labels.size, tuple_index=coded.tuple_index)
    shr = bws.split_half_reliability(
        coded.design, coded.best, coded.worst, coded.tuple_index, n_items=labels.size, trials=trials, seed=seed
    )
    fit = maxdiff.fit_maxdiff(coded.design, coded.best, coded.worst, coded.tuple_index, labels.size)
    iv = intervals.item_intervals(coded, fit.utility, n_boot=n_boot, seed=seed)
    scores = {"score": counts.score, "score_raw": counts.score_raw, "score_ci_low": iv.score_low, "score_ci_high": iv.score_high}
    scores |= {"score_maxdiff": fit.utility, "score_maxdiff_ci_low": iv.maxdiff_low, "score_maxdiff_ci_high": iv.maxdiff_high}
    out = frame.assign(**{k: np.asarray(v, dtype=np.float64) for k, v in scores.items()})
    out = out.assign(
        n_judgments=counts.appearances.astype(np.int32), n_best=counts.best.astype(np.int32), n_worst=counts.worst.astype(np.int32)
    )
    bound = bound_column(score_bounds(coded.design, coded.best, coded.worst, coded.tuple_index, labels.size, counts))
    out = out.assign(bound=bound.astype(object))
    figures = {
        "n_items": int(labels.size),
        "n_tuples": int(coded.design.shape[0]),
        "n_annotations": len(ann),
        "tuple_size": int(coded.design.shape[1]),
        "annotations_per_tuple": {str(n): int(c) for n, c in enumerate(np.bincount(np.bincount(coded.tuple_index))) if c},
        "judgments_per_item": {"min": int(counts.appearances.min()), "max": int(counts.appearances.max())},
        "design": bws.design_report(coded.design, labels.size),
        "shr": shr.summary(),
        "score": {"mean": float(counts.score.mean()), "sd": float(counts.score.std(ddof=1)) if labels.size > 1 else 0.0},
        "maxdiff": {
            "converged": fit.converged,
            "iterations": fit.iterations,
            "min": float(fit.utility.min()),
            "max": float(fit.utility.max()),
        },
        "intervals": {**iv.summary(n_boot, seed), **intervals.zero_width_counts(iv, bound)},
        "bounds": bound_counts(bound),  # items whose scores are bounds, not estimates, by reason (the `bound` column)
    }
    return out, figures


def _annotation_frame(ann: Annotations, published: np.ndarray | None) -> pd.DataFrame:
    tuple_index, _ = tuple_ids(ann.item_codes, ann.labels.size)
    cast = (lambda a: a.astype(np.int64)) if ann.integer_ids else (lambda a: a.astype(str))
    return pd.DataFrame(
        {
            "tuple_id": tuple_index.astype(np.int32),
            "items": list(cast(ann.items)),
            "best": cast(ann.best),
            "worst": cast(ann.worst),
            "annotator": published if published is not None else [None] * len(ann),
            "timestamp": ann.timestamp if ann.timestamp is not None else [None] * len(ann),
        }
    )


def _inputs(paths: dict[str, Path | None], rows: dict[str, int]) -> dict[str, Any]:
    return {role: {"file": p.name, "sha256": sha256_file(p), "rows": rows[role]} for role, p in paths.items() if p is not None}


def _stats(ann: Annotations, figures: dict[str, Any], people: dict[str, Any], study: Study, invalid: str) -> dict[str, Any]:
    stats = dict(figures)
    stats["has_annotators"] = ann.annotator is not None
    stats["has_timestamps"] = ann.timestamp is not None
    stats["annotators"] = people
    stats["study"] = study.as_dict()
    stats["built_with"] = {
        "fsb": __version__,
        "scoring": "counting",
        "score_maxdiff": "best-worst multinomial logit (MaxDiff), ML fit, logit scale, centred to mean 0",
        "shr_procedure": "Kiritchenko & Mohammad split-half, no Spearman-Brown",
    }
    if ann.irregular:
        stats["invalid"] = {"policy": invalid, "irregular": ann.irregular, "dropped": ann.dropped}
    return stats


def build_study(
    annotations: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    items: str | os.PathLike[str] | None = None,
    study: str | os.PathLike[str] | Study | None = None,
    invalid: str = "refuse",
    trials: int = 100,
    seed: int = 0,
    n_boot: int = intervals.N_BOOT,
    keep_annotator_ids: bool = False,
    hub_id: str | None = None,
) -> BuildResult:
    """Build the dataset folder OUT from a judgments file, with an optional items file and study file.

    Parameters
    ----------
    annotations
        Judgments: Item1..ItemK, BestItem, WorstItem, optionally Annotator, Timestamp.
    out
        The folder to write; replaced only if absent, empty or an unchanged earlier build (as `fsb build`).
    items
        CSV with `id`, optional `text`, further columns (kept, typed).
    study
        A study file (`fsb.annotate.study.read_study`) or a `Study`; default FSB's wording.
    invalid
        Quality-control rows (repeated item, best = worst): "refuse", "count" (as the Perl script), "drop".
    trials, seed, n_boot
        Split-half trials, the seed of split-half and bootstrap, bootstrap resamples.
    keep_annotator_ids
        Publish annotator ids as given (e-mail, phone and URL values are pseudonymised anyway).
    hub_id
        org/name the card's loading examples name (default: OUT's folder name).

    Returns
    -------
    BuildResult
        The folder and stats.json's content.
    """
    inputs = tuple(p for p in (annotations, items, None if isinstance(study, Study) else study) if p is not None)
    target = check_replaceable_dir(out, changed=build_folder_difference, kind=BUILD_KIND, inputs=inputs)
    the_study = study if isinstance(study, Study) else read_study(study)
    ann = read_annotations(annotations, invalid=invalid)  # type: ignore[arg-type]
    item_file = read_items(items, ann.labels) if items is not None else None
    default, figures = score_study(ann, item_file, trials=trials, seed=seed, n_boot=n_boot)
    published, report = annotators.pseudonymise(ann.annotator, keep_ids=keep_annotator_ids)
    people = {**annotators.annotator_figures(published), "published_as": report, "agreement": annotators.agreement(ann, published)}
    table = _annotation_frame(ann, published)
    features = study_features(default, figures["tuple_size"], ann.integer_ids)
    files: dict[str, tuple[str, bytes, int]] = {}
    for config, frame in (("default", default), ("annotations", table)):
        data, nbytes = parquet_bytes(frame, _arrow_schema(features[config]))
        files[config] = (f"data/{config}/{SPLIT}-{hashlib.sha256(data).hexdigest()[:16]}.parquet", data, nbytes)
    stats = _stats(ann, figures, people, the_study, invalid)
    stats["fingerprint"] = content_fingerprint([hashlib.sha256(d).hexdigest() for _, d, _ in files.values()])
    rows = {"annotations": len(ann) + ann.dropped, "items": 0 if item_file is None else len(item_file.frame)}
    stats["inputs"] = _inputs({"annotations": Path(annotations), "items": None if items is None else Path(items)}, rows)
    layout = {
        config: {"path": rel, "num_bytes": nbytes, "num_examples": n, "download_size": len(data)}
        for (config, (rel, data, nbytes)), n in zip(files.items(), (len(default), len(table)))
    }
    card_text = study_card.render(stats, layout, features, the_study, load_name=hub_id or target.name, columns=list(default.columns))
    with atomic_dir(target, changed=build_folder_difference, kind=BUILD_KIND, inputs=inputs, seal=BUILD_SEAL) as stage:
        for rel, data, _ in files.values():
            write_file(stage / rel, data)
        write_file(stage / "README.md", card_text)
        write_file(stage / "stats.json", json.dumps(_json_ready(stats), indent=2, sort_keys=True, allow_nan=False) + "\n")
    return BuildResult(target.resolve(), stats)


def _json_ready(value: Any) -> Any:
    """stats as strict JSON: NaN and infinities (an undefined correlation) become null."""
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def summary_lines(stats: dict[str, Any]) -> list[str]:
    """What `fsb build --annotations ...` (no generations file) prints after a study build: counts, reliability
    with its procedure, the intervals with their method, nulls and the coverage measured on a simulated study,
    and what was done to annotator ids. Every figure says what it is comparable to."""
    iv, shr, people = stats["intervals"], stats["shr"], stats["annotators"]
    lines = [
        f"  {stats['n_items']} items, {stats['n_tuples']} tuples of {stats['tuple_size']}, {stats['n_annotations']} judgments",
        f"  split-half reliability ({shr['trials']} trials, seed {shr['seed']}, no Spearman-Brown): "
        f"Pearson {shr['pearson']['mean']:.4f} ± {shr['pearson']['sd']:.4f}",
        f"  95% intervals: bootstrap over tuples, {iv['resamples']} resamples, seed {iv['seed']}; "
        f"null for {iv['null']['score']} items (counting) and {iv['null']['score_maxdiff']} (MaxDiff)",
    ]
    cov = iv.get("coverage_on_simulated_study")
    if cov:
        lines.append(
            f"  coverage on a simulated study with known truth ({cov['items']} items): counting {cov['score']:.1%}, "
            f"MaxDiff {cov['score_maxdiff']:.1%} (nominal 95%)"
        )
    if bounds := bound_sentence(stats.get("bounds", {}), explain=False):
        lines.append(f"  {bounds}")
    published = people.get("published_as") or {}
    if people.get("n"):
        found = ", ".join(f"{n} {k}" for k, n in (published.get("personal_values") or {}).items()) or "none"
        lines.append(f"  annotators: {people['n']}, published as {published.get('policy')}; contact-like ids pseudonymised: {found}")
    return lines
