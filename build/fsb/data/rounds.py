"""Annotation rounds: a rounds manifest (YAML) read and checked, each round's generations and judgments
files read and joined into one study (uids unique across rounds, labels re-coded over the union), with
each round's inputs described for the card's provenance table.

(size: about 400 lines: the manifest's checks and the join of rounds read best together, one refusal per
way a manifest or a round can be wrong.)

`fsb build --rounds MANIFEST` builds from these; `fsb.data.dataset.build_dataset` calls `merge_rounds`.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

import fifty_shades_of_bias as spec
from fsb import __version__
from fsb.core.readers import InputError, sha256_file, short
from fsb.data.annotators import annotator_figures
from fsb.tables.csvrows import Generations, read_generations
from fsb.tables.judgments import Annotations, read_annotations, refuse_unknown_ids

__all__ = [
    "ROUND_MAX",
    "Round",
    "merge_rounds",
    "provenance_stats",
    "read_rounds",
    "repeated_judgments",
    "round_inputs",
    "round_table",
]

# A round number is stored as int32 in both configs: a larger one would wrap (3000000000 -> -1294967296)
# while the card printed it as written, and one past int64 made numpy raise.
ROUND_MAX = 2**31 - 1

# The release's two inputs, as pinned (by sha256) in fifty_shades_of_bias.RELEASE.
_RELEASE_INPUTS = {"generations": "FSB/FSB_text.csv", "annotations": "FSB/fsb-tuples-annotations.csv"}


@dataclass(frozen=True)
class Round:
    """One annotation round: its number and name, its generations file (the sentences it adds) and its
    judgments file (which may also show earlier rounds' sentences)."""

    number: int
    name: str
    generations: Path
    annotations: Path


def read_rounds(manifest: str | os.PathLike[str]) -> list[Round]:
    """Read a rounds manifest (YAML): `rounds:`, a list of {round: N, name: ..., generations: FILE,
    annotations: FILE}; paths are relative to the manifest's folder, `round` defaults to the position
    (1, 2, ...) and must increase, `name` defaults to "round N"."""
    path = Path(manifest)
    from fsb.core.readers import read_utf8

    text = read_utf8(path)
    try:
        doc = yaml.load(text, Loader=_PlainLoader)  # a SafeLoader that also refuses aliases
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(path, f"not valid YAML: {getattr(e, 'problem', None) or e}", line=mark.line + 1 if mark else None) from None
    entries = doc.get("rounds") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError(path, "expected `rounds:`, a list of rounds, each with generations and annotations files", field="rounds")
    rounds: list[Round] = []
    for i, entry in enumerate(entries):
        where = f"rounds[{i}]"
        if not isinstance(entry, dict):
            raise InputError(path, "each round is a mapping with generations and annotations", field=where)
        unknown = sorted((str(k) for k in set(entry) - {"round", "name", "generations", "annotations"}), key=str)
        if unknown:
            raise InputError(path, f"unknown key {unknown[0][:40]!r} (expected round, name, generations, annotations)", field=where)
        number = entry.get("round", i + 1)
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= ROUND_MAX:
            shown = repr(number) if len(repr(number)) <= 40 else repr(number)[:37] + "..."
            raise InputError(path, f"round must be an integer from 1 to {ROUND_MAX}, got {shown}", field=f"{where}.round")
        if rounds and number <= rounds[-1].number:
            raise InputError(path, f"round {number} follows round {rounds[-1].number}: rounds must increase", field=f"{where}.round")
        files = {}
        for role in ("generations", "annotations"):
            value = entry.get(role)
            if not isinstance(value, str) or not value.strip():
                raise InputError(path, f"missing {role} file", field=f"{where}.{role}")
            files[role] = (path.parent / value).resolve() if not Path(value).is_absolute() else Path(value)
        name = entry.get("name", f"round {number}")
        problem = _name_problem(name)
        if problem:
            raise InputError(path, problem, field=f"{where}.name")
        rounds.append(Round(number, name, files["generations"], files["annotations"]))
    return rounds


class _PlainLoader(yaml.SafeLoader):
    """yaml.SafeLoader without anchors and aliases (`&a`, `*a`): a manifest needs neither, and nested
    aliases expand exponentially ("billion laughs") when the value is used."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (&name, *name) are not allowed in a rounds manifest", event.start_mark
            )
        return super().compose_node(parent, index)


NAME_MAX = 100


def _name_problem(name: object) -> str | None:
    """Why a round's `name` is not a plain one-line string of at most NAME_MAX characters, or None: the name
    goes into the card's tables and prose and into printed lines as written."""
    if not isinstance(name, str):
        return f'name must be a plain string, got a YAML {type(name).__name__} (quote it: name: "...")'
    if not name.strip():
        return "name is empty"
    if len(name) > NAME_MAX:
        return f"name has {len(name)} characters, at most {NAME_MAX} are allowed"
    bad = next((c for c in name if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        return f"name holds the control character {bad!r}: a name is one line of text"
    return None


def _refuse_shared_files(rounds: list[Round]) -> None:
    """Refuse a file listed in two rounds (or twice in one), by resolved path or by content (sha256): its
    judgments would be counted twice, inflating the judgment count and split-half reliability."""
    seen: dict[str, tuple[Round, str]] = {}
    for r in rounds:
        for role in ("generations", "annotations"):
            p = Path(getattr(r, role))
            keys = [f"path {p.resolve()}"]
            if p.is_file():
                keys.append(f"sha256 {sha256_file(p)}")
            for key in keys:
                if key in seen:
                    first, first_role = seen[key]
                    how = "is the same file" if key.startswith("path") else f"has the same content ({key[:16]}...)"
                    raise InputError(
                        p,
                        f"round {r.number}'s {role} file {how} as round {first.number}'s {first_role} file "
                        f"({Path(getattr(first, first_role)).name}): each file belongs to one round, or its rows would be counted twice",
                    )
            for key in keys:
                seen[key] = (r, role)


def repeated_judgments(read: list[tuple[Round, Generations, Annotations]]) -> list[str]:
    """Judgment rows of a later round identical to a row of an earlier round (same Item1..ItemK in order,
    BestItem, WorstItem, and Timestamp when the files have one). With the same annotator id it is the
    same judgment counted twice: refused, naming both lines. Without an annotator id two people may well
    have given the same answer to the same tuple, so such rows are counted, and a warning gives their number."""
    import pandas as pd

    def keyed(r: Round, a: Annotations) -> pd.DataFrame:
        def text(values: np.ndarray | None) -> list[str]:
            return [""] * len(a) if values is None else ["" if v is None else str(v).strip() for v in values.tolist()]

        frame = pd.DataFrame(a.items, columns=a.item_columns).assign(BestItem=a.best, WorstItem=a.worst)
        return frame.assign(Annotator=text(a.annotator), Timestamp=text(a.timestamp), row=np.arange(len(a)), round=r.number)

    frames = [keyed(r, a) for r, _, a in read]
    notes = []
    for j in range(1, len(read)):
        r, _, a = read[j]
        keys = [c for c in frames[j].columns if c not in ("row", "round")]
        earlier = pd.concat(frames[:j]).drop_duplicates(keys)
        same = frames[j].merge(earlier, on=keys, suffixes=("", "_earlier")).sort_values("row", kind="stable")
        if same.empty:
            continue
        first_of = {rr.number: aa for rr, _, aa in read}
        named = same[same["Annotator"] != ""]
        if len(named):
            hit = named.iloc[0]
            old = first_of[int(hit["round_earlier"])]
            raise InputError(
                a.path,
                f"repeats round {int(hit['round_earlier'])}'s judgment on line {old.line_of(int(hit['row_earlier']))} of {old.path.name} "
                f"(same tuple, best, worst and annotator {_short_text(hit['Annotator'])!r}"
                f"{', timestamp' if hit['Timestamp'] else ''}): the same judgment would be counted twice"
                f"{'' if hit['Timestamp'] else '; if it was judged again, give the rows a Timestamp column'}",
                line=a.line_of(int(hit["row"])),
                field="Annotator",
            )
        hit = same.iloc[0]
        notes.append(
            f"{a.path}: {len(same)} of round {r.number}'s {len(a)} judgments repeat an earlier round's row exactly "
            f"(same tuple, best and worst; no annotator id tells them apart), first on line {a.line_of(int(hit['row']))}; "
            "they are counted as new judgments: check the file is not a copy"
        )
    return notes


def _short_text(value: object, limit: int = 40) -> str:
    """`value` shortened and escaped for a one-line refusal (`fsb.core.files.short`)."""
    return short(str(value), limit)


def _read_each(rounds: list[Round], invalid: str) -> list[tuple[Round, Generations, Annotations]]:
    """Each round's generations and judgments, read and checked (judgments over 4-tuples)."""
    read = []
    all_gens = [read_generations(r.generations) for r in rounds]
    # a uid in two rounds is refused first; then an unknown id competes with every other check of a judgments
    # file for its first bad line
    owner = _owners(list(zip(rounds, all_gens)))
    known = np.fromiter(owner, dtype=np.int64, count=len(owner))
    for r, gens in zip(rounds, all_gens):
        ann = read_annotations(
            r.annotations,
            integer_ids=True,
            invalid=invalid,  # type: ignore[arg-type]
            known_ids=known,
            unknown_why="no such uid in any round's generations",
        )
        if ann.item_codes.shape[1] != spec.TUPLE_SIZE:
            k = ann.item_codes.shape[1]
            raise InputError(
                ann.path,
                f"the dataset's judgments are over {spec.TUPLE_SIZE}-tuples; this file has {k} item columns",
                line=1,
                field=f"Item{k}",
            )
        read.append((r, gens, ann))
    return read


def _owners(pairs: list[tuple[Round, Generations]]) -> dict[int, tuple[int, Path]]:
    """uid -> (round number, generations file); refuses a uid in two rounds' generations (its second line)."""
    owner: dict[int, tuple[int, Path]] = {}
    for r, gens in pairs:
        for i, uid in enumerate(gens.frame["uid"].tolist()):
            if uid in owner:
                number, where = owner[uid]
                raise InputError(
                    gens.path, f"uid {uid} is already a sentence of round {number} ({where})", line=gens.line_of(i), field="uid"
                )
            owner[uid] = (r.number, gens.path)
    return owner


def _check_uids(read: list[tuple[Round, Generations, Annotations]]) -> None:
    """Refuse a uid in two rounds' generations, a judged id in none, and a sentence no round judged."""
    owner = _owners([(r, gens) for r, gens, _ in read])
    all_uids = np.fromiter(owner, dtype=np.int64, count=len(owner))
    for _, _, ann in read:
        refuse_unknown_ids(ann, all_uids, "no such uid in any round's generations")
    judged = np.unique(np.concatenate([ann.labels for _, _, ann in read]))
    for _, gens, _ in read:
        uids = gens.frame["uid"].to_numpy()
        missing = np.flatnonzero(~np.isin(uids, judged))
        if missing.size:
            bad = int(missing[0])
            raise InputError(
                gens.path, f"no judgment of any round covers the sentence with uid {uids[bad]}", line=gens.line_of(bad), field="uid"
            )


def merge_rounds(
    rounds: list[Round], invalid: str
) -> tuple[Generations, Annotations, np.ndarray, np.ndarray, list[tuple[Round, Generations, Annotations]]]:
    """Read every round and join them: one Generations (uids unique across rounds), one Annotations
    (labels re-coded over the union), and the round of each generations row and of each judgment.
    Every annotated id must be a sentence of some round, and every sentence judged in some round."""
    _refuse_shared_files(rounds)
    read = _read_each(rounds, invalid)
    _check_uids(read)
    frame = pd.concat([g.frame for _, g, _ in read], ignore_index=True)
    gen_round = np.concatenate([np.full(len(g.frame), r.number) for r, g, _ in read])
    offsets = np.cumsum([0, *(len(g.frame) for _, g, _ in read)])

    def gen_line(i: int) -> int:
        j = int(np.searchsorted(offsets, i, side="right") - 1)
        return read[j][1].line_of(i - int(offsets[j]))

    labels = np.unique(np.concatenate([a.labels for _, _, a in read]))
    recode = [np.searchsorted(labels, a.labels) for _, _, a in read]
    item_codes = np.concatenate([m[a.item_codes] for m, (_, _, a) in zip(recode, read)])
    best = np.concatenate([m[a.best_codes] for m, (_, _, a) in zip(recode, read)])
    worst = np.concatenate([m[a.worst_codes] for m, (_, _, a) in zip(recode, read)])
    annotator = None
    if any(a.annotator is not None for _, _, a in read):
        annotator = np.concatenate([a.annotator if a.annotator is not None else np.full(len(a), None, dtype=object) for _, _, a in read])
    timestamp = None
    if any(a.timestamp is not None for _, _, a in read):
        timestamp = np.concatenate([a.timestamp if a.timestamp is not None else np.full(len(a), None, dtype=object) for _, _, a in read])
    ann_round = np.concatenate([np.full(len(a), r.number) for r, _, a in read])
    a_offsets = np.cumsum([0, *(len(a) for _, _, a in read)])

    def ann_line(i: int) -> int:
        j = int(np.searchsorted(a_offsets, i, side="right") - 1)
        return read[j][2].line_of(i - int(a_offsets[j]))

    irregular: dict[str, dict[str, Any]] = {}
    for r, _, a in read:
        for kind, v in a.irregular.items():
            if kind not in irregular:
                irregular[kind] = {"rows": 0, "first_line": v["first_line"], "file": a.path.name, "round": r.number}
            irregular[kind]["rows"] += v["rows"]
    first = read[0]
    merged_gens = Generations(first[1].path, frame, gen_line)
    merged_ann = Annotations(
        first[2].path,
        labels,
        item_codes,
        best,
        worst,
        annotator,
        ann_line,
        invalid,
        irregular,
        sum(a.dropped for _, _, a in read),
        timestamp=timestamp,
    )
    return merged_gens, merged_ann, gen_round, ann_round, read


def round_inputs(read: list[tuple[Round, Generations, Annotations]]) -> list[dict[str, Any]]:
    """Each round's inputs: file name, sha256 and rows read, whether each file is the pinned release's,
    and whether the round IS the release (both files match and no row was left out)."""
    out = []
    for r, gens, ann in read:
        files = {}
        for role, p, rows in (("generations", r.generations, len(gens.frame)), ("annotations", r.annotations, len(ann) + ann.dropped)):
            digest = sha256_file(p)
            files[role] = {
                "file": Path(p).name,
                "sha256": digest,
                "rows": int(rows),
                "pinned_release_file": digest == spec.RELEASE["files"][_RELEASE_INPUTS[role]],
            }
        is_release = all(f["pinned_release_file"] for f in files.values()) and ann.dropped == 0
        out.append({"round": r.number, "name": r.name, "inputs": files, "is_release": is_release})
    return out


def round_table(
    item_round: np.ndarray,
    ann_round: np.ndarray,
    tuple_index: np.ndarray,
    design: np.ndarray,
    annotator: np.ndarray | None,
    names: dict[int, str],
) -> list[dict[str, Any]]:
    """Per round: sentences introduced, judgments, annotators, tuples judged (new ones, and those that
    tie the round's sentences to earlier rounds' sentences)."""
    first_round_of_tuple = np.full(design.shape[0], np.iinfo(np.int64).max)
    np.minimum.at(first_round_of_tuple, tuple_index, ann_round)
    rounds_in_tuple = item_round[design]  # (n_tuples, k): the round of each sentence shown
    table = []
    for r in sorted(set(item_round.tolist()) | set(ann_round.tolist())):
        rows = ann_round == r
        judged = np.unique(tuple_index[rows])
        mixed = (rounds_in_tuple[judged] == r).any(axis=1) & (rounds_in_tuple[judged] < r).any(axis=1)
        table.append(
            {
                "round": int(r),
                "name": names.get(int(r), f"round {r}"),
                "sentences": int((item_round == r).sum()),
                "judgments": int(rows.sum()),
                "annotators": annotator_figures(None if annotator is None else annotator[rows]),
                "tuples": int(judged.size),
                "new_tuples": int((first_round_of_tuple == r).sum()),
                "tuples_linking_earlier_rounds": int(mixed.sum()),
            }
        )
    return table


def provenance_stats(stats: dict[str, Any], read: list[Any], plain: bool, fingerprint: str) -> dict[str, Any]:
    """stats plus the build's inputs (file, sha256, rows; per round), whether each round is the pinned release,
    the tools used and the paper's figures. `plain`: a build from one generations + judgments pair."""
    provenance = round_inputs(read)
    for entry, row in zip(provenance, stats["rounds"]):
        name = row["name"]
        row.update(entry)
        if entry["is_release"] and name == f"round {row['round']}" and plain:
            row["name"] = "the release"
    release_rounds = [e["round"] for e in provenance if e["is_release"]]
    return {
        **stats,
        "fingerprint": fingerprint,
        "inputs": provenance[0]["inputs"]
        if len(provenance) == 1
        else {f"round {e['round']} {role}": info for e in provenance for role, info in e["inputs"].items()},
        "release": {
            "repo": spec.RELEASE["repo"],
            "commit": spec.RELEASE["commit"],
            "rounds": release_rounds,
            # the build IS the release: one round, both files the pinned ones, nothing left out
            "is_release": release_rounds == [provenance[0]["round"]] and len(provenance) == 1,
        },
        "built_with": {
            "fsb": __version__,
            "scoring": "counting",
            "score_maxdiff": "best-worst multinomial logit (MaxDiff), ML fit, logit scale, mean of the first round's sentences = 0",
            "shr_procedure": "Kiritchenko & Mohammad split-half, no Spearman-Brown",
        },
        "paper": {k: spec.PAPER[k] for k in ("n_annotations", "shr", "bin_counts")},
    }
