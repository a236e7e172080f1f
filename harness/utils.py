"""Fifty Shades of Bias tasks for lm-evaluation-harness: the functions the YAML files name
(`!function utils.X`). A thin adapter: parsing, metrics and data live in the `fsb` package
(fsb.evaluate.metrics, fsb.evaluate.fewshot, fsb.annotate.bwsprompt), the lm-eval classes in task.py.
"""

from fsb.annotate.bwsprompt import bws_prompt, bws_target, load_bws
from fsb.evaluate.fewshot import load, nearest_tenth, score_text, upstream_score_text
from fsb.evaluate.metrics import bws_agreement as _agreement
from fsb.evaluate.metrics import (
    bws_parse_rate,
    bws_pearson,
    bws_spearman,
    mse,
    pearson,
    position_metric,
    process_bws_generation,
    process_bws_loglikelihood,
    process_generation,
    process_loglikelihood,
    spearman,
)

__all__ = [
    "best_agreement",
    "bws_parse_rate",
    "bws_pearson",
    "bws_prompt",
    "bws_spearman",
    "bws_target",
    "load",
    "load_bws",
    "mse",
    "nearest_tenth",
    "pearson",
    "process_bws_generation",
    "process_bws_loglikelihood",
    "process_generation",
    "process_loglikelihood",
    "score_text",
    "spearman",
    "upstream_score_text",
    "worst_agreement",
]


def best_agreement(records: list) -> float:
    """Share of parsed presentations whose "most" choice is in the human majority's best."""
    return _agreement(records, "best")


def worst_agreement(records: list) -> float:
    """Share of parsed presentations whose "least" choice is in the human majority's worst."""
    return _agreement(records, "worst")


# The position rates: diagnostics read beside the uniform 0.25 (the YAML gives them no direction).
best_position_1 = position_metric("best", 1)
best_position_2 = position_metric("best", 2)
best_position_3 = position_metric("best", 3)
best_position_4 = position_metric("best", 4)
worst_position_1 = position_metric("worst", 1)
worst_position_2 = position_metric("worst", 2)
worst_position_3 = position_metric("worst", 3)
worst_position_4 = position_metric("worst", 4)
