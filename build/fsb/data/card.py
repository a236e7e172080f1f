"""Render the dataset card (README.md) from dataset_card/ and a build's figures.

The YAML header joins the static metadata (dataset_card/metadata.yaml) with `configs` and
`dataset_info` generated from `fifty_shades_of_bias.features`, so the card always declares exactly the
schema the Parquet files were written with.
"""

from __future__ import annotations

from typing import Any

import yaml

import fifty_shades_of_bias as spec
from fsb import __version__
from fsb.bws.bounds import bound_sentence
from fsb.core import resources
from fsb.data import annotators, intervals
from fsb.data.reference import noise_ceiling, spearman_brown

__all__ = ["annotators_phrase", "invalid_note", "metadata", "render", "size_category", "template"]


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


def size_category(n: int) -> str:
    """The Hub's size_categories tag for n rows (n<1K, 1K<n<10K, ...)."""
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")]
    return next((tag for bound, tag in bounds if n < bound), "10M<n<100M")


def annotators_phrase(a: dict[str, Any]) -> str:
    """What a set of judgments says about its annotators, e.g. "3 annotators (40 to 52 judgments each)"."""
    if not a.get("n"):
        return "no annotator ids"
    per = a["judgments_per_annotator"]
    each = f"{per['min']} judgments each" if per["min"] == per["max"] else f"{per['min']} to {per['max']} judgments each"
    missing = f"; {a['judgments_without_id']} judgments without an id" if a.get("judgments_without_id") else ""
    return f"{a['n']} annotator{'s' if a['n'] != 1 else ''} ({each}{missing})"


_MD_SPECIAL = set("\\`*_[]<>#|~&!")


def _md_text(text: str) -> str:
    """`text` (a user's round name) as literal Markdown on one line: whitespace runs become one space and
    Markdown's active characters are backslash-escaped, so a name cannot end a table cell (`|`), start a
    heading, a link or HTML, or add lines to the card."""
    return "".join(f"\\{c}" if c in _MD_SPECIAL else c for c in " ".join(str(text).split()))


def _code_cell(text: str) -> str:
    """`text` inside a code span in a table cell: only `|` needs escaping there (GitHub tables), and a
    backtick would end the span, so it is replaced."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


def _provenance(stats: dict[str, Any]) -> tuple[str, str]:
    """The provenance paragraph and the inputs table: the release's statement only for rounds whose two
    files match the pinned release's sha256; every other round is described by its own files."""
    release = stats.get("release", {})
    repo, commit = release.get("repo", spec.RELEASE["repo"]), release.get("commit", spec.RELEASE["commit"])
    lines, rows = [], []
    for r in stats["rounds"]:
        label = f"Round {r['round']} ({_md_text(r['name'])})"
        if r["is_release"]:
            lines.append(
                f"- {label}: the release of `{repo}` (MIT, Copyright (c) Microsoft Corporation), pinned at commit "
                f"`{commit}`; both files match the pinned release's sha256."
            )
        else:
            parts = []
            for role, info in r["inputs"].items():
                own = f" (the pinned release's file, commit `{commit}`)" if info["pinned_release_file"] else ""
                parts.append(f"{role} `{info['file']}` ({info['rows']} rows){own}")
            lines.append(f"- {label}: " + "; ".join(parts) + ". Not the release of " + f"`{repo}`.")
        for role, info in r["inputs"].items():
            rows.append(
                f"| {r['round']} | {role} | `{_code_cell(info['file'])}` | `{info['sha256']}` | {info['rows']} | "
                f"{'yes' if info['pinned_release_file'] else 'no'} |"
            )
    if release.get("is_release"):
        head = f"Built from the release of `{repo}` (MIT, Copyright (c) Microsoft Corporation), pinned at commit `{commit}`."
    elif release.get("rounds"):
        head = "Built from several rounds; only the rounds marked below are the pinned release."
    else:
        head = f"Built from the files below; none of its rounds is the release of `{repo}` (no round's files match its sha256)."
    if release.get("is_release"):
        return head, "\n".join(rows)
    return head + "\n\n" + "\n".join(lines), "\n".join(rows)


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


