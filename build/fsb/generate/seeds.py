"""Seeds: the sentences an LLM turns into graded gender-biased text, with where each one came from.
(size: 440 lines; the source readers, the draw and the seed-file reader share one Seed record and format.)

Four seed types, as in the paper: *explicit* seeds are StereoSet gender stereotype sentences; *implicit*
seeds are COPA premises about people that name no gender (the model may fill one in); *neutral* seeds
are COPA premises about no person at all; *random* seeds are drawn from the remaining premises whatever
they mention. A premise is marked by two word lists the project keeps (wordlists/): gendered words
(pronouns and gendered nouns) and person words (person pronouns, people by role or relation, body parts).

Sampling is reproducible without any library's random stream: each candidate is ranked by the sha256 of
(seed, category, text) and the lowest ranks are taken, so the same inputs and seed give the same seeds
on any machine and Python version, and adding candidates never reshuffles the ones already ranked.

`read_seeds` loads seed files for `fsb generate`: `fsb seeds` JSONL, plain text (one seed a line, the type
from `TYPE=FILE` or the file name) or a folder of them (the release's seeds/ folder loads as it is).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fifty_shades_of_bias as spec
from fsb.core.output import recover_units, write_unit
from fsb.core.readers import InputError, iter_jsonl, quoted, read_utf8, sha256_file
from fsb.generate.keys import normalize, rank_key
from fsb.generate.marks import Marker

__all__ = [
    "DEFAULT_COUNTS",
    "Seed",
    "SourceSentence",
    "curate",
    "ranked_draw",
    "read_copa",
    "read_seeds",
    "read_stereoset",
    "seed_type_from_name",
    "summarize",
    "write_seeds",
]

# The paper's seed counts per type (explicit, implicit, neutral, random): each seed is used once per format.
DEFAULT_COUNTS: dict[str, int] = {"explicit": 150, "implicit": 150, "neutral": 150, "random": 50}
# The release's seed files name explicit "explict"; both spellings name the type.
_TYPE_ALIASES = {"explicit": "explicit", "explict": "explicit", "implicit": "implicit", "neutral": "neutral", "random": "random"}


# --- seeds ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    """One seed sentence of a type, with where it came from (file and line, or source and item id)."""

    text: str
    seed_type: str
    source: str
    source_id: str
    occurrence: int = 0  # >0 only for a pinned release file's repeated line, kept as the release has it
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    file: str = field(default="", compare=False, hash=False)  # where it was read from, for error messages
    line: int | None = field(default=None, compare=False, hash=False)

    def provenance(self) -> dict[str, Any]:
        """The seed's origin as stored beside each generation."""
        out: dict[str, Any] = {"source": self.source, "source_id": self.source_id}
        if self.occurrence:
            out["occurrence"] = self.occurrence
        for key in ("gendered", "person"):
            if key in self.extra:
                out[key] = self.extra[key]
        return out

    def to_json(self) -> dict[str, Any]:
        """The record `fsb seeds` writes (one JSON object a line)."""
        return {"seed": self.text, "seed_type": self.seed_type, "source": self.source, "source_id": self.source_id, **self.extra}


@dataclass(frozen=True)
class SourceSentence:
    """A candidate sentence read from a source file: text, item id and any source fields."""

    text: str
    source_id: str
    fields: dict[str, Any] = field(default_factory=dict)


