"""`fsb tuples --extend`: the overlap check reports the largest overlap (issue 21), and quality-control
rows of the existing judgments follow `invalid` as in `fsb score` (issue 19)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fsb.bws import extend
from fsb.bws.tuples import read_design
from fsb.core.readers import InputError


def _existing(tuples: list[list[int]]) -> extend.Existing:
    t = np.array(tuples)
    return extend.Existing(Path("existing.csv"), t, np.unique(t), None, "id order", len(t))


def test_the_overlap_check_reports_the_largest_overlap_not_the_smallest() -> None:
    """Issue 21 mutation: reporting min instead of max shared items must fail here. New tuple A shares 3
    items with existing tuple 0 and 1 with existing tuple 1; the others share 1 with each they touch: the
    largest overlap is 3 (it breaks the at-most-2 guarantee), the smallest 1."""
    existing = _existing([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])
    new = np.array([[1, 2, 3, 5], [4, 6, 102, 103], [9, 104, 105, 106]])
    assert extend._max_shared_with(new, existing.tuples) == 3
    assert extend._max_shared_with(new[1:], existing.tuples) == 1
    report = extend.check_extension(new, np.arange(101, 107), existing, k=1)
    assert report["max_shared_items_new_with_existing"] == 3
    assert report["max_shared_items"] == 3
    among_new = np.array([[101, 102, 103, 1], [101, 102, 103, 5], [104, 105, 106, 9], [101, 104, 2, 6]])
    report = extend.check_extension(among_new, np.arange(101, 107), existing, k=2)
    assert report["max_shared_items_new_tuples"] == 3 and report["max_shared_items"] == 3


def _study(folder: Path) -> tuple[Path, Path]:
    """Judgments over items 1..12 (a repeated-item row on line 3 and a best = worst row on line 5) and 8 new items."""
    rows = [
        "1,2,3,4,1,4",
        "1,1,5,6,5,6",
        "5,6,7,8,5,8",
        "9,10,11,12,9,9",
        "1,5,9,12,12,1",
        "2,6,10,3,2,10",
        "3,7,11,4,7,4",
        "4,8,12,2,8,2",
    ]
    judgments = folder / "judgments.csv"
    judgments.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n" + "\n".join(rows) + "\n")
    new = folder / "new.txt"
    new.write_text("\n".join(str(i) for i in range(101, 109)) + "\n")
    return judgments, new


def test_extend_takes_invalid_like_fsb_score(tmp_path: Path) -> None:
    """refuse names the first quality-control row; count keeps its tuple and says so; drop leaves both
    rows out (their tuples are not existing tuples) and says so; the new tuples are written either way."""
    judgments, new = _study(tmp_path)
    with pytest.raises(InputError, match="line 3") as e:
        extend.make_extension(new, judgments, tmp_path / "a.csv", k=2)
    assert "--invalid" in str(e.value)
    counted = extend.read_existing(judgments, invalid="count")
    dropped = extend.read_existing(judgments, invalid="drop")
    assert len(counted.tuples) == 8 and len(dropped.tuples) == 6
    assert "counted irregular rows" in counted.irregular and "2 irregular rows" in dropped.irregular
    assert not any(sorted(r) == [1, 1, 5, 6] for r in dropped.tuples.tolist())
    for policy in ("count", "drop"):
        out = tmp_path / f"{policy}.csv"
        result = extend.make_extension(new, judgments, out, k=2, invalid=policy)
        assert result["existing_irregular"] and result["new_items_in_tuples"] == 8
        assert result["max_shared_items"] <= 2
        assert set(read_design(out).drop(columns="tuple_id").to_numpy().ravel().tolist()) >= set(range(101, 109))
