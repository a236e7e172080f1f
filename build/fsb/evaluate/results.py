"""Scored sentences from any scorer, read into one shape: lm-eval runs (`--output_path` with
`--log_samples`) and prediction files (`id,score` as CSV or JSON lines, e.g. from `fsb baseline`).

(size: about 410 lines: the dataset table, the prediction-file reader and the entries built from both share
one id rule and one set of refusals, which read best together.)

Every scorer becomes a `Scored` entry: one `TaskSamples` per few-shot set (five for an `fsb` group,
one for a single task or a prediction file), aligned by sentence id, with the gold scores and the
breakdown fields (seed type, prompt type, analysis bin). The metric functions are the ones lm-eval runs
(fsb.evaluate.metrics, which harness/utils.py hands to lm-eval), so nothing here can disagree with what
lm-eval computed. Reading the lm-eval runs themselves (`Run`, `TaskSamples`, `load_run`, `load_runs`) is
evaluate.runfiles's; they are imported here, where the entries are made of them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

import fifty_shades_of_bias as spec
from fsb.core.readers import InputError, iter_jsonl, quoted, read_utf8
from fsb.evaluate.fewshot import fewshot_sets
from fsb.evaluate.runfiles import Run, TaskSamples, load_run, load_runs
from fsb.tables.csvrows import INT64_MAX, id_problem

__all__ = [
    "DatasetTable",
    "Run",
    "Scored",
    "TaskSamples",
    "dataset_table",
    "entries_from_run",
    "load_entries",
    "load_run",
    "load_runs",
    "quiet_datasets",
    "read_predictions",
]

FIELDS = ("seed_type", "prompt_type", "bin")


# --- the dataset's side: gold scores, breakdown fields, the sentences the protocol scores -----------


@dataclass(frozen=True)
class DatasetTable:
    """The default config of a dataset, in id order, with the protocol's scored sentences marked."""

    where: str
    ids: np.ndarray
    scores: np.ndarray
    fields: dict[str, np.ndarray]
    scored: np.ndarray  # bool: outside every few-shot set (the sentences every lm-eval variant scores)
    fingerprint: str | None = None
    is_release: bool = False  # built from the pinned release's files, unchanged (its stats.json says so)

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Row positions of `ids` (all must be in the dataset)."""
        pos = np.searchsorted(self.ids, ids)
        return pos


def quiet_datasets() -> None:
    """No progress bars from `datasets` inside a report (they would leak into the printed text)."""
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def dataset_table(source: str | None = None) -> DatasetTable:
    """Read the default config of the dataset at `source` (or what the loaders find)."""
    quiet_datasets()
    where = spec.locate(source)
    rows = spec.load(source=where)[spec.SPLIT]
    ids = np.asarray(rows["id"], dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    scores = np.asarray(rows["score"], dtype=float)[order]
    fields = {}
    for name in FIELDS:
        values = rows[name]
        names = rows.features[name].names if hasattr(rows.features[name], "names") else None
        arr = np.asarray([names[v] if names is not None and isinstance(v, (int, np.integer)) else v for v in values], dtype=object)
        fields[name] = arr[order]
    in_sets = np.zeros(ids.size, dtype=bool)
    try:
        in_sets[np.concatenate(fewshot_sets(scores))] = True
    except ValueError as e:  # too few sentences in a score bin for the protocol's five few-shot sets
        raise InputError(where, f"not a dataset the fsb tasks can use: {e}") from None
    stats_path = Path(where) / "stats.json"
    try:
        stats = json.loads(read_utf8(stats_path)) if stats_path.is_file() else {}
    except ValueError as e:
        raise InputError(stats_path, f"not the JSON fsb build writes ({e}): rebuild the dataset") from None
    if not isinstance(stats, dict):
        raise InputError(stats_path, "not the JSON object fsb build writes: rebuild the dataset")
    is_release = bool((stats.get("release") or {}).get("is_release"))
    return DatasetTable(str(where), ids[order], scores, fields, ~in_sets, stats.get("fingerprint"), is_release)


# --- prediction files -------------------------------------------------------------------------------


def read_predictions(path: str | Path) -> dict[int, float]:
    """`id,score` pairs from a CSV file (header with `id` and `score`; other columns ignored) or a JSON-lines
    file (`{"id": ..., "score": ...}` a line). Every score must be a finite number; ids must be unique and
    follow the one id rule of every fsb reader (`fsb.core.tables.id_problem`: ASCII digits, no sign, no
    leading zero, no "1_000"), so that a prediction's id means the same sentence as in the generations.

    Parameters
    ----------
    path
        the predictions file (.csv, or .jsonl / .json as JSON lines).

    Returns
    -------
    dict[int, float]
        score by id.

    Raises
    ------
    InputError
        one line naming the file, the first bad line and its field."""
    p = Path(path)
    text = read_utf8(p)
    out: dict[int, float] = {}

    def add(line: int, raw_id: Any, raw_score: Any) -> None:
        text = raw_id.strip() if isinstance(raw_id, str) else json.dumps(raw_id)  # a JSON 7 is "7"; true, 7.0, [7] are not ids
        if (why := id_problem(text, INT64_MAX)) is not None:  # the one id rule: "+7", "007", "1_000" are refused
            if why.startswith("not an integer id"):
                why = f"id {quoted(text)} is not an integer id (ASCII digits only: no sign, no '_', no decimal point)"
            raise InputError(p, why, line=line, field="id")
        i = int(text)
        try:
            s = float(str(raw_score).strip()) if not isinstance(raw_score, (int, float)) else float(raw_score)
        except ValueError:
            raise InputError(p, f"score {raw_score!r} is not a number", line=line, field="score") from None
        if not math.isfinite(s):
            raise InputError(p, f"score {raw_score!r} is not a finite number", line=line, field="score")
        if i in out:
            raise InputError(p, f"id {i} appears twice", line=line, field="id")
        out[i] = s

    if p.suffix in (".jsonl", ".json") or text.lstrip().startswith("{"):
        for n, rec in iter_jsonl(p):
            for key in ("id", "score"):
                if key not in rec:
                    raise InputError(p, f"no {key!r} key", line=n, field=key)
            if rec["score"] is None or isinstance(rec["score"], bool):
                raise InputError(p, f"score {rec['score']!r} is not a number", line=n, field="score")
            add(n, rec["id"], rec["score"])
    else:
        reader = csv.reader(io.StringIO(text))
        header = [h.strip() for h in next(reader, [])]
        repeated = sorted({h for h in header if h and header.count(h) > 1})
        if repeated:
            raise InputError(p, f"the header names {repeated[0]!r} twice (which column is meant?)", line=1, field=repeated[0])
        for key in ("id", "score"):
            if key not in header:
                raise InputError(p, f"the header has no {key!r} column (expected id,score)", line=1, field=key)
        ci, cs = header.index("id"), header.index("score")
        for n, row in enumerate(reader, start=2):
            if not row or not any(c.strip() for c in row):
                continue
            if [c.strip() for c in row] == header:
                raise InputError(p, "the header again: two prediction files joined into one?", line=n)
            if len(row) <= max(ci, cs):
                raise InputError(p, f"{len(row)} fields, expected {len(header)}", line=n)
            add(n, row[ci], row[cs])
    if not out:
        raise InputError(p, "no predictions in the file")
    return out


# --- entries: one per scorer ------------------------------------------------------------------------


@dataclass
class Scored:
    """One scorer on one sentence set: its few-shot sets (one for a single task or a prediction file),
    aligned by id, and what the report needs to place it."""

    label: str
    kind: str  # "lm-eval", "predictions", "baseline"
    source: str
    task: str | None
    sets: list[TaskSamples]
    fields: dict[str, np.ndarray]  # breakdown fields aligned with the ids (may be empty)
    has_parse_rate: bool
    flags: list[str] = field(default_factory=list)
    model: str = ""  # the run's model and arguments, as given
    note: str = ""
    correlation_meaningful: bool = True
    matched: bool = True  # its gold scores are the dataset's (so the human reference applies)
    bws: list[dict[str, Any]] | None = None  # a best-worst task's per-tuple records (fsb_bws*)
    model_name: str = ""  # the short name the table labels the model by (Run.model_name)

    @property
    def ids(self) -> np.ndarray:
        return self.sets[0].ids

    @property
    def golds(self) -> np.ndarray:
        return self.sets[0].golds

    def subset(self, mask: np.ndarray) -> Scored:
        return Scored(
            self.label,
            self.kind,
            self.source,
            self.task,
            [s.subset(mask) for s in self.sets],
            {k: v[mask] for k, v in self.fields.items()},
            self.has_parse_rate,
            list(self.flags),
            self.model,
            self.note,
            self.correlation_meaningful,
            self.matched,
            self.bws,
            self.model_name,
        )


def _doc_fields(run: Run, ids: np.ndarray, table: DatasetTable | None) -> dict[str, np.ndarray]:
    """Breakdown fields for `ids`: from the dataset when it is the one scored, else from the logged docs
    (none when a logged doc lacks one or holds a value that is not one of the field's labels)."""
    names = {"seed_type": spec.SEED_TYPES, "prompt_type": spec.PROMPT_TYPES, "bin": spec.BIN_NAMES}
    if table is not None:
        return {k: v[table.rows(ids)] for k, v in table.fields.items()}
    out = {}
    for key, labels in names.items():
        values = [run.docs.get(int(i), {}).get(key) for i in ids]
        named = [labels[v] if type(v) is int and 0 <= v < len(labels) else v for v in values]
        if not all(isinstance(v, str) and v in labels for v in named):
            return {}
        out[key] = np.asarray(named, dtype=object)
    return out


def _matches(table: DatasetTable, ids: np.ndarray, golds: np.ndarray) -> bool:
    pos = table.rows(ids)
    ok = (pos < table.ids.size) & (table.ids[np.minimum(pos, table.ids.size - 1)] == ids)
    return bool(ok.all() and np.allclose(table.scores[pos], golds, atol=1e-9, rtol=0))


def entries_from_run(run: Run, table: DatasetTable | None = None) -> list[Scored]:
    """One entry per group (its variants as sets) and per leaf task outside any group."""
    in_group = {t for subs in run.groups.values() for t in subs}
    units = [(g, [run.tasks[t] for t in subs if t in run.tasks]) for g, subs in run.groups.items()]
    units += [(name, [s]) for name, s in run.tasks.items() if name not in in_group]
    out = []
    for task, sets in units:
        if not sets:
            continue
        if any(not np.array_equal(s.ids, sets[0].ids) for s in sets):
            raise InputError(run.path, f"the variants of {task} do not score the same sentences")
        usable = table if table is not None and _matches(table, sets[0].ids, sets[0].golds) else None
        flags = []
        if run.limit is not None:
            flags.append(f"--limit {run.limit:g}")
        if usable is not None and sets[0].ids.size < int(usable.scored.sum()):
            full = int(usable.scored.sum())
            flags.append(f"sample: {sets[0].ids.size} of {full} sentences, not comparable with the {full}-sentence figures")
        elif usable is None and _per_bin(run) is not None:
            flags.append(f"sample: {_per_bin(run)} per bin, not comparable with full-protocol figures")
        elif usable is None and run.limit is not None:
            flags[-1] += ": a sample, not comparable with full-protocol figures"
        if usable is not None and _per_bin(run) is not None:  # matched or not, a --per-bin sample is stratified
            flags.append(f"sample: stratified, {_per_bin(run)} per bin (inflates correlations)")
        has_parse = any("parse_rate,none" in run.results.get("results", {}).get(s.name, {}) for s in sets)
        records = run.bws.get(task)
        if records is not None:  # sentences come from the sampled tuples: flag the tuples and the sentences covered
            flags = ([f"--limit {run.limit:g}"] if run.limit is not None else []) + _bws_flags(run, task, records, sets[0].ids.size, usable)
            has_parse = False  # per presentation, in the best-worst section
        out.append(
            Scored(
                label=f"{run.model_name} {task}",
                kind="lm-eval",
                source=str(run.path),
                task=task,
                sets=sets,
                fields=_doc_fields(run, sets[0].ids, usable),
                has_parse_rate=has_parse,
                flags=flags,
                model=run.model,
                model_name=run.model_name,
                matched=usable is not None,
                bws=records,
            )
        )
    return out


@cache
def judged_tuples(where: str) -> int:
    """How many distinct tuples the dataset at `where` has judgments for (its annotations config)."""
    ann = spec.load("annotations", source=where)[spec.SPLIT]
    return int(np.unique(np.asarray(ann["tuple_id"])).size)


def _bws_flags(run: Run, task: str, records: list[dict[str, Any]], sentences: int, table: DatasetTable | None) -> list[str]:
    """A best-worst run's flags: a sample flag like a rating row's when it judged fewer tuples than the
    dataset has (by the tuples and the sentences they cover), and what it presented: its tuples (the task's
    recorded sample, cut to the first ones by --limit) and rotations."""
    meta = (run.results.get("configs", {}).get(task, {}).get("metadata") or {}).get("fsb_source") or {}
    shifts = sorted({int(s["shift"]) for r in records for s in r["shown"]})
    drawn = str(meta.get("sample") or "")
    named = re.search(r"(?:all|of) (\d+) (?:judged )?tuples", drawn)
    total = judged_tuples(table.where) if table is not None else int(named.group(1)) if named else None
    n = len(records)
    what = drawn or f"{n} tuples"
    if run.limit is not None and (total is None or n < total):
        what = f"the first {n} of {drawn}, by --limit" if drawn else f"the first {n} tuples, by --limit"
    flags = []
    if (total is not None and n < total) or (drawn and not drawn.startswith("all")) or run.limit is not None:
        of = f" of {total}" if total is not None else ""
        covered = f" covering {sentences} of {table.ids.size} sentences" if table is not None else f" covering {sentences} sentences"
        versus = f"the {int(table.scored.sum())}-sentence figures" if table is not None else "full-protocol figures"
        flags.append(f"sample: {n}{of} judged {_plural(n, 'tuple')}{covered}, not comparable with {versus}")
    flags.append(f"best-worst: {n} {_plural(n, 'tuple')} ({what}), rotations {','.join(map(str, shifts))}")
    return flags


def _plural(n: int, word: str) -> str:
    return word if n == 1 else f"{word}s"


def _per_bin(run: Run) -> int | None:
    for cfg in run.results.get("configs", {}).values():
        meta = cfg.get("metadata") or {}
        if isinstance(meta, dict) and meta.get("fsb_per_bin") is not None:
            return int(meta["fsb_per_bin"])
    return None


def entry_from_predictions(path: str | Path, table: DatasetTable, label: str | None = None) -> Scored:
    """A prediction file as an entry over the protocol's scored sentences (exactly those an lm-eval run
    scores), with the dataset's gold scores; every scored sentence must have a prediction."""
    p = Path(path)
    preds = read_predictions(p)
    unknown = sorted(set(preds) - set(table.ids.tolist()))
    if unknown:
        raise InputError(p, f"{len(unknown)} ids are not in the dataset {table.where} (first: {unknown[:5]})", field="id")
    ids = table.ids[table.scored]
    missing = [int(i) for i in ids if int(i) not in preds]
    if missing:
        raise InputError(p, f"no prediction for {len(missing)} of the {ids.size} scored sentences (first ids: {missing[:5]})", field="id")
    values = np.asarray([preds[int(i)] for i in ids], dtype=float)
    golds = table.scores[table.scored]
    meta_path = p.with_name(p.name + ".json")
    meta: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except ValueError:
            meta = {}
    baseline = meta.get("baseline") if isinstance(meta, dict) else None
    kind = "baseline" if baseline else "predictions"
    name = label or (f"baseline {baseline}" if baseline else p.stem)
    return Scored(
        label=name,
        kind=kind,
        source=str(p),
        task=None,
        sets=[TaskSamples(p.stem, ids, values, golds)],
        fields={k: v[table.scored] for k, v in table.fields.items()},
        has_parse_rate=False,
        flags=[],
        model=str(meta.get("model", "")) if isinstance(meta, dict) else "",
        note=str(meta.get("note", "")) if isinstance(meta, dict) else "",
        correlation_meaningful=meta.get("correlation_meaningful", True) is not False if isinstance(meta, dict) else True,
    )


def load_entries(paths: list[str | Path], table: DatasetTable | None) -> list[Scored]:
    """Entries for lm-eval output folders / results files and prediction files (.csv, .jsonl), in order;
    labels are made unique by appending the run's number where two would read the same."""
    out: list[Scored] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file() and not (p.suffix == ".json" and p.name.startswith("results_")):
            if table is None:
                raise InputError(p, "a prediction file needs the dataset for its gold scores (give --dataset)")
            out.append(entry_from_predictions(p, table))
            continue
        if not p.exists():
            raise InputError(p, "no such file or folder")
        for run in load_runs(p):
            out.extend(entries_from_run(run, table))
    seen: dict[str, int] = {}
    for e in out:
        seen[e.label] = seen.get(e.label, 0) + 1
    counter: dict[str, int] = {}
    for e in out:
        if seen[e.label] > 1:
            counter[e.label] = counter.get(e.label, 0) + 1
            e.label = f"{e.label} #{counter[e.label]}"
    return out