def _bin_tables(stats: dict[str, Any], exact_release: bool, has_release: bool) -> tuple[str, str, str]:
    """The analysis-bin table, the split-half table and the sentence under the bins: the paper's columns
    beside this build's only when a round is the pinned release."""
    paper = spec.PAPER
    edges = [0.0, *spec.ANALYSIS_BIN_EDGES, 1.0]
    closing = [")"] * (len(spec.BIN_NAMES) - 1) + ["]"]
    bin_cells = [
        (name, f"[{lo:g}, {hi:g}{end}", stats["bins"]["counts"][name])
        for name, lo, hi, end in zip(spec.BIN_NAMES, edges, edges[1:], closing)
    ]
    if has_release:
        paper_col = "paper" if exact_release else "paper (the release's sentences only)"
        bin_table = f"| analysis bin | edges | this build | {paper_col} |\n|---|---|---|---|\n" + "\n".join(
            f"| {n} | {e} | {c} | {paper['bin_counts'][n]} |" for n, e, c in bin_cells
        )
        shr_table = (
            f"| | this build ({stats['n_annotations']} judgments) | paper, Table 2 ({paper['n_annotations']} judgments"
            f"{'' if exact_release else ', the release only'}) |\n|---|---|---|\n"
            f"| Pearson | {_pm(stats['shr']['pearson'])} | {_pm(paper['shr']['pearson'])} |\n"
            f"| Spearman | {_pm(stats['shr']['spearman'])} | {_pm(paper['shr']['spearman'])} |"
        )
    else:
        bin_table = "| analysis bin | edges | this build |\n|---|---|---|\n" + "\n".join(f"| {n} | {e} | {c} |" for n, e, c in bin_cells)
        shr_table = (
            f"| | this build ({stats['n_annotations']} judgments) |\n|---|---|\n"
            f"| Pearson | {_pm(stats['shr']['pearson'])} |\n| Spearman | {_pm(stats['shr']['spearman'])} |"
        )
    if exact_release:
        rounded = " / ".join(str(stats["bins"]["counts_from_rounded_scores"][n]) for n in spec.BIN_NAMES)
        bin_text = (
            "The bin counts differ from the paper's because the released judgments were extended after the paper\n"
            "was published; the edges are the paper's and were not tuned to match. Bins here use exact scores; the\n"
            f"release's score file rounds to 3 decimals, and with those rounded scores the counts are {rounded}."
        )
    elif has_release:
        bin_text = (
            "The paper's counts describe the release's sentences as judged for the paper; this build adds later\n"
            "rounds, so its counts are not comparable one to one. The edges are the paper's; bins use exact scores."
        )
    else:
        bin_text = "The edges are the paper's analysis bins; bins use exact scores."
    return bin_table, shr_table, bin_text


def _annotator_texts(stats: dict[str, Any], exact_release: bool) -> tuple[str, str, str]:
    """The annotator sentence under the rounds, the field note of `annotator`, and the limitations sentence."""
    people = stats["annotators"]
    if people["n"]:
        annotator_text = f"Annotators, computed from the judgments: {annotators_phrase(people)}."
        annotator_note = f"{people['n']} distinct ids" + (
            f"; {people['judgments_without_id']} judgments have none" if people["judgments_without_id"] else ""
        )
        done = annotators.personal_note(people.get("published_as"))
        annotator_limits = done or f"The judgments carry pseudonymous annotator ids, not identities: {annotators_phrase(people)}."
        agreement = annotators.agreement_table(people.get("agreement"))
        if agreement:
            annotator_text += "\n\n" + agreement
    else:
        annotator_text = "The judgments carry no annotator ids: who made which judgment is not part of this dataset."
        annotator_note = "none in these judgments"
        annotator_limits = "The judgments carry no annotator ids."
    if exact_release:
        annotator_limits = "Annotator identities are not part of the release: the judgments carry no annotator ids."
    return annotator_text, annotator_note, annotator_limits


def _description(stats: dict[str, Any], exact_release: bool) -> tuple[str, str]:
    """The card's first paragraph and where the sentences came from."""
    if exact_release:
        origin = (
            f"Each of the {stats['n_items']} sentences was generated by GPT-3.5-Turbo from a seed (a StereoSet gender\n"
            "stereotype, or a COPA premise)."
        )
        return spec.DESCRIPTION, origin
    description = (
        f"{stats['n_items']} English sentences with fine-grained, comparative ratings of gender bias obtained by "
        "best-worst scaling (BWS) and scored by counting."
    )
    release_rounds = [r for r in stats["rounds"] if r["is_release"]]
    if release_rounds:
        r1 = release_rounds[0]
        origin = (
            f"Round {r1['round']}'s {r1['sentences']} sentences are the release's, generated by GPT-3.5-Turbo from a seed;\n"
            "the other rounds' sentences come from the generations files listed under Source and provenance."
        )
    else:
        origin = "Each sentence was generated from a seed; the generations files are listed under Source and provenance."
    return description, origin


