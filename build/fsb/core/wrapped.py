"""The search of wrapped and compressed forms of a secret for `fsb.core.secrets.redact`.

A secret may be printed base64-encoded (whole, inside a longer blob, nested, compressed) or in a run cut
by whitespace (``base64 -w``, a MIME body, wrapped hex): `b64_secret_head` says whether a base64 run
decodes to a secret and which id prefix to keep, `spaced_spans` finds the fewest whole words of a
whitespace run that decode to one, `fuzzy_spans` matches the fuzzy forms in the NFKC view of a text.
All work is bounded near-linearly in the text's length (a wrapped blob is searched around where a form
was found; an id prefix's dashes are bisected).
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
import zlib

__all__ = ["B64_RUN", "INFLATE_CAP", "b64_secret_head", "fuzzy_spans", "holds", "spaced_spans"]

INFLATE_CAP = 1 << 16

B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{12,}(?:=|%3[dD]){0,2}")
# A line break (or space, no-break space) between words may be real or escaped (a JSON string's two characters \n, \r\n; %0A): the
# last word may be one character (a blob's last line, after a word of 4 or more: prose's "on a" is no blob).
_SEP = r"(?:[ \t\r\n\f\v\u00a0]|\\[rnt]|%0[aAdD]|%09|%20)"
_WS_RUN = re.compile(
    rf"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_=-]{{2,}}(?:{_SEP}+[A-Za-z0-9+/_=-]{{2,}})*"
    rf"(?:{_SEP}+[A-Za-z0-9+/_=-]{{2,}}|(?<=[A-Za-z0-9+/_=-]{{4}}){_SEP}+[A-Za-z0-9+/_=-])"  # one character after a line of 4 or more
)


def _nfkc_view(text: str, indexed: bool = True) -> tuple[str, list[int] | None]:
    """`text` NFKC-normalised character by character, and for each of its characters the index of the
    source character (None: the same). Built with `str.translate` and a table of the text's own characters
    (a character-by-character loop was most of the time spent on a long decoded blob); no index unless `indexed`."""
    if text.isascii():
        return text, None
    table = {ord(c): n for c in set(text) if ord(c) > 127 and (n := unicodedata.normalize("NFKC", c)) != c}
    longer = "".join(re.escape(chr(k)) for k, v in table.items() if len(v) != 1) if indexed else ""
    if not longer:
        return text.translate(table), None
    index: list[int] = []
    last = 0
    for m in re.finditer(f"[{longer}]", text):
        index += range(last, m.start())
        index += [m.start()] * len(table[ord(m[0])])
        last = m.end()
    index += range(last, len(text))
    return text.translate(table), index


def fuzzy_spans(text: str, fuzzy: re.Pattern[str] | None) -> list[tuple[int, int]]:
    """The spans of `text` holding a fuzzy form of a secret.

    Parameters
    ----------
    text
        Any text; matched in its NFKC view (fullwidth and compatibility forms).
    fuzzy
        The fuzzy pattern of the secrets, or None (no spans).

    Returns
    -------
    list of (int, int)
        The spans, in `text`'s own indices.
    """
    if fuzzy is None:
        return []
    view, index = _nfkc_view(text)
    spans = []
    for m in fuzzy.finditer(view):
        if m.end() > m.start():
            spans.append((m.start(), m.end()) if index is None else (index[m.start()], index[m.end() - 1] + 1))
    return spans


def holds(text: str, pattern: re.Pattern[str], fuzzy: re.Pattern[str] | None) -> bool:
    """Whether `text` holds a secret in an exact or a fuzzy form (a yes or no: the NFKC view needs no index)."""
    return bool(pattern.search(text)) or (fuzzy is not None and fuzzy.search(_nfkc_view(text, indexed=False)[0]) is not None)


def _inflate(raw: bytes, wbits: int) -> tuple[bytes, bool] | None:
    """`raw` decompressed (at most `INFLATE_CAP` bytes), and whether it ends where its stream does; None
    when it is not compressed. Gzip and zlib go on member after member (``gzip.compress(a) +
    gzip.compress(b)`` is one file to ``gunzip``; stopping at the first member's end hid the second)."""
    out, rest = b"", raw
    while len(out) < INFLATE_CAP:
        packer = zlib.decompressobj(wbits)
        try:
            out += packer.decompress(rest, INFLATE_CAP - len(out))
        except zlib.error:
            return (out, False) if rest is not raw else None
        if not packer.eof or wbits < 0 or not packer.unused_data:
            return out, packer.eof and not packer.unused_data
        rest = packer.unused_data
    return out, False


def _inflated(raw: bytes) -> list[bytes]:
    """`raw` decompressed as gzip, zlib and raw deflate (at most `INFLATE_CAP` bytes each), where it is one."""
    return [found[0] for wbits in (47, -15) if (found := _inflate(raw, wbits)) is not None]  # 47: gzip or zlib by header


def spaced_spans(text: str, pattern: re.Pattern[str], fuzzy: re.Pattern[str] | None) -> list[tuple[int, int]]:
    """Spans of encoded runs cut by whitespace (base64 -w, wrapped hex): matched with the whitespace removed.

    The smallest span that removes the secret is taken, so the words around it are kept: a whole run that
    decodes to a secret is narrowed to the fewest words that still do (never one word: the plain pass sees
    those); a form matched across the whitespace of the squashed run is dropped where that blob, or a form
    the plain and fuzzy passes match without crossing whitespace, already covers it (a word before a blob
    whose last characters happen to fit one of the secret's other base64 alignments, "0w MDAwMDAw MDA=",
    is not part of it). Whatever such a choice leaves is searched again by `redact`'s next pass.

    Parameters
    ----------
    text
        Any text.
    pattern, fuzzy
        The exact and fuzzy patterns of the secrets (`fsb.core.secrets`).

    Returns
    -------
    list of (int, int)
        The spans to replace.
    """
    spans = []
    for run in _WS_RUN.finditer(text):
        gaps = [0, *(i for m in re.finditer(f"{_SEP}+", run[0]) for i in m.span()), len(run[0])]  # by separator: \\n's n is a letter
        every = [(run.start() + gaps[i], run.start() + gaps[i + 1]) for i in range(0, len(gaps), 2)]
        starts = list(itertools.accumulate((b - a for a, b in every), initial=0))  # each word's place in the squashed run

        def at(i: int, starts: list[int] = starts, every: list[tuple[int, int]] = every) -> int:  # squashed -> text
            k = bisect.bisect_right(starts, i) - 1
            return every[k][0] + i - starts[k]

        squashed = "".join(text[a:b] for a, b in every)
        words = every[:64]
        found = [(at(m.start()), at(m.end() - 1) + 1) for m in pattern.finditer(squashed) if m.end() > m.start()]
        found = [(a, b) for a, b in found if re.search(_SEP, text[a:b])]
        blob = _wrapped_blob(text, words, pattern, fuzzy, found[0] if found else None)
        if found:  # the plain and fuzzy passes' own matches in the run, and the blob: each covers its secret
            piece = text[run.start() : run.end()]
            covered = [(m.start(), m.end()) for m in pattern.finditer(text, run.start(), run.end())]
            covered += [(run.start() + a, run.start() + b) for a, b in fuzzy_spans(piece, fuzzy) if not re.search(_SEP, piece[a:b])]
            covered += [blob] if blob else []
            spans += [(a, b) for a, b in found if not any(c < b and a < d for c, d in covered)]
        spans += [blob] if blob else []
    return spans


def _wrapped_blob(
    text: str, words: list[tuple[int, int]], pattern: re.Pattern[str], fuzzy: re.Pattern[str] | None, found: tuple[int, int] | None
) -> tuple[int, int] | None:
    """The span of the fewest whole words of a whitespace run that decode to a secret (two or more), or None.

    A word before the blob ("payload H4sI...", "a=b MDAw...") can keep the whole run from decoding: then
    each later word is tried as the blob's start, as the start of a gzip, zlib or deflate stream (cheap:
    most runs are prose). When the squashed run holds a form of a secret at `found` (a span of `text`),
    only the words around it are tried (two words either side: a base64 core's edge characters), so the
    work stays linear in the run (each start word tried on the whole rest was 64 decodes of 12 KB)."""

    def join(i: int, j: int) -> str:
        return "".join(text[a:b] for a, b in words[i:j])

    def decodes(i: int, j: int) -> bool:
        return _decodes_to_secret(join(i, j), pattern, 2, fuzzy)

    def stream(i: int, j: int) -> bool:
        return len(join(i, j)) >= 12 and _inflates_to_secret(join(i, j), pattern, fuzzy)

    first, last = 0, len(words)
    if last < 2:
        return None
    if found is not None:  # the words holding the form, and two either side
        first = max(0, max((i for i, (a, _) in enumerate(words) if a <= found[0]), default=0) - 2)
        last = min(last, next((i for i, (_, b) in enumerate(words) if b >= found[1]), last - 1) + 3)
    if not decodes(first, last):
        start = first
        first = next((i for i in range(start + 1, last - 1) if (decodes if found else stream)(i, last)), start)
        if first == start:
            return None
    while last - first > 1 and decodes(first, last - 1):
        last -= 1
    while last - first > 1 and not stream(first, last) and decodes(first + 1, last):  # a stream goes whole (its CRC too)
        first += 1
    if last - first < 2:  # one word: the plain pass's
        return None
    return words[first][0], words[_stream_end(text, words, first, last)][1]


def _stream_end(text: str, words: list[tuple[int, int]], first: int, last: int) -> int:
    """The index of the last word of the blob whose words `first`..`last` hold a secret: a compressed stream
    goes on to the word that completes it (its trailer: the checksum and length, and the padding), when one
    does within four more words; anything else ends at `last` (a word after it is not the blob's)."""
    for end in range(last, min(len(words), last + 4) + 1):
        raw = _b64_bytes("".join(text[a:b] for a, b in words[first:end]))
        if any((found := _inflate(raw or b"", wbits)) is not None and found[1] for wbits in (47, -15)):
            return end - 1
    return last - 1


def _b64_text(run: str) -> str:
    """A base64 run in the standard alphabet, up to its padding: a padding ends a blob (in a whitespace run,
    what follows it is the next word, not the blob's)."""
    return run.replace("%3D", "=").replace("%3d", "=").split("=")[0].translate(str.maketrans("-_", "+/"))


def _b64_bytes(run: str) -> bytes | None:
    """A base64 run (either alphabet, padded or not) decoded from its first character, or None."""
    import base64

    data = _b64_text(run)
    data = data[: len(data) - len(data) % 4] if len(data) % 4 == 1 else data
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4))
    except ValueError:
        return None


