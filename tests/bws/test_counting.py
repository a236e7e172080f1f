"""Best-worst counting (fsb.bws.counting) on hand-made arrays: counts, scores, unseen items, label codes."""

from __future__ import annotations

import numpy as np
import pytest

from fsb import bws


def test_counting_by_hand() -> None:
    # Two tuples over items 0..4; tuple 0 judged twice, tuple 1 once.
    design = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    tuple_index = np.array([0, 0, 1])
    best = np.array([0, 1, 4])
    worst = np.array([3, 3, 1])
    c = bws.count_best_worst(design, best, worst, n_items=5, tuple_index=tuple_index)
    assert c.appearances.tolist() == [2, 3, 3, 3, 1]
    assert c.best.tolist() == [1, 1, 0, 0, 1]
    assert c.worst.tolist() == [0, 1, 0, 2, 0]
    np.testing.assert_allclose(c.score_raw, [0.5, 0.0, 0.0, -2 / 3, 1.0])
    np.testing.assert_allclose(c.score, (c.score_raw + 1) / 2)


def test_counting_without_tuple_index_and_unseen_items() -> None:
    rows = np.array([[0, 1, 2], [0, 1, 2]])
    c = bws.count_best_worst(rows, np.array([0, 0]), np.array([2, 1]), n_items=4)
    assert c.appearances.tolist() == [2, 2, 2, 0]
    assert np.isnan(c.score_raw[3]), "an item never shown has no score, not a made-up 0"
    assert c.score_raw[0] == 1.0


def test_counting_rejects_codes_beyond_n_items() -> None:
    with pytest.raises(ValueError, match="n_items"):
        bws.count_best_worst(np.array([[0, 1]]), np.array([5]), np.array([1]), n_items=2)


def test_encode_labels_is_consistent_and_order_free() -> None:
    (a, b), labels = bws.encode_labels(np.array([["x", "y"], ["z", "x"]]), np.array(["y", "z"]))
    assert labels.tolist() == ["x", "y", "z"]
    assert labels[a].tolist() == [["x", "y"], ["z", "x"]]
    assert labels[b].tolist() == ["y", "z"]


def test_chunked_bincount_counts_exactly_as_numpy() -> None:
    """`bincount` counts int32 codes a chunk at a time (no int64 copy of them all): the counts must be
    np.bincount's for every size around the chunk boundaries, 2-D codes, a minlength above and below the
    largest code, codes that first appear in a later chunk, and a negative code must still be refused.
    Catches a chunk counted twice or skipped, a lost tail, and counts cut to the first chunk's length."""
    from fsb.bws.counting import BINCOUNT_CHUNK, bincount

    rng = np.random.default_rng(0)
    for size in (0, 1, BINCOUNT_CHUNK, 2 * BINCOUNT_CHUNK, 2 * BINCOUNT_CHUNK + 1, 5 * BINCOUNT_CHUNK + 7):
        for minlength in (0, 50, 3 * BINCOUNT_CHUNK):
            codes = rng.integers(0, 100, size).astype(np.int32)
            if size > 3 * BINCOUNT_CHUNK:
                codes[-1] = 4 * BINCOUNT_CHUNK  # larger than minlength and than every earlier code
            got = bincount(codes, minlength=minlength)
            assert np.array_equal(got, np.bincount(codes, minlength=minlength)), (size, minlength)
            assert got.dtype == np.bincount(codes).dtype
    cells = rng.integers(0, 1000, (3 * BINCOUNT_CHUNK, 4)).astype(np.int32)
    assert np.array_equal(bincount(cells, minlength=1000), np.bincount(cells.ravel(), minlength=1000))
    negative = np.zeros(3 * BINCOUNT_CHUNK, dtype=np.int32)
    negative[-1] = -1
    with pytest.raises(ValueError):
        bincount(negative)
