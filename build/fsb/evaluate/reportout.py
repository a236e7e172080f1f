"""The report as files: JSON, and the report folder (report.md, report.json, forest.png, scatter PNGs)
written whole and sealed, so a later run replaces only what `fsb report` wrote."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from fsb.evaluate.reportfig import forest_plot, scatter_plot
from fsb.evaluate.reportmd import render_markdown
from fsb.evaluate.results import Scored

__all__ = [
    "REPORT_KIND",
    "REPORT_SEAL",
    "check_out",
    "is_report_folder",
    "json_safe",
    "report_folder_difference",
    "to_json",
    "write_outputs",
]


def json_safe(obj: Any) -> Any:
    """`obj` with NaN as None and numpy scalars as Python ones, ready for json.dumps."""
    if isinstance(obj, float):
        return None if math.isnan(obj) else obj
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return json_safe(obj.item())
    return obj


def to_json(report: dict[str, Any]) -> str:
    """The report as JSON (NaN written as null)."""
    return json.dumps(json_safe(report), indent=2, sort_keys=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "row"


REPORT_KIND = "a report folder from `fsb report`"
REPORT_SEAL = "fsb report"


def report_folder_difference(out: Path) -> str | None:
    """None when `out` is an earlier report exactly as `fsb report` wrote it (its seal matches); else the
    first difference ("report.md was edited", "notes.txt was added")."""
    from fsb.core.seals import seal_difference

    return seal_difference(out, REPORT_SEAL)


def is_report_folder(out: Path) -> bool:
    """True when `out` is an earlier report, unchanged (so replacing it loses nothing of a user's)."""
    return report_folder_difference(out) is None


def check_out(out: Path) -> None:
    """Refuse, before any work, an output folder that is not absent, empty or an unchanged earlier report."""
    from fsb.core.folders import check_replaceable_dir

    check_replaceable_dir(out, changed=report_folder_difference, kind=REPORT_KIND)


def write_outputs(report: dict[str, Any], entries: list[Scored], out: Path) -> list[Path]:
    """report.md (the forest plot near the top), report.json, forest.png and scatter-<n>-<label>.png into `out`
    (written whole, then renamed; `n` is the row's number as given).

    Parameters
    ----------
    report : the report from `fsb.evaluate.report.build`.
    entries : its scored rows, in the report's row order.
    out : the folder: absent, empty or an unchanged earlier report.

    Returns
    -------
    The files written.
    """
    from fsb.core.folders import atomic_dir

    check_out(out)
    written = []
    with atomic_dir(out, changed=report_folder_difference, kind=REPORT_KIND, seal=REPORT_SEAL) as stage:
        (stage / "report.md").write_text(render_markdown(report, forest="forest.png") + "\n", encoding="utf-8")
        (stage / "report.json").write_text(to_json(report) + "\n", encoding="utf-8")
        forest_plot(report, stage / "forest.png")
        order = {r["label"]: r.get("given", i) for i, r in enumerate(report["rows"], 1)}
        by_label = {r["label"]: r for r in report["rows"]}
        for e in entries:
            scatter_plot(e, stage / f"scatter-{order[e.label]}-{_slug(e.label)}.png", by_label[e.label])
        written = sorted(p.name for p in stage.iterdir())
    return [out / n for n in written]