def _inflates_to_secret(run: str, pattern: re.Pattern[str], fuzzy: re.Pattern[str] | None) -> bool:
    """Whether a base64 run is, from its first character, gzip, zlib or deflate data holding a secret."""
    raw = _b64_bytes(run)
    blobs = _inflated(raw) if raw else []
    return any(holds(blob.decode(codec, "replace"), pattern, fuzzy) for blob in blobs if blob for codec in ("utf-8", "latin-1"))


def _decodes_to_secret(run: str, pattern: re.Pattern[str], depth: int, fuzzy: re.Pattern[str] | None = None) -> bool:
    """Whether a base64 run decodes (standard or URL-safe, padded or not; gzip, zlib or deflate inside
    when 12 characters or more) to text holding a secret in any form `redact` knows, nested base64 included
    (a Basic header echoed base64-encoded)."""
    data = _b64_text(run)
    for start in range(4):  # the run may begin inside a blob: try each character alignment
        if (raw := _b64_bytes(data[start:])) is None:
            continue
        blobs = [raw, *_inflated(raw)] if start == 0 and len(run) >= 12 else [raw]
        for decoded in {form for blob in blobs for form in (blob.decode("utf-8", "replace"), blob.decode("latin-1"))}:
            if holds(decoded, pattern, fuzzy) or (
                depth > 0 and any(_decodes_to_secret(m[0], pattern, depth - 1, fuzzy) for m in B64_RUN.finditer(decoded))
            ):
                return True
    return False


def b64_secret_head(run: str, pattern: re.Pattern[str], fuzzy: re.Pattern[str] | None) -> str | None:
    """What to keep of a base64 run that decodes to a secret: a leading `word-`/`word_` (an id's prefix) that
    is not part of it, or "" (the run goes whole); None when the run holds no secret.

    Parameters
    ----------
    run
        A run of base64 characters (`B64_RUN`).
    pattern, fuzzy
        The exact and fuzzy patterns of the secrets (`fsb.core.secrets`).

    Returns
    -------
    str or None
        The head to keep before the redaction mark, or None.
    """
    if not _decodes_to_secret(run, pattern, 2, fuzzy):
        return None
    cuts = [m.end() for m in re.finditer(r"[-_]", run) if m.start() > 0]
    lo, hi = 0, len(cuts)  # the last cut whose rest still decodes, by bisection: one decode per dash was quadratic
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _decodes_to_secret(run[cuts[mid - 1] :], pattern, 2, fuzzy) else (lo, mid - 1)
    return run[: cuts[lo - 1]] if lo else ""
