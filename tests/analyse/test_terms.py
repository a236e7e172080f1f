"""`distinctive_terms` refuses a prior scale that is no Dirichlet prior (issue 20: `--prior-scale inf` was
accepted silently and ranked by the prior alone)."""

from __future__ import annotations

import math

import pytest

from fsb.analyse import terms
from fsb.core.errors import FsbError

GROUPS = {"low": {"cat": 9, "dog": 1, "the": 20}, "high": {"cat": 1, "dog": 9, "the": 20}}


@pytest.mark.parametrize("scale", [math.inf, -math.inf, math.nan, 0, -1.0, "x", [1]])
def test_a_prior_scale_that_is_not_a_finite_positive_number_is_refused(scale: object) -> None:
    with pytest.raises(FsbError, match="--prior-scale must be greater than 0 and finite") as e:
        terms.distinctive_terms(GROUPS, min_count=1, prior_scale=scale)  # type: ignore[arg-type]
    assert "\n" not in str(e.value)


def test_a_finite_prior_scale_ranks_the_marking_terms() -> None:
    for scale in (None, 0.5, 1e6):
        ranked = terms.distinctive_terms(GROUPS, min_count=1, prior_scale=scale)
        assert ranked["low"][0]["term"] == "cat" and ranked["high"][0]["term"] == "dog"
