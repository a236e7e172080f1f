"""The dataset card (README.md) of a study build: YAML front matter (the study's metadata, `configs`,
`dataset_info` from the study's features) and the Jinja2 template dataset_card/study.md filled in.

Values a user wrote (the study's wording, file names, column names) go through `md` (literal Markdown on
one line) or `code` (inside a code span) before they reach the page.
"""

from __future__ import annotations

from typing import Any

import yaml

from fsb import __version__
from fsb.annotate.study import Study
from fsb.bws.bounds import bound_sentence
from fsb.data.annotators import agreement_table, personal_note
from fsb.data.card import annotators_phrase, invalid_note, size_category, zero_width_sentence
from fsb.data.reference import noise_ceiling, spearman_brown

__all__ = ["metadata", "render"]

_MD_SPECIAL = set("\\`*_[]<>#|~&!")
_MEANINGS = {
    "id": "the item's id, as the judgments name it",
    "text": "the item's text, from the items file",
    "score": "counting score in [0, 1]: (`score_raw` + 1) / 2",
    "score_raw": "(`n_best` - `n_worst`) / `n_judgments`, in [-1, 1]",
    "score_ci_low": "lower end of the 95% bootstrap interval of `score` (null: see below)",
    "score_ci_high": "upper end of the 95% bootstrap interval of `score`",
    "score_maxdiff": "MaxDiff (best-worst logit) utility, logit scale, mean 0",
    "score_maxdiff_ci_low": "lower end of the 95% bootstrap interval of `score_maxdiff` (null: see below)",
    "score_maxdiff_ci_high": "upper end of the 95% bootstrap interval of `score_maxdiff`",
    "n_judgments": "judgments of tuples that contained the item",
    "n_best": "times chosen as the best",
    "n_worst": "times chosen as the worst",
    "bound": "empty when the scores are estimates; else why not: best-always/worst-always (a bound, at least this extreme: in a "
    "group of items that beats (loses to) the rest of its connected part and never loses to (beats) it, e.g. chosen best/worst "
    "in every judgment that showed it), disconnected (not a bound: outside the design's largest connected part, a score on a "
    "scale of its own); reasons overlap, joined by +; see below",
}


def md(text: object) -> str:
    """`text` as literal Markdown on one line (whitespace runs become one space, active characters escaped)."""
    return "".join(f"\\{c}" if c in _MD_SPECIAL else c for c in " ".join(str(text).split()))


