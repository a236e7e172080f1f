"""Best-worst scaling on integer-coded arrays, and on label tables: the public API of fsb's BWS wing.

    counting      per-item best/worst/appearance tallies and the counting score
    reliability   split-half reliability (the reference Perl procedure)
    designs       tuple designs with the at-most-2-shared guarantee, and their report
    extend        designs that tie new items to an existing study
    coded         judgments coded for scoring: item codes, tuples identified by item set
    scoring       label-level scoring: annotations -> tuples -> counting or MaxDiff, with intervals
    maxdiff       the MaxDiff (best-worst multinomial logit) fit, summed per distinct tuple
    bootstrap     95% per-item bootstrap intervals over tuples, for counting and MaxDiff scores
    bounds        which items' scores are bounds, not estimates (the score files' and builds' `bound` column)
    value         Hollis's value scoring and Rescorla-Wagner scoring (a comparison with counting and MaxDiff)
    tuples        the design CSV of `fsb tuples`, position-balanced

The names below are re-exported so `from fsb import bws; bws.count_best_worst(...)` works, as choix does.
Those of counting are imported with the package (every scoring command needs them); those of designs and
reliability on first use (PEP 562 `__getattr__`), so `fsb score` does not load modules it never calls.
"""

from fsb.bws.counting import BWSCounts, count_best_worst, counting_score, encode_labels

_LAZY = {  # name -> the module that defines it, imported on first access
    **dict.fromkeys(
        ("MAX_SEARCH_STEPS", "MAX_TUPLES", "appearance_bound", "bws_design", "design_report", "design_size_problem", "try_swap"),
        "designs",
    ),
    **dict.fromkeys(("SplitHalfResult", "split_half_reliability"), "reliability"),
}

__all__ = [
    "MAX_SEARCH_STEPS",
    "MAX_TUPLES",
    "BWSCounts",
    "SplitHalfResult",
    "appearance_bound",
    "bws_design",
    "count_best_worst",
    "counting_score",
    "design_report",
    "design_size_problem",
    "encode_labels",
    "split_half_reliability",
    "try_swap",
]


def __getattr__(name: str) -> object:
    """A re-exported name of designs or reliability (or the module itself, `fsb.bws.designs`), imported on
    first access, then kept in the package's namespace."""
    if name not in _LAZY and name not in _LAZY.values():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f"{__name__}.{_LAZY.get(name, name)}")
    value = getattr(module, name) if name in _LAZY else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The names the package had when it imported designs and reliability eagerly."""
    return sorted({*globals(), *_LAZY, *_LAZY.values()} - {"_LAZY", "__getattr__", "__dir__"})
