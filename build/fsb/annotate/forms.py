"""Comparative annotation with best-worst scaling: make a tuple design for a study's items, export it for
annotators (CSV forms, or a Label Studio project), and import their best/worst choices into the common
judgments format (`Item1..ItemK,BestItem,WorstItem[,Annotator,Timestamp]`)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd

from fsb.bws.tuples import balance_positions, read_design
from fsb.core.output import write_unit
from fsb.core.readers import InputError
from fsb.core.seals import recorded_write

if TYPE_CHECKING:
    from fsb.annotate.study import Study

ItemFiles: TypeAlias = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]  # one item file, or several joined

__all__ = [
    "FORMS_KIND",
    "INSTRUCTIONS_KIND",
    "JUDGMENTS_KIND",
    "LABEL_STUDIO_KIND",
    "export_forms",
    "export_label_studio",
    "import_judgments",
    "import_label_studio",
    "instructions_path",
    "read_design",
]

# What each one-shot output is called in a refusal ("PATH: exists and is not KIND unchanged: WHY; ...").
FORMS_KIND = "annotation forms from `fsb annotate export`"
INSTRUCTIONS_KIND = "annotators' instructions from `fsb annotate export --study`"
JUDGMENTS_KIND = "a judgments file from `fsb annotate import`"


def instructions_path(out: str | os.PathLike[str]) -> Path:
    """Where `export_forms` writes a study's instructions beside the forms OUT: OUT's name without its
    suffix + `.instructions.txt` (forms.csv -> forms.instructions.txt).

    Parameters
    ----------
    out
        the forms CSV.

    Returns
    -------
    Path
        the instructions file, in OUT's folder.
    """
    p = Path(out)
    return p.with_name(f"{p.stem if p.suffix else p.name}.instructions.txt")


def _shown_order(design: pd.DataFrame, seed: int | None) -> np.ndarray:
    """The items of each tuple in the order annotators will see: the design's own order (balanced by
    `fsb tuples`), or with `seed` a fresh seeded position-balanced order (for designs made elsewhere)."""
    items = design.drop(columns="tuple_id").to_numpy()
    if seed is None:
        return items
    labels, codes = np.unique(items, return_inverse=True)
    return labels[balance_positions(codes.reshape(items.shape), labels.size, seed=seed)]


def _item_files(items: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    return [items] if isinstance(items, (str, os.PathLike)) else list(items)


def _texts_for(design: pd.DataFrame, design_csv: str | os.PathLike[str], items: ItemFiles, shown: np.ndarray) -> list:
    """The text of every shown item (same shape as `shown`), from one or several item files joined; an id
    missing from all of them is refused."""
    from fsb.tables.items import texts_of_files

    files = _item_files(items)
    text_of = texts_of_files(files)
    line_of = design.attrs["line_of"]
    rows = shown.tolist()
    for r, row in enumerate(rows):
        for j, v in enumerate(row):
            if v not in text_of:
                names = ", ".join(map(str, files))
                raise InputError(design_csv, f"unknown id {v!r}: no such item in {names}", line=line_of(r), field=f"Item{j + 1}")
    return [[text_of[v] for v in row] for row in rows]


def export_forms(
    design_csv: str | os.PathLike[str],
    items: ItemFiles,
    out: str | os.PathLike[str],
    seed: int | None = None,
    force: bool = False,
    study: Study | None = None,
) -> int:
    """Write one annotation form per tuple: tuple_id, Item1..ItemK (ids) and Text1..TextK (texts).

    Items are shown in the design's order (randomised and position-balanced by `fsb tuples`), or with
    `seed` in a fresh seeded balanced order; the ids record exactly what was shown. `items` is one item
    file or several joined (an extended design shows existing and new items). An existing `out` is
    replaced only if it is unchanged since fsb wrote it, or with `force`.

    Parameters
    ----------
    design_csv
        the design (`fsb tuples`).
    items
        one item file (id, text) or several joined.
    out
        the forms CSV.
    seed
        re-order each tuple (seeded, position-balanced); default the design's order.
    force
        replace files that are not fsb's unchanged outputs of this kind.
    study
        a study (`fsb.annotate.study.read_study`): its instructions (question, the two choices, what a high
        score means) are written beside the forms (`instructions_path`), in one unit with them (a kill
        leaves both old or both new). None: the forms alone, as before studies existed.

    Returns
    -------
    int
        the number of forms.
    """
    design = read_design(design_csv)
    shown = _shown_order(design, seed)
    texts = _texts_for(design, design_csv, items, shown)
    k = shown.shape[1]
    header = ["tuple_id", *(f"Item{j + 1}" for j in range(k)), *(f"Text{j + 1}" for j in range(k))]
    rows = [[tid, *ids, *row] for tid, ids, row in zip(design["tuple_id"].tolist(), shown.tolist(), texts)]
    body = "".join(",".join(map(_csv_cell, r)) + "\n" for r in [header, *rows])
    if study is None:
        recorded_write(out, body, force=force, kind=FORMS_KIND)
    else:
        from fsb.annotate.study import instructions

        guide = instructions_path(out)
        write_unit({out: body, guide: instructions(study)}, kinds={out: FORMS_KIND, guide: INSTRUCTIONS_KIND}, force=force)
    return len(rows)


def _csv_cell(value: object) -> str:
    """One CSV field, quoted when it holds a comma, a quote or a line break, \\r included: pandas and the
    csv module leave a lone \\r unquoted (with a \\n line terminator), and every reader then splits the row
    there; generated texts can hold one."""
    text = str(value)
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


LABEL_STUDIO_KIND = "a Label Studio export from fsb"


def export_label_studio(
    design_csv: str | os.PathLike[str],
    items: ItemFiles,
    out_dir: str | os.PathLike[str],
    seed: int | None = None,
    force: bool = False,
    study: Study | None = None,
) -> dict[str, Any]:
    """Write a Label Studio project for the design into `out_dir`: labeling_config.xml (choose the most and
    the least biased of the K texts) and tasks.json (one task per tuple, the ids and texts in shown order),
    as one unit (a kill leaves both old or both new).

    Parameters
    ----------
    design_csv
        the design (`fsb tuples`).
    items
        one item file (id, text) or several joined.
    out_dir
        the project folder.
    seed
        re-order each tuple (seeded, position-balanced); default the design's order.
    force
        replace files that are not fsb's unchanged outputs of this kind.
    study
        a study (`fsb.annotate.study.read_study`): the config asks its question under its two labels
        (`fsb.annotate.study.labeling_config`; same choice names, so `fsb annotate import` reads the
        answers unchanged). None: FSB's wording, as before studies existed.

    Returns
    -------
    dict
        tasks, tuple_size, config and tasks_file.
    """
    from fsb.annotate import labelstudio

    design = read_design(design_csv)
    shown = _shown_order(design, seed)
    texts = _texts_for(design, design_csv, items, shown)
    k = shown.shape[1]
    out = Path(out_dir)
    config, tasks = out / labelstudio.CONFIG_FILE, out / labelstudio.TASKS_FILE
    # Other files in the folder are left alone. These two are replaced only if they are earlier exports nobody
    # edited (recorded in the folder's .fsb-files.json), or with force: a first-line check would take a
    # hand-edited labeling config for ours. They are written as one unit: a kill leaves both old or both new.
    body = labelstudio.tasks_json(design["tuple_id"].tolist(), shown.tolist(), texts)
    if study is None:
        xml = labelstudio.labeling_config(k)
    else:
        from fsb.annotate.study import labeling_config

        xml = labeling_config(k, study)
    write_unit({tasks: body, config: xml}, kinds=LABEL_STUDIO_KIND, force=force)
    return {"tasks": len(design), "tuple_size": k, "config": str(config), "tasks_file": str(tasks)}


def _write_judgments(out: str | os.PathLike[str], rows: list[list[Any]], k: int, extra: list[str], *, force: bool) -> None:
    columns = [*(f"Item{j + 1}" for j in range(k)), "BestItem", "WorstItem", *extra]
    recorded_write(out, pd.DataFrame(rows, columns=columns).to_csv(index=False, lineterminator="\n"), force=force, kind=JUDGMENTS_KIND)


def _looks_like_json(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return False
    return head[:1] in (b"[", b"{")


def import_judgments(
    responses_csv: str | os.PathLike[str],
    design_csv: str | os.PathLike[str],
    out: str | os.PathLike[str],
    positions: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Turn annotators' answers (tuple_id, best, worst[, annotator][, timestamp]) into the common judgments
    format (Item1..ItemK, BestItem, WorstItem[, Annotator][, Timestamp]) that `fsb build`, `fsb score` and
    `fsb reliability` read.

    `design_csv` is the design or, better, the exported forms (their Item columns keep the order the
    annotators saw). `best`/`worst` are item ids, or with `positions` 1-based places in that order.
    Every answer is checked against its tuple; one annotator answering a tuple twice is refused. An existing
    `out` is replaced only if it is unchanged since fsb wrote it, or with `force`.
    """
    from fsb.tables.csvrows import INT64_MAX, id_problem, read_csv_table, require_columns

    if _looks_like_json(responses_csv):
        raise InputError(responses_csv, "this is JSON, not a CSV of answers; a Label Studio export needs --format label-studio")
    design = read_design(design_csv)
    by_id = {int(t): row for t, row in zip(design["tuple_id"], design.drop(columns="tuple_id").to_numpy())}
    k = design.shape[1] - 1
    table = read_csv_table(responses_csv)
    require_columns(table, ["tuple_id", "best", "worst"])
    frame = table.frame
    has_annotator = "annotator" in frame.columns
    has_time = "timestamp" in frame.columns
    rows, seen = [], {}
    for i in range(len(frame)):
        rec = frame.iloc[i]
        tid = str(rec["tuple_id"]).strip()
        if problem := id_problem(tid, INT64_MAX):
            raise table.fail(i, "tuple_id", problem)
        if int(tid) not in by_id:
            raise table.fail(i, "tuple_id", f"no tuple {tid} in {design_csv}")
        items = by_id[int(tid)]
        chosen = {}
        for field in ("best", "worst"):
            text = str(rec[field]).strip()
            if positions:
                if not re.fullmatch(r"[0-9]+", text):
                    raise table.fail(i, field, f"not an integer: {text!r}")
                if not 1 <= int(text) <= k:
                    raise table.fail(i, field, f"position {text} is outside 1..{k}")
                chosen[field] = items[int(text) - 1]
            else:
                match = [v for v in items if str(v) == text or (re.fullmatch(r"[+-]?[0-9]+", text) and str(v) == str(int(text)))]
                if not match:
                    raise table.fail(i, field, f"{text!r} is not one of the tuple's items ({', '.join(map(str, items))})")
                chosen[field] = match[0]
        if chosen["best"] == chosen["worst"]:
            raise table.fail(i, "worst", f"best and worst are the same item {chosen['best']}")
        annotator = str(rec["annotator"]).strip() if has_annotator else None
        if annotator:
            key = (annotator, int(tid))
            if key in seen:
                raise table.fail(i, "annotator", f"{annotator!r} already judged tuple {tid} (line {table.line_of(seen[key])})")
            seen[key] = i
        extra = ([annotator or ""] if has_annotator else []) + ([str(rec["timestamp"]).strip()] if has_time else [])
        rows.append([*items.tolist(), chosen["best"], chosen["worst"], *extra])
    _write_judgments(out, rows, k, (["Annotator"] if has_annotator else []) + (["Timestamp"] if has_time else []), force=force)
    judged = {int(str(t).strip()) for t in frame["tuple_id"]}
    return {"judgments": len(rows), "tuples_judged": len(judged), "tuples_in_design": len(by_id), "out": str(out)}


