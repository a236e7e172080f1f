"""A study's items file: `id`, optional `text`, and any further columns, kept and typed.

`read_items(path, labels)` reads a CSV whose header names `id` (and optionally `text`); every other column
is kept in the dataset's `default` config with a type read from its cells: int64 when every non-empty cell
is an integer, float64 when every one is a number, bool for true/false, else string; empty cells are null.
Ids take the judgments' type: integer ids when the judgments' labels are integers (each cell must then be
written as the judgments write it), else the strings as written (`cza1q49` stays `cza1q49`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fsb.core.readers import InputError
from fsb.tables.csvrows import read_csv_table

__all__ = ["RESERVED", "ItemsFile", "read_items"]

# the columns a study build writes itself: an items file may not bring its own
RESERVED = frozenset(
    {
        "score",
        "score_raw",
        "score_ci_low",
        "score_ci_high",
        "score_maxdiff",
        "score_maxdiff_ci_low",
        "score_maxdiff_ci_high",
        "n_judgments",
        "n_best",
        "n_worst",
    }
)
_INT = re.compile(r"[+-]?[0-9]{1,18}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True)
class ItemsFile:
    """The items, sorted by id: `frame` holds `id`, optional `text` and the further columns, typed."""

    path: Path
    frame: pd.DataFrame


def _typed(path: Path, name: str, cells: list[str]) -> pd.Series:
    """A further column with the narrowest type every non-empty cell fits (int64, float64, bool, string)."""
    filled = [c for c in cells if c != ""]
    if filled and all(_INT.fullmatch(c) for c in filled):
        return pd.Series([int(c) if c else None for c in cells], dtype="Int64")
    if filled and all(c.lower() in ("true", "false") for c in filled):
        return pd.Series([c.lower() == "true" if c else None for c in cells], dtype="boolean")
    try:
        values = [float(c) if c else np.nan for c in cells]
    except ValueError:
        return pd.Series([c if c else None for c in cells], dtype=object)
    if filled and all(np.isfinite(v) for v in values if v == v):
        return pd.Series(values, dtype="float64")
    return pd.Series([c if c else None for c in cells], dtype=object)


def read_items(path: str | os.PathLike[str], labels: np.ndarray) -> ItemsFile:
    """Read the items file and key it like the judgments' labels (`Annotations.labels`).

    Parameters
    ----------
    path
        A CSV with an `id` column, optionally `text`, and further columns.
    labels
        The judgments' sorted labels: int64 (integer ids) or strings.

    Returns
    -------
    ItemsFile
        One row per id, sorted by id; refuses a missing or repeated id, a column named like one the build
        writes, and (for integer ids) a cell that is not an integer, naming file, line and column.
    """
    p = Path(path)
    table = read_csv_table(p)
    header = [str(c) for c in table.frame.columns]
    if "id" not in header:
        raise InputError(p, f"an items file needs an `id` column (found {', '.join(header[:8])})", line=1, field="id")
    for name in header:
        if name in RESERVED:
            raise InputError(p, f"column {name!r} is one the build computes; rename it", line=1, field=name)
        if not _NAME.fullmatch(name):
            raise InputError(
                p, f"column name {name[:40]!r} must be letters, digits and _ (a Parquet and card field name)", line=1, field=name[:40]
            )
    rows = table.frame.to_numpy(dtype=object).tolist() if len(table.frame) else []
    if not rows:
        raise InputError(p, "the items file holds no rows")
    ids = [str(r[header.index("id")]).strip() for r in rows]
    integer = labels.dtype.kind in "iu"
    for i, v in enumerate(ids):
        if not v:
            raise InputError(p, "empty id", line=table.line_of(i), field="id")
        if integer and (not _INT.fullmatch(v) or str(int(v)) != v.lstrip("+")):
            raise InputError(p, f"id {v[:40]!r} is not an integer written as the judgments write ids", line=table.line_of(i), field="id")
    keys = np.array([int(v) for v in ids], dtype=np.int64) if integer else np.array(ids, dtype=object)
    seen: dict[object, int] = {}
    for i, k in enumerate(keys.tolist()):
        if k in seen:
            raise InputError(p, f"id {str(k)[:40]!r} repeats line {table.line_of(seen[k])}", line=table.line_of(i), field="id")
        seen[k] = i
    frame = pd.DataFrame({"id": keys if integer else keys.astype(str)})
    for j, name in enumerate(header):
        if name == "id":
            continue
        cells = [str(r[j]) for r in rows]
        frame[name] = pd.Series(cells, dtype=object) if name == "text" else _typed(p, name, cells)
    order = np.argsort(frame["id"].to_numpy(), kind="stable")
    return ItemsFile(p, frame.iloc[order].reset_index(drop=True))
