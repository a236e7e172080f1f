"""report.md (`fsb.analyse.markdown`): its sections in order, each table as long as its data, and the same
bytes for the same analysis (the split into one function per section changed no byte: checked on the
release with `fsb analyse` before and after)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fsb.analyse import analysis, markdown

SECTIONS = [
    "# Fifty Shades of Bias: analyses",
    "## Score histogram",
    "## Analysis bins: this dataset and the paper",
    "## Seed type by bin",
    "## Prompt type by bin",
    "## Scores by seed type",
    "## Distinctive words and bigrams per bin",
]


def _frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    score = np.round(rng.uniform(0, 1, n), 4)
    words = np.where(score > 0.6, "women are emotional", np.where(score < 0.3, "the weather is mild", "a car crashed"))
    return pd.DataFrame(
        {
            "text": [f"{w} today number {i}" for i, w in enumerate(words)],
            "score": score,
            "seed_type": np.array(["gender", "race", "religion"])[np.arange(n) % 3],
            "prompt_type": np.array(["explicit", "implicit"])[np.arange(n) % 2],
        }
    )


def test_report_sections_come_in_order_and_tables_match_the_data() -> None:
    result = analysis.analyse(_frame(), min_count=2)
    text = markdown.analysis_markdown(result)
    assert text.endswith("\n") and not text.endswith("\n\n")
    positions = [text.index(s + "\n") for s in SECTIONS]
    assert positions == sorted(positions)
    histogram = text.split("## Score histogram")[1].split("##")[0]
    rows = [line for line in histogram.splitlines() if line.startswith("| [")]
    assert len(rows) == 10 and sum(int(r.split("|")[2]) for r in rows) == 60
    for label in ("Unigrams", "Bigrams"):
        for b in result["bins"]["names"]:
            assert f"### {label} marking the {b} bin" in text
    assert "`women`" in text.split("### Unigrams marking the high bin")[1].split("###")[0]
    assert markdown.analysis_markdown(result) == text  # deterministic
    assert analysis.analysis_markdown is markdown.analysis_markdown
