"""fsb.bws.coded: judgments coded as item codes and tuples identified by item set, by either coding path
(pyarrow's hash pass for large keys, numpy's stable sort otherwise), and against a given label order."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from fsb.bws.coded import encode, first_appearance_codes, tuple_ids
from fsb.tables import judgments
from tests._support import write_csv


def test_fast_and_plain_tuple_coding_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(0)
    items = rng.integers(0, 10**6, size=(300_000, 4))
    items[1::3] = items[::3][: items[1::3].shape[0]][:, ::-1]  # repeated tuples, items in another order
    fast_ti, fast_first = tuple_ids(items, 10**6)
    monkeypatch.delitem(sys.modules, "pyarrow")
    plain_ti, plain_first = tuple_ids(items, 10**6)
    assert np.array_equal(fast_ti, plain_ti) and np.array_equal(fast_first, plain_first)
    assert np.array_equal(np.sort(items[fast_first[fast_ti]], axis=1), np.sort(items, axis=1))


def test_codes_are_numbered_by_first_appearance() -> None:
    assert first_appearance_codes(np.array([7, 3, 7, 9, 3])).tolist() == [0, 1, 0, 2, 1]


def test_encode_identifies_tuples_by_item_set_and_codes_against_given_labels(tmp_path) -> None:
    path = write_csv(
        tmp_path / "a.csv",
        ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"],
        [["b", "c", "d", "e", "b", "e"], ["e", "d", "c", "b", "c", "d"], ["a", "b", "c", "d", "a", "d"]],
    )
    ann = judgments.read_annotations(path)
    own = encode(ann)
    assert own.tuple_index.tolist() == [0, 0, 1] and own.design.shape == (2, 4) and own.n_items == 5
    given = encode(ann, labels=np.array(["a", "b", "c", "d", "e", "z"]))
    assert given.n_items == 6 and given.labels[given.best].tolist() == ["b", "c", "a"]
    assert given.labels[given.design[given.tuple_index]].tolist() == [list("bcde"), list("bcde"), list("abcd")]
