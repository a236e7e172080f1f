"""A best-worst study's own words: what annotators were asked, what the two choices and a high score mean,
the construct, licence, citation and a pretty name (the study file, YAML).

`fsb build --study STUDY.yaml` words the dataset card from it, and `fsb annotate export --study` the forms
and the Label Studio config (`form_wording`, `labeling_config`). Without a file the wording is FSB's own
(`DEFAULT`). Example::

    pretty_name: Offensiveness of Reddit comments
    construct: offensiveness
    question: Which comment is the MOST offensive, and which the LEAST?
    best_label: Most offensive
    worst_label: Least offensive
    high_means: the comment is more offensive than most comments of the study
    license: cc-by-4.0
    citation: "@inproceedings{...}"
    language: [en]

Every value is one line of plain text (the citation may span lines), at most a few hundred characters:
it goes into the card's Markdown, its YAML and the Label Studio XML as written, escaped by each writer.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fsb.core.readers import InputError, read_utf8

__all__ = ["DEFAULT", "Study", "form_wording", "instructions", "labeling_config", "read_study"]

_MAX = {"citation": 4000}
_LINE_MAX = 300
_LICENSE = re.compile(r"[a-z0-9][a-z0-9.+-]{0,63}")
_LANGUAGE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})?")


@dataclass(frozen=True)
class Study:
    """What a study asked and how its data may be used. `best_label` / `worst_label` name the two choices
    (as annotators saw them); `high_means` says what a high score means; `license` is a Hub licence id."""

    pretty_name: str = "Fifty Shades of Bias"
    construct: str = "gender bias"
    question: str = "Which text is the MOST gender-biased, and which the LEAST?"
    best_label: str = "Most biased"
    worst_label: str = "Least biased"
    high_means: str = "the text is more negatively biased against a gender than the others it was compared with"
    license: str = "mit"
    citation: str = ""
    language: tuple[str, ...] = field(default=("en",))

    def as_dict(self) -> dict[str, Any]:
        """The study as plain data (stats.json's `study`)."""
        d = asdict(self)
        d["language"] = list(self.language)
        return d


DEFAULT = Study()
_KEYS = tuple(Study.__dataclass_fields__)


def _text(path: Path, key: str, value: object) -> str:
    """A study value as a checked string: plain text, not empty, one line (but a citation), no control characters."""
    if not isinstance(value, str):
        raise InputError(path, f'{key} must be a plain string, got a YAML {type(value).__name__} (quote it: {key}: "...")', field=key)
    multi = key == "citation"
    limit = _MAX.get(key, _LINE_MAX)
    if not value.strip() and not multi:
        raise InputError(path, f"{key} is empty", field=key)
    if len(value) > limit:
        raise InputError(path, f"{key} has {len(value)} characters, at most {limit} are allowed", field=key)
    allowed = {"\n", "\t"} if multi else set()
    bad = next((c for c in value if c not in allowed and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")), None)
    if bad is not None:
        raise InputError(path, f"{key} holds the control character {bad!r}" + ("" if multi else ": it is one line of text"), field=key)
    return value.strip() if not multi else value.strip("\n")


def _languages(path: Path, value: object) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and _LANGUAGE.fullmatch(v) for v in values):
        raise InputError(path, "language must be a language code (en) or a list of them ([en, de])", field="language")
    return tuple(values)


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (plain YAML keeps the last silently: a
    study file with two `question:` lines would word the forms with whichever came last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key[:40]!r} is given twice", key_node.start_mark)
            if isinstance(key, str):
                seen.add(key)
        return super().construct_mapping(node, deep)


def read_study(path: str | os.PathLike[str] | None) -> Study:
    """Read a study file (YAML mapping, keys as `Study`'s fields; missing keys take FSB's wording), or
    `DEFAULT` for None. Refuses anything else with one line naming the file and the key."""
    if path is None:
        return DEFAULT
    p = Path(path)
    text = read_utf8(p)
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(
            p, f"not valid YAML: {getattr(e, 'problem', None) or type(e).__name__}", line=mark.line + 1 if mark else None
        ) from None
    except RecursionError:
        raise InputError(p, "not valid YAML (nested too deeply)") from None
    if not isinstance(doc, dict):
        raise InputError(p, f"a study file is a mapping of {', '.join(_KEYS)}")
    unknown = sorted(str(k) for k in doc if k not in _KEYS)
    if unknown:
        raise InputError(p, f"unknown key {unknown[0][:40]!r} (expected {', '.join(_KEYS)})", field=unknown[0][:40])
    values: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "language":
            values[key] = _languages(p, value)
        else:
            values[key] = _text(p, key, value)
    if "license" in values and not _LICENSE.fullmatch(values["license"]):
        raise InputError(p, f"license must be a Hub licence id such as cc-by-4.0 or mit, got {values['license'][:40]!r}", field="license")
    study = Study(**values)
    if study.best_label.strip().casefold() == study.worst_label.strip().casefold():
        raise InputError(
            p,
            f"best_label and worst_label are the same ({study.best_label[:40]!r}): annotators could not tell the choices apart",
            field="worst_label",
        )
    return study


def form_wording(study: Study = DEFAULT) -> dict[str, str]:
    """The words a form shows: the question, the two choices' headers and what a high score means.

    For `fsb.annotate.forms.export_forms` (header line of the form) and `labeling_config`."""
    return {"question": study.question, "best": study.best_label, "worst": study.worst_label, "high_means": study.high_means}


def instructions(study: Study = DEFAULT) -> str:
    """The annotators' instructions for a forms export, as plain text (one paragraph and the two choices),
    e.g. the instructions file written beside `fsb annotate export --study` forms."""
    return (
        f"{study.question}\n\n"
        f"Each form shows a few items. Choose one item as {study.best_label!r} and one as {study.worst_label!r}; "
        f"they must differ. A high score will mean: {study.high_means}.\n"
    )


def labeling_config(k: int, study: Study = DEFAULT) -> str:
    """A Label Studio labeling config for one k-tuple, worded from the study (`fsb annotate export --study`):
    the same layout and choice names (`best`, `worst`) as `fsb.annotate.labelstudio.labeling_config`, so
    `fsb annotate import` reads the answers unchanged; the question and both headers are the study's."""
    from xml.sax.saxutils import quoteattr

    from fsb.annotate import labelstudio

    base = labelstudio.labeling_config(k, question=study.question)
    return base.replace('<Header value="Most biased" size="5"/>', f'<Header value={quoteattr(study.best_label)} size="5"/>').replace(
        '<Header value="Least biased" size="5"/>', f'<Header value={quoteattr(study.worst_label)} size="5"/>'
    )
