"""fsb.tables.wholefile: the whole-file paths (Python's reader, pyarrow over the file's bytes) name an unterminated
quote as what it is, with the line where it opens and its field, not as a row of the wrong width (issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsb.core.readers import InputError
from fsb.tables import judgments
from fsb.tables.judgments import read_annotations

HEADER = "Item1,Item2,Item3,Item4,BestItem,WorstItem\n"
ROW = "1,2,3,4,1,4\n"


@pytest.mark.parametrize("large", [False, True])
def test_an_unterminated_quote_is_named_with_its_line_and_field(tmp_path: Path, monkeypatch, large: bool) -> None:
    """A quote opened in Item2 on line 4 and never closed: Python's reader takes the rest of the file as one value,
    and the refusal said "2 fields where the header has 6". It names the quote, line 4, field Item2, on the
    small-file path and on the whole-file pyarrow path (which hands such a file to Python's reader)."""
    if large:
        monkeypatch.setattr(judgments, "FAST_READER_BYTES", 0)
    path = tmp_path / "quote.csv"
    path.write_text(HEADER + ROW * 2 + '1,"2,3,4,1,4\n' + ROW * 40, encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_annotations(path)
    message = "a quote opened in this field is never closed (the rest of the file would be one value)"
    assert str(e.value) == f"{path}, line 4, field 'Item2': {message}"


def test_an_unterminated_quote_in_the_last_field_of_the_last_row_is_named(tmp_path: Path) -> None:
    """The quote opens in the last field of the last line, so the field count matches: it was taken as the
    label "4" (newline stripped). Refused, naming WorstItem on line 3; an earlier short row is named first."""
    path = tmp_path / "last.csv"
    path.write_text(HEADER + ROW + '1,2,3,4,1,"4\n', encoding="utf-8")
    with pytest.raises(InputError, match="line 3, field 'WorstItem': a quote opened in this field is never closed"):
        read_annotations(path)
    path.write_text(HEADER + "1,2\n" + '1,2,3,4,1,"4\n', encoding="utf-8")
    with pytest.raises(InputError, match="line 2: 2 fields where the header has 6"):
        read_annotations(path)
