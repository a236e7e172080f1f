"""Comparative annotation with best-worst scaling: make a tuple design for a set of sentences, export it
for annotators, and import their best/worst choices into the common judgments format."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import bws
from ._io import InputError, atomic_write
from .raw import read_generations

__all__ = ["export_forms", "import_judgments", "make_tuples", "read_design"]


def _item_labels(items: str | int) -> np.ndarray:
    """Item labels: 1..N for a number, else the uids of a generations file (sorted)."""
    text = str(items)
    if text.isdigit():
        return np.arange(1, int(text) + 1)
    return np.sort(read_generations(text).frame["uid"].to_numpy())


def make_tuples(
    items: str | int,
    out: str | os.PathLike[str],
    tuple_size: int = 4,
    appearances: int = 8,
    seed: int = 0,
) -> dict[str, Any]:
    """Write a design CSV (tuple_id, Item1..ItemK) for the items and return its independent check."""
    labels = _item_labels(items)
    try:
        design = bws.bws_design(labels.size, tuple_size=tuple_size, appearances=appearances, seed=seed)
    except (ValueError, RuntimeError) as e:  # an impossible request: say so as bad input, not a traceback
        raise InputError(str(items), str(e)) from None
    frame = pd.DataFrame(labels[design], columns=[f"Item{j + 1}" for j in range(tuple_size)])
    frame.insert(0, "tuple_id", np.arange(len(frame)))
    atomic_write(out, frame.to_csv(index=False, lineterminator="\n"))
    return {**bws.design_report(design, labels.size), "seed": seed, "out": str(Path(out))}


def read_design(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Tuples (tuple_id, Item1..ItemK) from a design CSV (`fsb tuples`) or exported forms, validated."""
    from .raw import _read_csv, _require_columns

    table = _read_csv(Path(path))
    k = 0
    while f"Item{k + 1}" in table.frame.columns:
        k += 1
    _require_columns(table, ["tuple_id", "Item1", "Item2"])
    frame = table.frame
    for col in ["tuple_id", *(f"Item{j + 1}" for j in range(k))]:
        bad = np.flatnonzero(~frame[col].str.fullmatch(r"\s*\d+\s*"))
        if bad.size:
            raise table.fail(int(bad[0]), col, f"not an integer: {frame[col].iloc[bad[0]]!r}")
    design = frame[["tuple_id", *(f"Item{j + 1}" for j in range(k))]].astype(np.int64)
    dup = np.flatnonzero(design["tuple_id"].duplicated().to_numpy())
    if dup.size:
        raise table.fail(int(dup[0]), "tuple_id", f"duplicate tuple_id {design['tuple_id'].iloc[dup[0]]}")
    design.attrs["line_of"] = table.line_of
    return design


def export_forms(
    design_csv: str | os.PathLike[str], generations: str | os.PathLike[str], out: str | os.PathLike[str], seed: int = 0
) -> int:
    """Write one annotation form per tuple: tuple_id, Item1..ItemK (ids) and Text1..TextK (sentences).

    Items are shown in an order shuffled per tuple with `seed` (so no sentence always sits first); the
    ids record exactly what was shown. Returns the number of forms.
    """
    design = read_design(design_csv)
    gens = read_generations(generations).frame.set_index("uid")
    items = design.drop(columns="tuple_id").to_numpy()
    unknown = ~np.isin(items, gens.index.to_numpy())
    if unknown.any():
        row, col = (int(v[0]) for v in np.nonzero(unknown))
        line_of = design.attrs["line_of"]
        raise InputError(
            design_csv, f"unknown id {items[row, col]}: no such uid in {generations}", line=line_of(row), field=f"Item{col + 1}"
        )
    rng = np.random.default_rng(seed)
    shown = np.array([row[rng.permutation(row.size)] for row in items])
    k = shown.shape[1]
    forms = pd.DataFrame({"tuple_id": design["tuple_id"].to_numpy()})
    for j in range(k):
        forms[f"Item{j + 1}"] = shown[:, j]
    for j in range(k):
        forms[f"Text{j + 1}"] = gens.loc[shown[:, j], "response"].to_numpy()
    atomic_write(out, forms.to_csv(index=False, lineterminator="\n"))
    return len(forms)


def import_judgments(
    responses_csv: str | os.PathLike[str], design_csv: str | os.PathLike[str], out: str | os.PathLike[str], positions: bool = False
) -> dict[str, Any]:
    """Turn annotators' answers (tuple_id, best, worst[, annotator]) into the common judgments format
    (Item1..ItemK, BestItem, WorstItem[, Annotator]) that `fsb build`, `fsb score` and `fsb reliability` read.

    `design_csv` is the design or, better, the exported forms (their Item columns keep the order the
    annotators saw). `best`/`worst` are item ids, or with `positions` 1-based places in that order.
    Every answer is checked against its tuple; one annotator answering a tuple twice is refused.
    """
    from .raw import _read_csv, _require_columns

    design = read_design(design_csv)
    by_id = {int(t): row for t, row in zip(design["tuple_id"], design.drop(columns="tuple_id").to_numpy())}
    k = design.shape[1] - 1
    table = _read_csv(Path(responses_csv))
    _require_columns(table, ["tuple_id", "best", "worst"])
    frame = table.frame
    has_annotator = "annotator" in frame.columns
    rows, seen = [], {}
    for i in range(len(frame)):
        rec = frame.iloc[i]
        values = {}
        for field in ("tuple_id", "best", "worst"):
            text = str(rec[field]).strip()
            if not re.fullmatch(r"[0-9]+", text):
                raise table.fail(i, field, f"not an integer: {text!r}")
            values[field] = int(text)
        if values["tuple_id"] not in by_id:
            raise table.fail(i, "tuple_id", f"no tuple {values['tuple_id']} in {design_csv}")
        items = by_id[values["tuple_id"]]
        chosen = {}
        for field in ("best", "worst"):
            v = values[field]
            if positions:
                if not 1 <= v <= k:
                    raise table.fail(i, field, f"position {v} is outside 1..{k}")
                chosen[field] = int(items[v - 1])
            elif v not in items:
                raise table.fail(i, field, f"{v} is not one of the tuple's items ({', '.join(map(str, items))})")
            else:
                chosen[field] = v
        if chosen["best"] == chosen["worst"]:
            raise table.fail(i, "worst", f"best and worst are the same item {chosen['best']}")
        annotator = str(rec["annotator"]).strip() if has_annotator else None
        if annotator:
            key = (annotator, values["tuple_id"])
            if key in seen:
                raise table.fail(
                    i, "annotator", f"{annotator!r} already judged tuple {values['tuple_id']} (line {table.line_of(seen[key])})"
                )
            seen[key] = i
        rows.append([*items.tolist(), chosen["best"], chosen["worst"], *([annotator or ""] if has_annotator else [])])
    columns = [*(f"Item{j + 1}" for j in range(k)), "BestItem", "WorstItem", *(["Annotator"] if has_annotator else [])]
    atomic_write(out, pd.DataFrame(rows, columns=columns).to_csv(index=False, lineterminator="\n"))
    judged = {int(str(t).strip()) for t in frame["tuple_id"]}
    return {"judgments": len(rows), "tuples_judged": len(judged), "tuples_in_design": len(by_id), "out": str(out)}