def code(text: object) -> str:
    """`text` inside a code span in a table cell (`|` escaped, backticks replaced)."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


def metadata(stats: dict[str, Any], layout: dict[str, dict[str, Any]], features: dict[str, Any], study: Study) -> dict[str, Any]:
    """The card's YAML: the study's name, licence and languages, configs (exact data files) and dataset_info."""
    meta: dict[str, Any] = {
        "pretty_name": study.pretty_name,
        "language": list(study.language),
        "license": study.license,
        "size_categories": [size_category(stats["n_items"])],
        "task_categories": ["text-classification"],
        "tags": ["best-worst-scaling"],
    }
    meta["configs"] = [
        {"config_name": c, "data_files": [{"split": "test", "path": info["path"]}], **({"default": True} if c == "default" else {})}
        for c, info in layout.items()
    ]
    meta["dataset_info"] = [
        {
            "config_name": c,
            "features": features[c]._to_yaml_list(),
            "splits": [{"name": "test", "num_bytes": info["num_bytes"], "num_examples": info["num_examples"]}],
            "download_size": info["download_size"],
            "dataset_size": info["num_bytes"],
        }
        for c, info in layout.items()
    ]
    return meta


def _coverage(summary: dict[str, Any]) -> str:
    cov = summary.get("coverage_on_simulated_study")
    if not cov:
        return ""
    return (
        f"On a simulated study with known truth ({cov['items']} items in 8 tuples each, {cov['judgments_per_tuple']} judgments "
        f"per tuple drawn from the best-worst logit, {cov['resamples']} resamples, seed {cov['seed']}; `fsb.data.intervals."
        f"measure_coverage`) these intervals held the truth for {cov['score']:.1%} of the items (counting: its expectation "
        f"under the design) and {cov['score_maxdiff']:.1%} (MaxDiff: the centred utility), against a nominal 95%."
    )


def _annotator_fields(stats: dict[str, Any]) -> dict[str, str]:
    people = stats["annotators"]
    if not people.get("n"):
        text = "The judgments carry no annotator ids: who made which judgment is not part of this dataset."
        return {"annotator_text": text, "personal": "No annotator ids were published.", "annotator_field": "null: the input has no ids"}
    text = f"Annotators, computed from the judgments: {annotators_phrase(people)}."
    table = agreement_table(people.get("agreement"))
    policy = people.get("published_as", {}).get("policy", "")
    field = "keyed-hash pseudonym of the annotator's id" if policy != "kept as given" else "the annotator's id as the input gave it"
    return {
        "annotator_text": text + ("\n\n" + table if table else ""),
        "personal": personal_note(people.get("published_as")),
        "annotator_field": field,
    }


def _fields(stats: dict[str, Any], columns: list[str], features: dict[str, Any]) -> dict[str, Any]:
    design, shr, iv = stats["design"], stats["shr"], stats["intervals"]
    low, high = design["appearances_min"], design["appearances_max"]
    rows = [
        {"name": code(c), "type": features["default"][c].dtype, "meaning": _MEANINGS.get(c, "a column of the items file, kept as given")}
        for c in columns
    ]
    reasons = [line for lines in iv["reasons"].values() for line in lines]
    full = spearman_brown(shr["pearson"]["mean"])
    return {
        "default_rows": rows,
        "id_type": features["default"]["id"].dtype,
        "appearances": f"exactly {low}" if low == high else f"{low} to {high}",
        "per_tuple": ", ".join(f"{c} tuples judged {n} times" for n, c in stats["annotations_per_tuple"].items()),
        "max_shared": design["max_shared_items"],
        "repeated_pairs": design["repeated_pairs"],
        "invalid_note": invalid_note(stats.get("invalid")),
        "resamples": iv["resamples"],
        "boot_seed": iv["seed"],
        "coverage": _coverage(iv),
        "null_score": iv["null"]["score"],
        "null_maxdiff": iv["null"]["score_maxdiff"],
        "bounds": bound_sentence(stats.get("bounds", {})),
        "zero_width": zero_width_sentence(iv, "items"),
        "reasons": reasons,
        "trials": shr["trials"],
        "shr_seed": shr["seed"],
        "shr_pearson": f"{shr['pearson']['mean']:.4f} ± {shr['pearson']['sd']:.4f}",
        "shr_spearman": f"{shr['spearman']['mean']:.4f} ± {shr['spearman']['sd']:.4f}",
        "full_pearson": f"{full:.3f}",
        "ceiling_pearson": f"{noise_ceiling(full):.3f}",
        "md_min": f"{stats['maxdiff']['min']:.3f}",
        "md_max": f"{stats['maxdiff']['max']:.3f}",
        "md_converged": "" if stats["maxdiff"]["converged"] else "; the optimiser stopped before its tolerance: treat with care",
    }


def render(
    stats: dict[str, Any],
    layout: dict[str, dict[str, Any]],
    features: dict[str, Any],
    study: Study,
    *,
    load_name: str,
    columns: list[str],
) -> str:
    """The whole README.md of a study build.

    Parameters
    ----------
    stats
        What stats.json holds (figures, intervals summary, annotators, inputs, fingerprint).
    layout
        Per config: path, num_bytes, num_examples, download_size of its Parquet file.
    features
        Per config: `datasets.Features` (`fsb.data.study_build.study_features`).
    study
        The wording.
    load_name, columns
        What the loading examples load; the default config's columns in order.

    Returns
    -------
    str
        Front matter and body.
    """
    from fsb.data.card import template

    fields = {
        "study": study,
        "fsb_version": __version__,
        "load_name": load_name,
        "load_where": "" if "/" in load_name else f", from the folder that holds {load_name}/",
        "split": "test",
        "n_items": stats["n_items"],
        "n_tuples": stats["n_tuples"],
        "n_annotations": stats["n_annotations"],
        "tuple_size": stats["tuple_size"],
        "timestamp_note": "present" if stats.get("has_timestamps") else "the input has none",
        "inputs": stats["inputs"],
        "fingerprint": stats["fingerprint"],
        **_fields(stats, columns, features),
        **_annotator_fields(stats),
    }
    tpl = template("study.md", filters={"md": md, "code": code})
    front = yaml.safe_dump(metadata(stats, layout, features, study), sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{front}---\n\n{tpl.render(fields)}"