def read_copa(path: str | os.PathLike[str]) -> list[SourceSentence]:
    """COPA premises, in file order, first occurrence of each text: the XML corpus or a JSONL with `premise`."""
    p = Path(path)
    text = read_utf8(p)
    out: list[SourceSentence] = []
    if text.lstrip().startswith("<"):
        try:
            root = ET.fromstring(text.encode("utf-8"))
        except ET.ParseError as e:
            raise InputError(p, f"not well-formed XML: {e}", line=e.position[0]) from None
        items = root.findall("item")
        if root.tag != "copa-corpus" or not items:
            raise InputError(p, "not a COPA corpus: expected <copa-corpus> with <item> elements")
        for n, item in enumerate(items, start=1):
            premise = item.find("p")
            if premise is None or not (premise.text or "").strip():
                raise InputError(p, f"item {item.get('id', n)} has no premise <p>")
            out.append(SourceSentence(premise.text.strip(), str(item.get("id", n)), {"asks_for": item.get("asks-for")}))
    else:
        for n, rec in iter_jsonl(p, what="COPA XML or JSON lines"):
            premise = rec.get("premise")
            if not isinstance(premise, str) or not premise.strip():
                raise InputError(p, "a COPA JSON line needs a non-empty 'premise'", line=n, field="premise")
            out.append(SourceSentence(premise.strip(), str(rec.get("idx", rec.get("id", n))), {"asks_for": rec.get("question")}))
    return _first_of_each(out)


def _stereotypes(p: Path, items: Iterable[Any], part: str) -> Iterable[SourceSentence]:
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(p, f"{part} item {n} is not an object")
        if item.get("bias_type") != "gender":
            continue
        data = item.get("data")
        if isinstance(data, dict) and isinstance(data.get("stereotype"), dict):  # EditBias / bias-bench style
            s = data["stereotype"]
            fields = {"target": item.get("target"), "part": part}
            yield SourceSentence(str(s.get("sentence", "")).strip(), str(s.get("id", item.get("id", n))), fields)
            continue
        sentences = item.get("sentences")
        if not isinstance(sentences, list):
            raise InputError(p, f"{part} item {item.get('id', n)}: no stereotype sentence (expected data.stereotype or sentences)")
        for s in sentences:
            if isinstance(s, dict) and s.get("gold_label") == "stereotype":
                sentence = str(s.get("sentence", "")).strip()
                if part == "intersentence":  # the stereotype continues the context sentence
                    sentence = f"{str(item.get('context', '')).strip()} {sentence}".strip()
                yield SourceSentence(sentence, str(s.get("id", item.get("id", n))), {"target": item.get("target"), "part": part})


def read_stereoset(path: str | os.PathLike[str]) -> list[SourceSentence]:
    """StereoSet gender stereotype sentences: the original dev.json, or a list of items (EditBias's gender_test.json)."""
    p = Path(path)
    try:
        doc = json.loads(read_utf8(p))
    except json.JSONDecodeError as e:
        raise InputError(p, f"not valid JSON: {e.msg}", line=e.lineno) from None
    except RecursionError:  # json's parser recurses once per level of [ or {
        raise InputError(p, "not valid JSON: nested too deeply") from None
    out: list[SourceSentence] = []
    if isinstance(doc, list):
        out.extend(_stereotypes(p, doc, "intrasentence"))
    elif isinstance(doc, dict) and isinstance(doc.get("data"), dict):
        for part in ("intrasentence", "intersentence"):
            items = doc["data"].get(part, [])
            if not isinstance(items, list):
                raise InputError(p, f"data.{part} is not a list")
            out.extend(_stereotypes(p, items, part))
    else:
        raise InputError(p, "not StereoSet: expected {'data': {'intrasentence': [...], ...}} or a list of items")
    out = [s for s in out if s.text]
    if not out:
        raise InputError(p, "holds no gender stereotype sentences (bias_type 'gender', label 'stereotype')")
    return _first_of_each(out)


def _first_of_each(sentences: Iterable[SourceSentence]) -> list[SourceSentence]:
    seen: set[str] = set()
    out = []
    for s in sentences:
        key = normalize(s.text)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def ranked_draw(pool: Sequence[SourceSentence], k: int, seed: int, category: str) -> list[SourceSentence]:
    """The k candidates of lowest rank (a hash of seed, category and normalized text), in source order.

    Each candidate's rank depends on itself only, so adding candidates to a source can only displace chosen
    ones in favour of new ones: nothing already chosen is reshuffled.

    Parameters
    ----------
    pool : sequence of SourceSentence
        The candidates, in source order.
    k : int
        How many to draw (all of them if the pool is smaller).
    seed : int
        The curation's seed.
    category : str
        The seed type drawn for (explicit, implicit, neutral, random): each type ranks independently.

    Returns
    -------
    list of SourceSentence
        The chosen candidates, in source order.
    """
    ranked = sorted(range(len(pool)), key=lambda i: rank_key(seed, category, normalize(pool[i].text)))
    return [pool[i] for i in sorted(ranked[:k])]


