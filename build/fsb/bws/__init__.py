"""Best-worst scaling on integer-coded arrays, and on label tables: the public API of fsb's BWS wing.

    counting      per-item best/worst/appearance tallies and the counting score
    reliability   split-half reliability (the reference Perl procedure)
    designs       tuple designs with the at-most-2-shared guarantee, and their report
    extend        designs that tie new items to an existing study
    scoring       label-level scoring: annotations -> tuples -> counting or MaxDiff, with intervals
    maxdiff       the MaxDiff (best-worst multinomial logit) fit, summed per distinct tuple
    bootstrap     95% per-item bootstrap intervals over tuples, for counting and MaxDiff scores
    tuples        the design CSV of `fsb tuples`, position-balanced

The names below are re-exported so `from fsb import bws; bws.count_best_worst(...)` works, as choix does.
"""

from fsb.bws.counting import BWSCounts, count_best_worst, counting_score, encode_labels
from fsb.bws.designs import MAX_SEARCH_STEPS, MAX_TUPLES, bws_design, design_report, design_size_problem, try_swap
from fsb.bws.reliability import SplitHalfResult, split_half_reliability

__all__ = [
    "MAX_SEARCH_STEPS",
    "MAX_TUPLES",
    "BWSCounts",
    "SplitHalfResult",
    "bws_design",
    "count_best_worst",
    "counting_score",
    "design_report",
    "design_size_problem",
    "encode_labels",
    "split_half_reliability",
    "try_swap",
]
