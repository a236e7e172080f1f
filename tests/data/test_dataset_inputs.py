"""The dataset build's input checks: the first bad line of the judgments is reported first, whether its
problem is a bad field or an id that is not in the generations file (issue 20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsb.core.readers import InputError
from fsb.data.dataset import build_dataset
from tests._support import make_raw


def _spoil(annotations: Path, spoilt: dict[int, tuple[int, str]]) -> None:
    """Set cell (line -> (column, value)) of the judgments file; line 1 is the header."""
    lines = annotations.read_text().splitlines()
    for line, (col, value) in spoilt.items():
        cells = lines[line - 1].split(",")
        cells[col] = value
        lines[line - 1] = ",".join(cells)
    annotations.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("spoilt", "words"),
    [
        ({4: (1, "abc"), 9: (0, "999")}, ("line 4", "Item2")),  # a bad field first, an unknown id later
        ({4: (0, "999"), 9: (1, "abc")}, ("line 4", "Item1", "unknown id 999", "no such uid in")),  # the reverse
    ],
)
def test_the_first_bad_line_is_reported_first(tmp_path: Path, spoilt: dict[int, tuple[int, str]], words: tuple[str, ...]) -> None:
    gens, ann = make_raw(tmp_path / "raw", n=12)
    _spoil(ann, spoilt)
    out = tmp_path / "out"
    with pytest.raises(InputError) as e:
        build_dataset(gens, ann, out, record=False)
    message = str(e.value)
    assert all(w in message for w in words), message
    assert "line 9" not in message
    assert not out.exists()


def test_an_unknown_id_names_the_generations_file(tmp_path: Path) -> None:
    gens, ann = make_raw(tmp_path / "raw", n=12)
    _spoil(ann, {9: (2, "77")})
    with pytest.raises(InputError) as e:
        build_dataset(gens, ann, tmp_path / "out", record=False)
    message = str(e.value)
    assert "line 9" in message and "Item3" in message and f"no such uid in {gens}" in message