def curate(
    copa: str | os.PathLike[str] | None,
    stereoset: str | os.PathLike[str] | None,
    counts: dict[str, int] | None = None,
    *,
    seed: int = 0,
    marker: Marker | None = None,
) -> tuple[list[Seed], dict[str, Any]]:
    """Draw seeds of each type from the sources; returns the seeds (by type, in source order) and a manifest.

    explicit: StereoSet gender stereotypes. implicit: COPA premises with a person word and no gendered
    word. neutral: premises with neither. random: any premise not drawn for implicit or neutral.
    Too few candidates for a requested count is an error (nothing is written).
    """
    counts = {**DEFAULT_COUNTS, **(counts or {})}
    unknown = set(counts) - set(spec.SEED_TYPES)
    if unknown:
        raise ValueError(f"unknown seed types {sorted(unknown)}")
    marker = marker or Marker()
    manifest: dict[str, Any] = {"seed": seed, "counts": counts, "sources": {}, "pools": {}, **marker.provenance()}
    seeds: list[Seed] = []

    def add(chosen: list[SourceSentence], seed_type: str, source: str) -> None:
        for s in chosen:
            extra = {**{k: v for k, v in s.fields.items() if v is not None}, **marker.mark(s.text).fields()}
            seeds.append(Seed(s.text, seed_type, source, s.source_id, extra=extra))

    if counts["explicit"] > 0:
        if stereoset is None:
            raise InputError("--stereoset", "explicit seeds need a StereoSet file (or --explicit 0)")
        pool = read_stereoset(stereoset)
        manifest["sources"]["stereoset"] = {"file": Path(stereoset).name, "sha256": sha256_file(stereoset)}
        manifest["pools"]["explicit"] = len(pool)
        if len(pool) < counts["explicit"]:
            raise InputError(
                stereoset, f"asked for {counts['explicit']} explicit seeds, but it holds only {len(pool)} distinct gender stereotypes"
            )
        add(ranked_draw(pool, counts["explicit"], seed, "explicit"), "explicit", "stereoset")
    copa_needed = counts["implicit"] + counts["neutral"] + counts["random"]
    if copa_needed > 0:
        if copa is None:
            raise InputError("--copa", "implicit, neutral and random seeds need a COPA file (or set their counts to 0)")
        explicit = {normalize(s.text) for s in seeds}
        premises = [s for s in read_copa(copa) if normalize(s.text) not in explicit]
        manifest["sources"]["copa"] = {"file": Path(copa).name, "sha256": sha256_file(copa)}
        by_category: dict[str, list[SourceSentence]] = {"person": [], "none": [], "gendered": []}
        for s in premises:
            by_category[marker.mark(s.text).category()].append(s)
        manifest["pools"].update(
            {
                "copa_premises": len(premises),
                "implicit": len(by_category["person"]),
                "neutral": len(by_category["none"]),
                "gendered": len(by_category["gendered"]),
            }
        )
        taken: set[str] = set()
        for seed_type, category in (("implicit", "person"), ("neutral", "none")):
            pool = by_category[category]
            if len(pool) < counts[seed_type]:
                raise InputError(
                    copa, f"asked for {counts[seed_type]} {seed_type} seeds, but only {len(pool)} premises qualify (see the word lists)"
                )
            chosen = ranked_draw(pool, counts[seed_type], seed, seed_type)
            taken.update(normalize(s.text) for s in chosen)
            add(chosen, seed_type, "copa")
        rest = [s for s in premises if normalize(s.text) not in taken]
        manifest["pools"]["random"] = len(rest)
        if len(rest) < counts["random"]:
            raise InputError(copa, f"asked for {counts['random']} random seeds, but only {len(rest)} premises are left")
        add(ranked_draw(rest, counts["random"], seed, "random"), "random", "copa")
    order = {t: i for i, t in enumerate(spec.SEED_TYPES)}
    seeds.sort(key=lambda s: order[s.seed_type])  # stable: source order within a type
    return seeds, manifest


