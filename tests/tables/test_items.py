"""fsb.tables.items: an items list or CSV with an unclosed quote is refused at its line (new-user review: the
plain list silently merged 20 ids into one item holding line breaks; the CSV said "too few items")."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsb.core.readers import InputError
from fsb.tables.items import read_items


def test_an_unclosed_quote_in_a_plain_list_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "ids.txt"
    path.write_text("".join(f"i{i}\n" for i in range(20)) + '"bad\n' + "".join(f"i{i}\n" for i in range(21, 41)), encoding="utf-8")
    with pytest.raises(InputError, match="quote opened on this line is not closed") as err:
        read_items(path)
    assert err.value.line == 21 and err.value.field == "id"


def test_an_unclosed_quote_in_a_csv_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text('id,text\n1,a\n"2,b\n3,c\n4,d\n', encoding="utf-8")
    with pytest.raises(InputError, match="quote opened on this line is not closed") as err:
        read_items(path)
    assert err.value.line == 3


def test_a_quoted_text_may_hold_a_line_break(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text('id,text\n1,"two\nlines"\n2,b\n', encoding="utf-8")
    items = read_items(path)
    assert items.ids.tolist() == [1, 2] and items.texts.tolist() == ["two\nlines", "b"]


def test_item_ids_are_nfc_and_an_invisible_character_is_refused(tmp_path: Path) -> None:
    """Item ids follow the judgments reader's rule (issue 34, fault 4): "e" + U+0301 and "é" are one id (here a
    duplicate), and an id with a zero-width space is refused naming the code point, line and field."""
    path = tmp_path / "items.csv"
    path.write_text("id,text\ncafe\u0301,a\nx,b\n", encoding="utf-8")
    assert read_items(path).ids.tolist() == ["caf\u00e9", "x"]
    path.write_text("id,text\ncafe\u0301,a\ncaf\u00e9,b\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 3, field 'id': duplicate id 'café' \\(first seen on line 2\\)"):
        read_items(path)
    path.write_text("id,text\nx,a\nx\u200by,b\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 3, field 'id': id 'x\\\\u200by' holds U\\+200B \\(ZERO WIDTH SPACE\\)"):
        read_items(path)
