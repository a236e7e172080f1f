"""Annotator ids in a build: keyed-hash pseudonyms by default, contact details never in the clear.

Every file a build writes (the `annotations` Parquet, stats.json, the card) carries annotator ids only as
`pseudonymise` returns them:

- by default each id becomes `anon-` + the first 16 hex digits of HMAC-SHA256(key, id). The key is 32
  random bytes (`secrets.token_bytes`) created once in $FSB_HOME/annotator-key (mode 0600) and never
  written into a dataset, so one annotator keeps one pseudonym across rounds and rebuilds on this
  machine, nobody without the key can recompute the mapping from guessed ids, and distinct ids stay
  distinct (a collision among the build's ids is refused, never merged);
- with `keep_ids=True` ids are kept as given, explicitly; even then a value that looks like an e-mail
  address, a phone number or a URL (`personal_kind`) is replaced by its pseudonym, whatever the flags.

`agreement` publishes each annotator's agreement with the leave-one-out majority
(`fsb.bws.scoring.annotator_agreement`) under the same pseudonyms.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import fifty_shades_of_bias as spec
from fsb.core.readers import InputError
from fsb.tables.judgments import Annotations

__all__ = [
    "KEY_FILE",
    "PREFIX",
    "agreement",
    "agreement_table",
    "annotator_figures",
    "annotator_key",
    "code_cell",
    "personal_kind",
    "personal_note",
    "pseudonym",
    "pseudonymise",
]

KEY_FILE = "annotator-key"
PREFIX = "anon-"
_KEY_BYTES = 32
_EMAIL = re.compile(r"[^\s@]+@[^\s@]+\.[^\s@]+")
_URL = re.compile(r"(?i)(?:[a-z][a-z0-9+.-]*://|www\.)\S+|[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|edu|gov|io|co|de|uk|fr)(?:/\S*)?")
_PHONE = re.compile(r"\+?[0-9][0-9 ().-]{5,}[0-9]")


def personal_kind(value: str) -> str | None:
    """ "e-mail", "phone" or "url" when `value` looks like one (anywhere in it), else None.

    A phone number is 7 to 15 digits written with a leading + or with separators (spaces, dots, dashes,
    brackets), or 10 to 15 bare digits; shorter digit strings (worker numbers) are ids, not phones. It errs
    towards caution: a date such as 2024-05-01 counts as a phone number and is pseudonymised."""
    text = str(value)
    if _EMAIL.search(text):
        return "e-mail"
    if _URL.search(text):
        return "url"
    for m in _PHONE.finditer(text):
        digits = sum(c.isdigit() for c in m.group())
        separated = m.group().startswith("+") or any(c in " ().-" for c in m.group())
        if 7 <= digits <= 15 and (separated or digits >= 10):
            return "phone"
    return None


def annotator_key(home: Path | None = None) -> bytes:
    """The pseudonym key: read from HOME/annotator-key (default $FSB_HOME), created there once (32 random
    bytes, mode 0600, exclusive create so two builds never make two keys)."""
    folder = spec.home() if home is None else home
    path = folder / KEY_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as e:
        raise InputError(
            folder, f"cannot create the annotator pseudonym key here ({e.strerror}); set FSB_HOME to a writable folder"
        ) from None
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
    try:
        key = path.read_bytes()
    except OSError as e:
        raise InputError(path, f"cannot read the annotator pseudonym key ({e.strerror})") from None
    if len(key) != _KEY_BYTES:
        raise InputError(
            path,
            f"the annotator pseudonym key must be {_KEY_BYTES} bytes, this file has {len(key)}: "
            "restore it, or remove it to start new pseudonyms",
        )
    return key


def pseudonym(value: str, key: bytes, digits: int = 16) -> str:
    """The keyed-hash pseudonym of one id (stripped): `anon-` + HMAC-SHA256 hex digits."""
    return PREFIX + hmac.new(key, value.strip().encode("utf-8"), hashlib.sha256).hexdigest()[:digits]


def pseudonymise(
    values: np.ndarray | None, *, keep_ids: bool = False, key: bytes | None = None
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """The annotator column as it may be published, and what was done (for stats.json and the card).

    Parameters
    ----------
    values
        The judgments' annotator ids (None or empty cells stay None), or None when the input has none.
    keep_ids
        Keep ids as given (`--keep-annotator-ids`); e-mail, phone and URL values are pseudonymised anyway.
    key
        The HMAC key (default: `annotator_key()`).

    Returns
    -------
    (column, report)
        `report`: {"policy": "keyed-hash pseudonyms" | "kept as given", "ids": distinct ids,
        "personal_values": {kind: distinct ids of that kind, replaced}}; column None when values is None.
    """
    if values is None:
        return None, {"policy": "none in the input", "ids": 0, "personal_values": {}}
    raw = ["" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip() for v in values.tolist()]
    distinct = sorted({v for v in raw if v})
    kinds = {v: personal_kind(v) for v in distinct}
    key = annotator_key() if key is None and (not keep_ids or any(kinds.values())) else key
    mapping: dict[str, str] = {}
    for v in distinct:
        mapping[v] = v if keep_ids and kinds[v] is None else pseudonym(v, key)  # type: ignore[arg-type]
    if len(set(mapping.values())) != len(mapping):
        raise InputError(
            "annotator ids", "two distinct annotator ids would be published as one id (a kept id equals another's pseudonym): rename one"
        )
    column = np.array([mapping[v] if v else None for v in raw], dtype=object)
    counted: dict[str, int] = {}
    for kind in kinds.values():
        if kind:
            counted[kind] = counted.get(kind, 0) + 1
    policy = "kept as given" if keep_ids else "keyed-hash pseudonyms"
    return column, {"policy": policy, "ids": len(distinct), "personal_values": dict(sorted(counted.items()))}


def agreement(ann: Annotations, published: np.ndarray | None) -> list[dict[str, Any]] | None:
    """Each annotator's agreement with the leave-one-out majority under the published ids (rounded to 4
    places), or None when there are fewer than two annotators."""
    from fsb.bws import scoring

    if published is None:
        return None
    rows = scoring.annotator_agreement(dataclasses.replace(ann, annotator=published))
    if rows is None:
        return None
    out = []
    for r in rows:
        out.append(
            {k: (None if isinstance(v, float) and np.isnan(v) else round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}
        )
    return out


def personal_note(published: dict[str, Any] | None) -> str:
    """What was done to annotator ids before publishing (the card's personal-information sentence)."""
    if not published or not published.get("ids"):
        return ""
    found = published.get("personal_values") or {}
    replaced = (
        " Values that looked like contact details were replaced by their pseudonyms whatever the options: "
        + ", ".join(f"{n} {kind} value{'s' if n != 1 else ''}" for kind, n in found.items())
        + "."
        if found
        else " No id looked like an e-mail address, a phone number or a URL (those are always pseudonymised)."
    )
    if published.get("policy") == "kept as given":
        how = "Annotator ids are published as the input gave them (`--keep-annotator-ids`, an explicit choice)."
    else:
        how = (
            "Annotator ids are keyed-hash pseudonyms (`anon-` + 16 hex digits of HMAC-SHA256 under a secret key kept "
            "outside the dataset): one annotator keeps one pseudonym across rounds and rebuilds, distinct annotators stay "
            "distinct, and nobody without the key can link a pseudonym to an id."
        )
    return how + replaced


def agreement_table(rows: list[dict[str, Any]] | None) -> str:
    """Each annotator's agreement with the leave-one-out majority, as `fsb reliability` prints it (empty
    without at least two annotators)."""
    if not rows:
        return ""

    def share(x: float | None) -> str:
        return "n/a" if x is None or x != x else f"{x:.3f}"

    head = (
        "Each annotator's agreement with the leave-one-out majority (the counting score of everyone else's judgments): "
        "the share of their best (worst) choices that pick the item the others score highest (lowest) in the tuple, "
        "ties counted as agreement; `flagged`: more than 3 robust standard deviations below the median annotator.\n\n"
        "| annotator | judgments | compared | best | worst | agreement | flagged |\n|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(
        f"| `{code_cell(r['annotator'])}` | {r['judgments']} | {r['compared']} | {share(r['best_agreement'])} | "
        f"{share(r['worst_agreement'])} | {share(r['agreement'])} | {'yes' if r.get('outlier') else 'no'} |"
        for r in rows
    )


def code_cell(text: object) -> str:
    """`text` inside a code span in a Markdown table cell: `|` escaped (GitHub tables), backticks replaced."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


def annotator_figures(annotator: np.ndarray | None) -> dict[str, Any]:
    """What the judgments say about who made them: the number of distinct annotator ids, judgments per
    annotator (min, median, max), and how many judgments carry no id."""
    if annotator is None:
        return {"n": 0, "judgments_without_id": None}
    ids = pd.Series(annotator, dtype=object)
    missing = ids.isna() | (ids.astype(str).str.strip() == "")
    per = ids[~missing].value_counts()
    return {
        "n": int(per.size),
        "judgments_per_annotator": ({"min": int(per.min()), "median": float(per.median()), "max": int(per.max())} if per.size else None),
        "judgments_without_id": int(missing.sum()),
    }