SEEDS_KIND = "a seeds file from `fsb seeds`"
MANIFEST_KIND = "a seeds manifest from `fsb seeds`"


def manifest_path(path: str | os.PathLike[str]) -> Path:
    """Where `write_seeds` puts the manifest of the seeds file `path`: `<name>.manifest.json` beside it."""
    p = Path(path)
    return p.with_name(p.name.removesuffix(".jsonl") + ".manifest.json")


def write_seeds(
    path: str | os.PathLike[str], seeds: Sequence[Seed], manifest: dict[str, Any] | None = None, *, force: bool = False
) -> Path | None:
    """Write seeds as JSON lines and the manifest beside them as `<name>.manifest.json`, as one unit
    (`fsb.core.output.write_unit`: a kill at any instant leaves both old or both new). Either file, if it
    exists, is replaced only if its record says fsb wrote it as that kind, unchanged (both are checked
    before either is written), or with `force`.

    Parameters
    ----------
    path
        the seeds file (JSON lines).
    seeds
        the seeds, in order.
    manifest
        what was drawn and how; None writes no manifest (``--mark``).
    force
        replace files that are not fsb's unchanged outputs (never a folder, device or FIFO).

    Returns
    -------
    Path | None
        the manifest's path, or None.
    """
    p = Path(path)
    files: dict[Path, str] = {p: "".join(json.dumps(s.to_json(), ensure_ascii=True) + "\n" for s in seeds)}
    kinds = {p: SEEDS_KIND}
    side = manifest_path(p) if manifest is not None else None
    if side is not None:
        files[side] = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        kinds[side] = MANIFEST_KIND
    write_unit(files, kinds=kinds, force=force)
    return side


def summarize(seeds: Sequence[Seed], marker: Marker) -> dict[str, dict[str, int]]:
    """Per seed type: how many seeds, how many the word lists mark gendered and mark about a person."""
    out: dict[str, dict[str, int]] = {}
    for s in seeds:
        m = marker.mark(s.text)
        row = out.setdefault(s.seed_type, {"seeds": 0, "gendered": 0, "person": 0})
        row["seeds"] += 1
        row["gendered"] += m.gendered
        row["person"] += m.person
    return out


# --- reading seed files for generation ----------------------------------------------------------------


def seed_type_from_name(name: str) -> str | None:
    """The seed type a file name mentions (explicit, explict, implicit, neutral, random), if exactly one."""
    found = {t for alias, t in _TYPE_ALIASES.items() if re.search(rf"(?<![a-z]){alias}(?![a-z])", name.lower().replace("_", " "))}
    return found.pop() if len(found) == 1 else None


def _pinned_release_file(p: Path) -> str | None:
    """The release-relative name of a file whose sha256 matches a pinned release seed file."""
    digest = None
    for rel, pinned in spec.RELEASE["files"].items():
        if rel.startswith("seeds/") and pinned is not None and Path(rel).name == p.name:
            digest = digest or sha256_file(p)
            if digest == pinned:
                return rel
    return None