def _distribution_fields(stats: dict[str, Any]) -> dict[str, Any]:
    """The score distribution's cells: few-shot bin counts, histogram, seed type by prompt type."""
    hist = stats["histogram"]
    hist_labels = [f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(hist["edges"], hist["edges"][1:])]
    prompts = [p for p in spec.PROMPT_TYPES if stats["prompt_type"].get(p)]
    fewshot = zip([0.0, *spec.FEWSHOT_BIN_EDGES], [*spec.FEWSHOT_BIN_EDGES, 1.0], stats["fewshot_bins"]["counts"])
    return {
        "score_mean": f"{stats['score']['mean']:.3f}",
        "score_sd": f"{stats['score']['sd']:.3f}",
        "score_min": f"{stats['score']['min']:.3f}",
        "score_max": f"{stats['score']['max']:.3f}",
        "fewshot_counts": ", ".join(f"[{lo:g}, {hi:g}{']' if i == 3 else ')'}: {c}" for i, (lo, hi, c) in enumerate(fewshot)),
        "hist_header": " | ".join(hist_labels),
        "hist_rule": "---|" * len(hist_labels),
        "hist_counts": " | ".join(str(c) for c in hist["counts"]),
        "prompt_header": " | ".join(prompts),
        "prompt_rule": "---|" * len(prompts),
        "seed_rows": "\n".join(
            f"| {s} | {' | '.join(str(stats['seed_type_by_prompt_type'][s][p]) for p in prompts)} | {stats['seed_type'][s]} |"
            for s in spec.SEED_TYPES
        ),
    }


def _reliability_fields(stats: dict[str, Any]) -> dict[str, Any]:
    """Split-half trials and seed, the full-panel reliability (Spearman-Brown 2r/(1+r)) and the noise ceiling."""
    shr = stats["shr"]
    full = {name: spearman_brown(shr[name]["mean"]) for name in ("pearson", "spearman")}
    return {
        "trials": shr["trials"],
        "shr_seed": shr["seed"],
        "full_pearson": f"{full['pearson']:.3f}",
        "full_spearman": f"{full['spearman']:.3f}",
        "ceiling_pearson": f"{noise_ceiling(full['pearson']):.3f}",
        "ceiling_spearman": f"{noise_ceiling(full['spearman']):.3f}",
    }


def _design_fields(stats: dict[str, Any]) -> dict[str, Any]:
    design = stats["design"]
    low, high = design["appearances_min"], design["appearances_max"]
    return {
        "n_items": stats["n_items"],
        "n_tuples": stats["n_tuples"],
        "n_annotations": stats["n_annotations"],
        "jmin": stats["judgments_per_item"]["min"],
        "jmax": stats["judgments_per_item"]["max"],
        "last_tuple": stats["n_tuples"] - 1,
        "appearances": f"exactly {low}" if low == high else f"{low} to {high}",
        "per_tuple": ", ".join(f"{c} tuples judged {n} times" for n, c in stats["annotations_per_tuple"].items()),
        "max_shared": design["max_shared_items"],
        "repeated_pairs": design["repeated_pairs"],
        "invalid_note": invalid_note(stats.get("invalid")),
    }


def _round_fields(stats: dict[str, Any]) -> dict[str, Any]:
    rounds = stats["rounds"]
    md = stats["maxdiff"]
    changes = ""
    if stats.get("changes_since"):
        ch = stats["changes_since"]
        changes = f"\n## Changes since {ch['label']}\n\nFrom `fsb diff` of {ch['label']} against this build:\n\n```\n{ch['summary']}\n```\n"
    return {
        "changes": changes,
        "round_list": ", ".join(f"{r['round']}: {_md_text(r['name'])}" for r in rounds),
        "round_rows": "\n".join(
            f"| {r['round']} | {_md_text(r['name'])} | {r['sentences']} | {r['judgments']} | {annotators_phrase(r['annotators'])} | "
            f"{r['tuples']} ({r['new_tuples']}, {r['tuples_linking_earlier_rounds']}) |"
            for r in rounds
        ),
        "anchor_round": md["anchor_round"],
        "md_min": f"{md['min']:.3f}",
        "md_max": f"{md['max']:.3f}",
        "md_spearman": f"{md['spearman_with_counting']:.4f}",
        "md_converged": "" if md["converged"] else " (the optimiser stopped before its tolerance: treat with care)",
    }