def import_label_studio(
    export_json: str | os.PathLike[str],
    out: str | os.PathLike[str],
    design_csv: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Turn Label Studio's JSON export of a project made by `export_label_studio` into the common judgments
    format with Annotator (Label Studio's user id; never the email, which a published dataset would expose) and
    Timestamp (the annotation's created_at, UTC ISO 8601). Cancelled (skipped) annotations are left out
    and counted. With `design_csv`, every task's items are checked against its tuple in the design. An existing
    `out` is replaced only if it is unchanged since fsb wrote it, or with `force`."""
    from fsb.annotate import labelstudio

    found = labelstudio.read_export(export_json)
    k = found.tuple_size
    if design_csv is not None:
        design = read_design(design_csv)
        by_id = {int(t): row for t, row in zip(design["tuple_id"], design.drop(columns="tuple_id").to_numpy())}
        for j in found.judgments:
            want = by_id.get(j.tuple_id)
            if want is None:
                raise InputError(export_json, f"task {j.task_id}: no tuple {j.tuple_id} in {design_csv}")
            if sorted(map(str, want.tolist())) != sorted(map(str, j.items)):
                raise InputError(
                    export_json, f"task {j.task_id}: items {j.items} differ from tuple {j.tuple_id} in {design_csv} ({want.tolist()})"
                )
    rows = [[*j.items, j.best, j.worst, j.annotator, j.timestamp] for j in found.judgments]
    _write_judgments(out, rows, k, ["Annotator", "Timestamp"], force=force)
    return {
        "judgments": len(rows),
        "tuples_judged": len({j.tuple_id for j in found.judgments}),
        "tasks_in_export": found.tasks,
        "cancelled_left_out": found.cancelled,
        "annotators": len({j.annotator for j in found.judgments}),
        "out": str(out),
    }