def _read_text_seeds(p: Path, seed_type: str) -> tuple[list[Seed], list[str]]:
    text = read_utf8(p)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final line break
    release = _pinned_release_file(p)
    notes: list[str] = []
    seeds: list[Seed] = []
    first: dict[str, int] = {}
    for n, raw in enumerate(lines, start=1):
        line = raw.removesuffix("\r")
        if not line.strip():
            raise InputError(p, "blank line: a seed file holds one seed a line and nothing else", line=n)
        key = normalize(line)
        occurrence = 0
        if key in first:
            if release is None:
                raise InputError(p, f"duplicate seed (first on line {first[key]}): {quoted(line.strip(), 80)}", line=n)
            occurrence = sum(1 for s in seeds if normalize(s.text) == key)
            notes.append(f"{p.name}: line {n} repeats line {first[key]} ({quoted(line.strip(), 80)}); kept, as the pinned release has it")
        else:
            first[key] = n
        source = f"fsb-release:{release}" if release else f"file:{p.name}"
        seeds.append(Seed(line, seed_type, source, str(n), occurrence, file=str(p), line=n))
    if not seeds:
        raise InputError(p, "holds no seeds")
    return seeds, notes


def _read_jsonl_seeds(p: Path, forced: str | None) -> list[Seed]:
    seeds = []
    for n, rec in iter_jsonl(p):
        text = rec.get("seed")
        if not isinstance(text, str) or not text.strip():
            raise InputError(p, "missing or empty seed", line=n, field="seed")
        seed_type = forced or rec.get("seed_type")
        if seed_type not in spec.SEED_TYPES:
            raise InputError(
                p, f"unknown seed type {quoted(seed_type)}; expected one of {', '.join(spec.SEED_TYPES)}", line=n, field="seed_type"
            )
        extra = {k: v for k, v in rec.items() if k not in ("seed", "seed_type", "source", "source_id")}
        source, source_id = str(rec.get("source", f"file:{p.name}")), str(rec.get("source_id", n))
        seeds.append(Seed(text, seed_type, source, source_id, extra=extra, file=str(p), line=n))
    if not seeds:
        raise InputError(p, "holds no seeds")
    return seeds


def _expand(spec_text: str) -> list[tuple[Path, str | None]]:
    forced = None
    path_text = spec_text
    head, sep, tail = spec_text.partition("=")
    if sep and head in _TYPE_ALIASES:
        forced, path_text = _TYPE_ALIASES[head], tail
    p = Path(path_text).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in (".txt", ".jsonl") and not f.name.startswith("."))
        if not files:
            raise InputError(p, "the folder holds no seed files (*.txt, *.jsonl)")
        return [(f, forced) for f in files]
    return [(p, forced)]


def read_seeds(specs: Sequence[str]) -> tuple[list[Seed], list[str]]:
    """Read seed files: `FILE`, `TYPE=FILE` or a folder; returns the seeds and notes to show the user.

    Text files hold one seed a line, kept exactly as written (only the line break is removed); a blank
    line or a repeated seed of the same type is an error, except in a file identical to one of the
    pinned release's seed files, which loads as the release has it (its one repeated line included).
    """
    seeds: list[Seed] = []
    notes: list[str] = []
    for text in specs:
        for p, forced in _expand(text):
            with contextlib.suppress(OSError):  # a seeds file and its manifest written by a killed run: all new
                recover_units(p.parent)
            if p.suffix == ".jsonl":
                seeds.extend(_read_jsonl_seeds(p, forced))
                continue
            seed_type = forced or seed_type_from_name(p.name)
            if seed_type is None:
                types = ", ".join(spec.SEED_TYPES)
                raise InputError(p, f"cannot tell the seed type from the file name; write TYPE=FILE with TYPE one of {types}")
            got, more = _read_text_seeds(p, seed_type)
            seeds.extend(got)
            notes.extend(more)
    _check_unique(seeds)
    return seeds, notes


def _check_unique(seeds: Sequence[Seed]) -> None:
    seen: dict[tuple[str, str, int], Seed] = {}
    for s in seeds:
        key = (s.seed_type, normalize(s.text), s.occurrence)
        if key in seen:
            first = seen[key]
            where = f"first in {first.file}, line {first.line}"
            raise InputError(s.file, f"duplicate {s.seed_type} seed {quoted(s.text.strip(), 80)} ({where})", line=s.line)
        seen[key] = s