def zero_width_sentence(intervals: dict[str, Any], noun: str = "sentences") -> str:
    """The sentence on counting intervals of width 0 (empty when there are none), from the build's interval stats:
    `zero_width_score` intervals of width 0 (every resample gave the item the same counting score), of which
    `zero_width_bound` belong to best-always/worst-always items (the `bound` column) and the rest to items whose
    tallies never varied across resamples. Both are a bound or a lack of spread, not certainty."""
    n = int(intervals.get("zero_width_score", 0))
    if not n:
        return ""
    one = noun[:-1] if noun.endswith("s") else noun
    bound = int(intervals.get("zero_width_bound", 0))
    which = f"1 {one} has" if n == 1 else f"{n} {noun} have"
    parts = []
    if bound:
        parts.append(f"{bound} best-always or worst-always (the `bound` column), a bound")
    if n - bound:
        parts.append(f"{n - bound} whose judgments never varied across resamples (e.g. the same share of best and worst in every tuple)")
    return (
        f" {which} a counting interval of width 0, every resample scoring it the same: {'; '.join(parts)}. "
        "Read such an interval as no spread for the bootstrap to see, not as certainty."
    )


def _interval_fields(stats: dict[str, Any]) -> dict[str, Any]:
    """The intervals section: resamples, seed, the coverage sentence, null counts and their reasons."""
    iv = stats["intervals"]
    return {
        "resamples": iv["resamples"],
        "boot_seed": iv["seed"],
        "level": f"{iv['level']:.0%}",
        "coverage": intervals.coverage_text(iv),
        "null_score": iv["null"]["score"],
        "null_maxdiff": iv["null"]["score_maxdiff"],
        "zero_width": zero_width_sentence(iv),
        "bounds": bound_sentence(stats.get("bounds", {}), "sentences"),
        "null_reasons": "".join(f"\n- {_md_text(line)}" for lines in iv["reasons"].values() for line in lines).replace("\n", "\n\n", 1),
    }


def template(name: str, filters: dict[str, Any] | None = None) -> Any:
    """A Jinja2 template of dataset_card/ (plain text: no HTML escaping, undefined names are errors, the
    file's last newline kept), with `filters` added to the environment."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters.update(filters or {})
    return env.from_string((resources.path("dataset_card") / name).read_text(encoding="utf-8"))


def render(stats: dict[str, Any], layout: dict[str, dict[str, Any]], load_name: str = spec.NAME) -> str:
    """The whole README.md: YAML front matter and the Jinja2 template dataset_card/card.md filled in.

    Statements about the upstream release (its history, its rounded scores, its lack of annotator ids,
    the paper's figures beside ours) appear only where the inputs' sha256 match the pinned release;
    everything else is computed from the data. `load_name` is what the loading examples load: the
    folder's own name, or the Hub id it will be published as."""
    release = stats.get("release", {})
    exact_release, has_release = bool(release.get("is_release")), bool(release.get("rounds"))
    bin_table, shr_table, bin_text = _bin_tables(stats, exact_release, has_release)
    annotator_text, annotator_note, annotator_limits = _annotator_texts(stats, exact_release)
    description, origin = _description(stats, exact_release)
    provenance_text, input_rows = _provenance(stats)
    fields = {
        "description": description,
        "origin": origin,
        "paper_note": " Where the paper's figures differ, both are shown." if has_release else "",
        "fsb_version": __version__,
        "load_name": load_name,
        "load_where": "" if "/" in load_name else f", from the folder that holds {load_name}/",
        "split": spec.SPLIT,
        "seed_type_names": ", ".join(spec.SEED_TYPES),
        "prompt_type_names": ", ".join(spec.PROMPT_TYPES),
        "edge_1": spec.ANALYSIS_BIN_EDGES[0],
        "edge_2": spec.ANALYSIS_BIN_EDGES[1],
        "annotator_note": annotator_note,
        "annotator_text": annotator_text,
        "annotator_limits": annotator_limits,
        "timestamp_note": "present" if stats.get("has_timestamps") else "the input has none",
        "shr_table": shr_table,
        "bin_table": bin_table,
        "bin_text": bin_text,
        "provenance_text": provenance_text,
        "input_rows": input_rows,
        "fingerprint": stats["fingerprint"],
        "citation": spec.CITATION,
        **_design_fields(stats),
        **_reliability_fields(stats),
        **_distribution_fields(stats),
        **_round_fields(stats),
        **_interval_fields(stats),
    }
    meta = metadata(layout)
    meta["size_categories"] = [size_category(stats["n_items"])]
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{front}---\n\n{template('card.md').render(fields)}"
