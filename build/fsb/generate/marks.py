"""Word lists and the marks they give a sentence: gendered words (pronouns and gendered nouns) and person
words (person pronouns, people by role or relation, body parts), from the project's lists (wordlists/)
or the user's own. A seed's marks say whether it names a gender, mentions a person, or neither.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsb.core.readers import InputError, read_word_list, sha256_file

__all__ = ["WORDLISTS", "Marker", "Marks", "WordList", "load_wordlist"]

WORDLISTS = Path(__file__).resolve().parents[1] / "wordlists"
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class WordList:
    """A set of lower-case words read from a file (one a line, # comments), with the file's hash."""

    words: frozenset[str]
    path: str
    sha256: str


def load_wordlist(path: str | os.PathLike[str] | None = None, *, name: str = "gendered") -> WordList:
    """Read a word list: `path`, or the project's own `wordlists/<name>_words.txt`."""
    p = Path(path) if path is not None else WORDLISTS / f"{name}_words.txt"
    words = read_word_list(p, _WORD)
    if not words:
        raise InputError(p, "the word list holds no words")
    return WordList(words, str(p), sha256_file(p))


def _words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text.lower().replace("\u2019", "'")):
        out.append(w[:-2] if w.endswith("'s") else w)
    return out


@dataclass(frozen=True)
class Marks:
    """What the word lists found in a sentence: gendered words, and person words (people, no gender)."""

    gender_words: tuple[str, ...]
    person_words: tuple[str, ...]

    @property
    def gendered(self) -> bool:
        """Names a gender: some word is in the gendered list."""
        return bool(self.gender_words)

    @property
    def person(self) -> bool:
        """Mentions a person: by a person word or a gendered one."""
        return bool(self.person_words or self.gender_words)

    def fields(self) -> dict[str, Any]:
        """The marks as a seed row's fields (what the seeds file records)."""
        return {
            "gendered": self.gendered,
            "gender_words": list(self.gender_words),
            "person": self.person,
            "person_words": list(self.person_words),
        }

    def category(self) -> str:
        """'gendered', 'person' (people but no gender: implicit) or 'none' (no person: neutral)."""
        return "gendered" if self.gendered else "person" if self.person_words else "none"


class Marker:
    """Marks sentences with the gendered and person word lists."""

    def __init__(self, gendered: WordList | None = None, person: WordList | None = None):
        self.gendered = gendered or load_wordlist(name="gendered")
        self.person = person or load_wordlist(name="person")

    def mark(self, text: str) -> Marks:
        """The gendered and person words of `text`, each once, in order of appearance."""
        words = list(dict.fromkeys(_words(text)))
        return Marks(
            tuple(w for w in words if w in self.gendered.words),
            tuple(w for w in words if w in self.person.words and w not in self.gendered.words),
        )

    def provenance(self) -> dict[str, Any]:
        """The word lists' file names and sha256, for a manifest."""
        return {
            "gendered_words": {"file": Path(self.gendered.path).name, "sha256": self.gendered.sha256},
            "person_words": {"file": Path(self.person.path).name, "sha256": self.person.sha256},
        }
