"""A study's design file (fsb.bws.tuples): the item count or list it is made from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support import run_fsb


@pytest.mark.parametrize("count", ["-3", "+0", "0"])
def test_a_count_below_one_is_named_as_a_count_not_a_missing_file(count: str, tmp_path: Path) -> None:
    """The adversarial pass: `fsb tuples -3` said `-3: file not found`; a count out of range says so."""
    proc = run_fsb("tuples", count, "--out", str(tmp_path / "d.csv"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "a design needs from 1 to" in proc.stderr and "file not found" not in proc.stderr
    assert not (tmp_path / "d.csv").exists()
