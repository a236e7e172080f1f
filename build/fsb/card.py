"""Render the dataset card (README.md) from dataset_card/ and a build's figures.

The YAML header joins the static metadata (dataset_card/metadata.yaml) with `configs` and
`dataset_info` generated from `fifty_shades_of_bias.features`, so the card always declares exactly the
schema the Parquet files were written with.
"""

from __future__ import annotations

from string import Template
from typing import Any

import yaml

import fifty_shades_of_bias as spec

from . import __version__, resources

__all__ = ["metadata", "render"]


def metadata(layout: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The card's YAML: static metadata plus configs (exact data files) and dataset_info (features, sizes)."""
    meta = yaml.safe_load((resources.path("dataset_card") / "metadata.yaml").read_text(encoding="utf-8"))
    meta["configs"] = [
        {
            "config_name": config,
            "data_files": [{"split": spec.SPLIT, "path": info["path"]}],
            **({"default": True} if config == "default" else {}),
        }
        for config, info in layout.items()
    ]
    meta["dataset_info"] = [
        {
            "config_name": config,
            "features": spec.features(config)._to_yaml_list(),
            "splits": [{"name": spec.SPLIT, "num_bytes": info["num_bytes"], "num_examples": info["num_examples"]}],
            "download_size": info["download_size"],
            "dataset_size": info["num_bytes"],
        }
        for config, info in layout.items()
    ]
    return meta


def _pm(summary: dict[str, float]) -> str:
    return f"{summary['mean']:.4f} ± {summary['sd']:.4f}"


def invalid_note(invalid: dict[str, Any] | None) -> str:
    """The card's sentence on quality-control rows (`fsb build --invalid count|drop`): how many rows of each
    kind were counted as they stand or left out, and where the first one was. Empty when there were none."""
    if not invalid or not invalid.get("irregular"):
        return ""
    kinds = "; ".join(
        f"{info['rows']} with {'a repeated item' if kind == 'repeated item' else 'best = worst'} (first on line {info['first_line']})"
        for kind, info in invalid["irregular"].items()
    )
    if invalid.get("policy") == "drop":
        return f"\n\n{invalid['dropped']} irregular (quality-control) rows of the judgments file were left out (`--invalid drop`): {kinds}."
    return (
        "\n\nIrregular (quality-control) rows of the judgments file were counted as they stand, as the reference "
        f"Perl script does (`--invalid count`): {kinds} (a row can be of both kinds)."
    )


def render(stats: dict[str, Any], layout: dict[str, dict[str, Any]], load_name: str = spec.NAME) -> str:
    """The whole README.md: YAML front matter and the prose body with every figure filled in."""
    body = Template((resources.path("dataset_card") / "card.md").read_text(encoding="utf-8"))
    paper = spec.PAPER
    edges = [0.0, *spec.ANALYSIS_BIN_EDGES, 1.0]
    closing = [")"] * (len(spec.BIN_NAMES) - 1) + ["]"]
    bin_rows = "\n".join(
        f"| {name} | [{lo:g}, {hi:g}{end} | {stats['bins']['counts'][name]} | {paper['bin_counts'][name]} |"
        for name, lo, hi, end in zip(spec.BIN_NAMES, edges, edges[1:], closing)
    )
    hist = stats["histogram"]
    hist_labels = [f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(hist["edges"], hist["edges"][1:])]
    prompts = [p for p in spec.PROMPT_TYPES if stats["prompt_type"].get(p)]
    seed_rows = "\n".join(
        f"| {s} | {' | '.join(str(stats['seed_type_by_prompt_type'][s][p]) for p in prompts)} | {stats['seed_type'][s]} |"
        for s in spec.SEED_TYPES
    )
    input_rows = "\n".join(
        f"| {role} | `{info['file']}` | `{info['sha256']}` | {'yes' if info['pinned_release_file'] else 'no'} |"
        for role, info in stats["inputs"].items()
    )
    design = stats["design"]
    fields = {
        "description": spec.DESCRIPTION,
        "fsb_version": __version__,
        "load_name": load_name,
        "split": spec.SPLIT,
        "n_items": stats["n_items"],
        "n_tuples": stats["n_tuples"],
        "n_annotations": stats["n_annotations"],
        "seed_type_names": ", ".join(spec.SEED_TYPES),
        "prompt_type_names": ", ".join(spec.PROMPT_TYPES),
        "edge_1": spec.ANALYSIS_BIN_EDGES[0],
        "edge_2": spec.ANALYSIS_BIN_EDGES[1],
        "jmin": stats["judgments_per_item"]["min"],
        "jmax": stats["judgments_per_item"]["max"],
        "last_tuple": stats["n_tuples"] - 1,
        "annotator_note": "the release has none" if not stats.get("has_annotators") else "present",
        "timestamp_note": "present" if stats.get("has_timestamps") else "the input has none",
        "invalid_note": invalid_note(stats.get("invalid")),
        "appearances": (
            f"exactly {design['appearances_min']}"
            if design["appearances_min"] == design["appearances_max"]
            else f"{design['appearances_min']} to {design['appearances_max']}"
        ),
        "rounded_counts": " / ".join(str(stats["bins"]["counts_from_rounded_scores"][n]) for n in spec.BIN_NAMES),
        "per_tuple": ", ".join(f"{c} tuples judged {n} times" for n, c in stats["annotations_per_tuple"].items()),
        "max_shared": design["max_shared_items"],
        "repeated_pairs": design["repeated_pairs"],
        "trials": stats["shr"]["trials"],
        "shr_seed": stats["shr"]["seed"],
        "shr_pearson": _pm(stats["shr"]["pearson"]),
        "shr_spearman": _pm(stats["shr"]["spearman"]),
        # full-panel reliability (Spearman-Brown 2r/(1+r)) and the noise ceiling sqrt(reliability)
        "full_pearson": f"{2 * stats['shr']['pearson']['mean'] / (1 + stats['shr']['pearson']['mean']):.3f}",
        "full_spearman": f"{2 * stats['shr']['spearman']['mean'] / (1 + stats['shr']['spearman']['mean']):.3f}",
        "ceiling_pearson": f"{(2 * stats['shr']['pearson']['mean'] / (1 + stats['shr']['pearson']['mean'])) ** 0.5:.3f}",
        "ceiling_spearman": f"{(2 * stats['shr']['spearman']['mean'] / (1 + stats['shr']['spearman']['mean'])) ** 0.5:.3f}",
        "paper_n_annotations": paper["n_annotations"],
        "paper_pearson": _pm(paper["shr"]["pearson"]),
        "paper_spearman": _pm(paper["shr"]["spearman"]),
        "score_mean": f"{stats['score']['mean']:.3f}",
        "score_sd": f"{stats['score']['sd']:.3f}",
        "score_min": f"{stats['score']['min']:.3f}",
        "score_max": f"{stats['score']['max']:.3f}",
        "bin_rows": bin_rows,
        "fewshot_counts": ", ".join(
            f"[{lo:g}, {hi:g}{']' if i == 3 else ')'}: {c}"
            for i, (lo, hi, c) in enumerate(
                zip([0.0, *spec.FEWSHOT_BIN_EDGES], [*spec.FEWSHOT_BIN_EDGES, 1.0], stats["fewshot_bins"]["counts"])
            )
        ),
        "hist_header": " | ".join(hist_labels),
        "hist_rule": "---|" * len(hist_labels),
        "hist_counts": " | ".join(str(c) for c in hist["counts"]),
        "prompt_header": " | ".join(prompts),
        "prompt_rule": "---|" * len(prompts),
        "seed_rows": seed_rows,
        "release_repo": spec.RELEASE["repo"],
        "release_commit": spec.RELEASE["commit"],
        "input_rows": input_rows,
        "fingerprint": stats["fingerprint"],
        "citation": spec.CITATION,
    }
    front = yaml.safe_dump(metadata(layout), sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{front}---\n\n{body.substitute(fields)}"
