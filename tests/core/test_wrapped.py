"""fsb.core.wrapped: base64, compressed and wrapped forms of a secret found in work near-linear in the text
(second adversarial review: a wrapped key beside many base64 words, an id prefix of thousands of dashes),
and the wrapped forms it used to miss (escaped line breaks, a one-character last line, gzip members)."""

from __future__ import annotations

import base64
import gzip
import json
import os
import random

import pytest

from fsb.core import wrapped
from fsb.core.secrets import REDACTED, redact

KEY = "sk-fsbADVERSARY123456"
B64 = base64.b64encode(KEY.encode()).decode()


def _wrap(text: str, width: int, sep: str) -> str:
    return sep.join(text[i : i + width] for i in range(0, len(text), width))


@pytest.fixture
def decoded_chars(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of decoded characters searched for a secret (the redaction's unit of work), summed."""
    seen = [0]
    holds = wrapped.holds

    def counting(text: str, *args: object) -> bool:
        seen[0] += len(text)
        return holds(text, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(wrapped, "holds", counting)
    return seen


def _words(n: int, size: int) -> str:
    rng = random.Random(7)
    return " ".join(base64.b64encode(rng.randbytes(size)).decode() for _ in range(n))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(_words(64, 150) + " " + _wrap(B64, 8, " "), id="64-words-then-wrapped-key"),
        pytest.param(_words(60, 1500) + " " + _wrap(B64, 8, " "), id="100KB-words-then-wrapped-key"),
        pytest.param(_wrap(base64.b64encode(random.Random(3).randbytes(27000) + KEY.encode()).decode(), 76, "\n"), id="mime-body"),
        pytest.param("x-" * 2000 + B64, id="dashes-before-key"),
        pytest.param("ab-" * 5000 + B64, id="ab-dashes-before-key"),
        pytest.param("a_" * 3000 + B64, id="underscores-before-key"),
    ],
)
def test_the_work_stays_linear_in_the_text(text: str, decoded_chars: list[int]) -> None:
    """Decoded characters searched per input character stay bounded (before: each of 64 start words was
    decoded with the whole rest of the run, and each dash of an id prefix decoded the rest: 60x to 1000x)."""
    out = redact(text, [KEY])
    assert KEY not in out and B64 not in out and REDACTED in out
    assert decoded_chars[0] <= 40 * len(text), decoded_chars[0] / len(text)


def test_an_id_prefix_is_kept_before_a_key() -> None:
    """The bisection over the dashes keeps the whole prefix, as the one-dash-at-a-time loop did."""
    assert redact("req-abc_def-" + B64, [KEY]) == "req-abc_def-" + REDACTED
    assert redact("x-" * 500 + B64, [KEY]) == "x-" * 500 + REDACTED


@pytest.mark.parametrize("sep", ["\\n", "\\r\\n", "%0A", "%0D%0A", "\n", "\u00a0", "\f"])
@pytest.mark.parametrize("width", [8, 9, 5])
def test_a_blob_wrapped_by_escaped_line_breaks_is_redacted(sep: str, width: int) -> None:
    """A JSON string (or a URL) carries a wrapped blob's line breaks as two characters: they were not
    taken as whitespace and the key was printed."""
    text = f'{{"echo": "{_wrap(B64, width, sep)}", "ok": "kept words"}}'
    out = redact(text, [KEY])
    assert out == f'{{"echo": "{REDACTED}", "ok": "kept words"}}'


def test_a_json_dumped_mime_gzip_body_is_redacted() -> None:
    body = gzip.compress(('{"prompt": "hello world, a longer body", "key": "' + KEY + '"}').encode(), mtime=0)
    text = json.dumps({"echo": base64.encodebytes(body).decode()})
    out = redact(text, [KEY])
    assert out.startswith('{"echo": "***') and "H4sI" not in out


@pytest.mark.parametrize("width", [9, 27])
def test_a_blob_whose_last_line_is_one_character_is_redacted(width: int) -> None:
    """`c2stZnNiQ\\nURWRVJTQV\\nJZMTIzNDU\\n2`: a run needed two characters a word, so the last line cut it."""
    blob = _wrap(B64, width, "\n")
    assert len(blob.rsplit("\n", 1)[1]) == 1
    assert redact(f"before {blob} after", [KEY]) == f"before {REDACTED} after"


@pytest.mark.parametrize("wrap", [False, True])
def test_a_second_gzip_member_is_inflated(wrap: bool) -> None:
    """gunzip reads member after member; inflating stopped at the first member's end and hid the key."""
    blob = base64.b64encode(gzip.compress(b"ok", mtime=0) + gzip.compress(KEY.encode(), mtime=0)).decode()
    blob = _wrap(blob, 16, "\n") if wrap else blob
    assert redact(f"data: {blob} end", [KEY]) == f"data: {REDACTED} end"


def test_gzip_members_without_the_key_and_prose_are_kept() -> None:
    blob = base64.b64encode(gzip.compress(b"ok", mtime=0) + gzip.compress(b"fine too", mtime=0)).decode()
    prose = "I am a b c d e f cat\\nwith a dog%0Aand x y z"
    assert redact(f"{blob} {prose}", [KEY]) == f"{blob} {prose}"
    other = _wrap(base64.b64encode(os.urandom(90)).decode(), 9, "\\n")
    assert redact(other, [KEY]) == other
