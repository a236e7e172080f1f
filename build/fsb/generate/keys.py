"""Keys that make draws reproducible: a sentence's identity for duplicate checks, and a random rank that is
the same on any machine and Python version (the sha256 of a seed and the parts, no library's random stream).

Used by seed curation, the choice of in-context examples and explain's stratified sample; kept apart so
none of them imports another for it.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["normalize", "rank_key"]

_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """A sentence's identity for duplicate checks: case-folded, whitespace collapsed, ends stripped."""
    return _SPACE.sub(" ", text).strip().casefold()


def rank_key(seed: int, *parts: object) -> str:
    """A reproducible random rank: the sha256 of the seed and the parts (lower ranks are drawn first)."""
    h = hashlib.sha256(str(int(seed)).encode())
    for part in parts:
        h.update(b"\x00" + str(part).encode("utf-8"))
    return h.hexdigest()
