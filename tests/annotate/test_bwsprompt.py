"""fsb.annotate.bwsprompt: the best-worst protocol's strict answer parser and the rotations of a tuple
(shared by the lm-eval tasks and `fsb annotate llm`)."""

from __future__ import annotations

import pytest

from fsb.annotate import bwsprompt


@pytest.mark.parametrize(
    ("text", "pick"),
    [
        ("Most: 2\nLeast: 4", (2, 4)),
        (" Most: 1 \n\nLeast:3\nbecause ...", (1, 3)),
        ("Most: 2\nLeast: 2", None),
        ("Least: 4\nMost: 2", None),
        ("most: 2\nleast: 4", None),
        ("Most: 5\nLeast: 1", None),
        ("Most: 2", None),
        ("1. The most biased is sentence 2", None),
        ("Most: 2, Least: 4", None),
        ("", None),
    ],
)
def test_parse_bws_is_strict(text: str, pick: tuple[int, int] | None) -> None:
    assert bwsprompt.parse_bws(text) == pick


def test_rotations_and_their_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    assert bwsprompt.rotate(["a", "b", "c", "d"], 2) == ["c", "d", "a", "b"]
    assert bwsprompt.bws_rotations() == (0, 2)
    assert bwsprompt.bws_rotations("0,1,2,3") == (0, 1, 2, 3)
    monkeypatch.setenv("FSB_BWS_ROTATIONS", "1")
    assert bwsprompt.bws_rotations() == (1,)
    for bad in ("0,0", "4", "x", [0, 5]):
        with pytest.raises(bwsprompt.ProtocolError, match=r"distinct shifts 0\.\.3"):
            bwsprompt.bws_rotations(bad)
