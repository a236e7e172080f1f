"""What changed between two builds of the dataset (`fsb diff OLD NEW`, and the release notes of `fsb publish`).

`diff_builds(old, new)` compares two folders written by `fsb build`: sentences added and removed (by id),
judgments added and removed (as a multiset of rows: items, best, worst, annotator), the scores of the
sentences both builds have (Pearson and Spearman correlation, mean absolute change, the largest moves,
bin changes) and split-half reliability before and after, read from each folder's stats.json.
`format_diff(d)` prints it, every figure beside what it is compared with.

A folder is read as `fsb build` writes it: stats.json and the Parquet files under data/default/ and
data/annotations/, checked against stats.json's fingerprint (so a changed or stray file is refused,
not silently compared).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from fsb.core.readers import InputError, content_fingerprint, sha256_file

__all__ = ["compare_builds", "diff_builds", "format_diff", "read_build"]

CONFIGS = ("default", "annotations")
LARGEST_MOVES = 5
# a study build (`fsb.data.study_build`) may have no `text` and has no `bin`: both are compared only where both builds have them
REQUIRED = {"default": {"id", "score"}, "annotations": {"items", "best", "worst"}}


def read_build(folder: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """stats.json and both configs' tables ({"default": DataFrame, "annotations": DataFrame}) of a build folder.

    The data files are data/<config>/*.parquet, checked against stats.json's fingerprint (sha256 over
    the files' sha256, default then annotations, as `fsb build` computes it)."""
    import pandas as pd
    import pyarrow.parquet as pq

    root = Path(folder)
    stats_path = root / "stats.json"
    if not root.is_dir():
        raise InputError(root, "not a folder (expected a dataset folder written by `fsb build`)")
    try:
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(stats_path, "file not found: not a dataset folder written by `fsb build`") from None
    except IsADirectoryError:
        raise InputError(stats_path, "is a folder: not a dataset folder written by `fsb build`") from None
    except UnicodeDecodeError as e:
        raise InputError(stats_path, f"not valid UTF-8 (byte offset {e.start}): not a stats.json written by `fsb build`") from None
    except json.JSONDecodeError as e:
        raise InputError(stats_path, f"stats.json is not valid JSON ({e.msg})", line=e.lineno) from None
    except RecursionError:
        raise InputError(stats_path, "stats.json is not valid JSON (nested too deeply)") from None
    recorded = stats.get("fingerprint") if isinstance(stats, dict) else None
    if not isinstance(recorded, str):
        raise InputError(stats_path, "not a stats.json written by `fsb build` (no fingerprint)", field="fingerprint")
    files = {config: sorted((root / "data" / config).glob("*.parquet")) for config in CONFIGS}
    for config, paths in files.items():
        if not paths:
            raise InputError(root / "data" / config, f"no Parquet file of the {config!r} config: not a folder written by `fsb build`")
    digest = content_fingerprint([sha256_file(p) for config in CONFIGS for p in files[config]])
    if digest != recorded:
        raise InputError(stats_path, f"fingerprint {recorded} does not match the data files ({digest})", field="fingerprint")
    tables = {}
    for config, paths in files.items():
        parts = []
        for p in paths:
            table = pq.read_table(p)
            missing = sorted(REQUIRED[config] - set(table.column_names))
            if missing:
                raise InputError(p, f"the {config!r} config has no column {', '.join(missing)}: not a build this fsb can compare")
            parts.append(table.to_pandas())
        tables[config] = pd.concat(parts, ignore_index=True)
    return stats, tables


def _correlations(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float | None]:
    """Pearson r and Spearman rho (Pearson of average ranks) of paired scores; None where undefined
    (fewer than 3 pairs, or a constant side)."""
    from scipy.stats import pearsonr, spearmanr

    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None, None
    return float(pearsonr(a, b).statistic), float(spearmanr(a, b).statistic)


def _id(value: Any) -> Any:
    """An id as Python compares it: integer ids as int (numpy ints included), string ids as str, never coerced."""
    return int(value) if isinstance(value, int | np.integer) else str(value)


def _judgment_rows(frame: Any) -> Counter[tuple[Any, ...]]:
    annotator = frame["annotator"] if "annotator" in frame else [None] * len(frame)
    return Counter(
        (tuple(_id(i) for i in items), _id(best), _id(worst), a)
        for items, best, worst, a in zip(frame["items"], frame["best"], frame["worst"], annotator)
    )


def _side(folder: Path, label: str | None, stats: dict[str, Any], tables: dict[str, Any]) -> dict[str, Any]:
    return {
        "label": label or str(folder),
        "path": str(folder),
        "fingerprint": stats.get("fingerprint"),
        "n_items": len(tables["default"]),
        "n_annotations": len(tables["annotations"]),
        "bins": _mapping(_mapping(stats.get("bins")).get("counts")) or None,
        "shr": _mapping(stats.get("shr")) or None,
    }


def diff_builds(
    old: str | os.PathLike[str], new: str | os.PathLike[str], *, old_label: str | None = None, new_label: str | None = None
) -> dict[str, Any]:
    """Compare two build folders; a JSON-ready dict (see the module docstring). Labels name the sides in
    `format_diff` (default: the folder paths), e.g. the released tag and "this build"."""
    old_stats, old_t = read_build(old)
    new_stats, new_t = read_build(new)
    return compare_builds(old_stats, old_t, new_stats, new_t, old_path=old, new_path=new, old_label=old_label, new_label=new_label)


def compare_builds(
    old_stats: dict[str, Any],
    old_t: dict[str, Any],
    new_stats: dict[str, Any],
    new_t: dict[str, Any],
    *,
    old_path: str | os.PathLike[str],
    new_path: str | os.PathLike[str],
    old_label: str | None = None,
    new_label: str | None = None,
) -> dict[str, Any]:
    """`diff_builds` on builds already read (stats and both configs' tables, as `read_build` returns them),
    e.g. a build being written, whose card carries the changes since an earlier one."""
    old, new = old_path, new_path
    o, n = old_t["default"].set_index("id"), new_t["default"].set_index("id")
    if o.index.inferred_type != n.index.inferred_type and len(o) and len(n):
        raise InputError(
            Path(new_path), f"ids are {n.index.inferred_type} here but {o.index.inferred_type} in {old_path}: not the same study"
        )
    added = sorted(_id(i) for i in n.index.difference(o.index))
    removed = sorted(_id(i) for i in o.index.difference(n.index))
    common = o.index.intersection(n.index).sort_values()
    has_text = "text" in o.columns and "text" in n.columns
    text_changed = sorted(_id(i) for i in common if has_text and o.at[i, "text"] != n.at[i, "text"])
    has_bin = "bin" in o.columns and "bin" in n.columns
    before = o.loc[common, "score"].to_numpy(dtype=float)
    after = n.loc[common, "score"].to_numpy(dtype=float)
    change = after - before
    pearson, spearman = _correlations(before, after)
    order = np.lexsort((common.to_numpy(), -np.abs(change)))[:LARGEST_MOVES]
    moves = [
        {
            "id": _id(common[k]),
            "old": float(before[k]),
            "new": float(after[k]),
            "change": float(change[k]),
            "old_bin": str(o.at[common[k], "bin"]) if has_bin else None,
            "new_bin": str(n.at[common[k], "bin"]) if has_bin else None,
        }
        for k in order
        if change[k] != 0
    ]
    bins = Counter(f"{a}->{b}" for a, b in zip(o.loc[common, "bin"], n.loc[common, "bin"]) if a != b) if has_bin else Counter()
    j_old, j_new = _judgment_rows(old_t["annotations"]), _judgment_rows(new_t["annotations"])
    return {
        "old": _side(Path(old), old_label, old_stats, old_t),
        "new": _side(Path(new), new_label, new_stats, new_t),
        "same_build": old_stats.get("fingerprint") == new_stats.get("fingerprint"),
        "sentences": {
            "added": added,  # ids (lists); the counts are n_added, n_removed, common
            "removed": removed,
            "n_added": len(added),
            "n_removed": len(removed),
            "common": int(common.size),
            "text_changed": text_changed,
            "n_text_changed": len(text_changed),
        },
        "judgments": {"added": sum((j_new - j_old).values()), "removed": sum((j_old - j_new).values())},
        "scores": {
            "n": int(common.size),
            "pearson": pearson,
            "spearman": spearman,
            "mean_abs_change": float(np.abs(change).mean()) if change.size else None,
            "n_changed": int(np.count_nonzero(change)),
            "largest_moves": moves,
            "bin_changes": dict(sorted(bins.items())),
            "n_bin_changed": int(sum(bins.values())),
        },
    }


def _ids(ids: list[int], limit: int = 10) -> str:
    return ", ".join(map(str, ids[:limit])) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _bins(move: dict[str, Any]) -> str:
    if move["old_bin"] is None:
        return "no bins"
    return move["old_bin"] if move["old_bin"] == move["new_bin"] else f"{move['old_bin']}->{move['new_bin']}"


def _num(x: float | None, fmt: str = ".4f") -> str:
    return "undefined" if x is None else format(x, fmt)


def _mapping(value: Any) -> dict[str, Any]:
    """`value` when stats.json holds a mapping there, else {} (stats.json is outside the fingerprint: a hand
    edit must give "not recorded", never a traceback)."""
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shr(side: dict[str, Any], name: str) -> str:
    shr = _mapping(side.get("shr"))
    m = _mapping(shr.get(name))
    if not _number(m.get("mean")):
        return "not recorded"
    sd = f"{m['sd']:.4f}" if _number(m.get("sd")) else "?"
    trials = shr["trials"] if isinstance(shr.get("trials"), int) and not isinstance(shr.get("trials"), bool) else "?"
    seed = shr["seed"] if isinstance(shr.get("seed"), int) and not isinstance(shr.get("seed"), bool) else "?"
    return f"{m['mean']:.4f} ± {sd} ({trials} trials, seed {seed})"


def format_diff(d: dict[str, Any]) -> str:
    """The diff as printable lines: counts beside both totals, correlations with the number of sentences
    they are computed over, and reliability as mean ± sd over split-half trials for both builds."""
    old, new, s, j, sc = d["old"], d["new"], d["sentences"], d["judgments"], d["scores"]
    fp_old, fp_new = str(old["fingerprint"])[:16], str(new["fingerprint"])[:16]
    lines = [f"changes from {old['label']} (fingerprint {fp_old}) to {new['label']} (fingerprint {fp_new})"]
    if d["same_build"]:
        lines.append("  the same build (equal fingerprints): nothing changed")
    lines.append(
        f"  sentences: {old['n_items']} -> {new['n_items']} (+{len(s['added'])} added, -{len(s['removed'])} removed, {s['common']} in both)"
    )
    if s["added"]:
        lines.append(f"    added ids: {_ids(s['added'])}")
    if s["removed"]:
        lines.append(f"    removed ids: {_ids(s['removed'])}")
    if s["text_changed"]:
        lines.append(f"    text changed under the same id: {_ids(s['text_changed'])}")
    lines.append(
        f"  judgments: {old['n_annotations']} -> {new['n_annotations']} (+{j['added']} added, -{j['removed']} removed; "
        "rows compared as items, best, worst, annotator)"
    )
    if sc["n"]:
        lines.append(
            f"  scores of the {sc['n']} sentences in both: Pearson r {_num(sc['pearson'])}, Spearman rho {_num(sc['spearman'])} "
            f"(old vs new score; 1 = unchanged order); {sc['n_changed']} changed, "
            f"mean |change| {_num(sc['mean_abs_change'])} on the 0..1 scale"
        )
        moved = ", ".join(f"{k}: {v} sentences" for k, v in sc["bin_changes"].items()) or "none"
        lines.append(f"  bin changes among them ({sc['n_bin_changed']} of {sc['n']}): {moved}")
        if sc["largest_moves"]:
            lines.append(
                "  largest moves: "
                + "; ".join(f"id {m['id']} {m['old']:.3f} -> {m['new']:.3f} ({m['change']:+.3f}, {_bins(m)})" for m in sc["largest_moves"])
            )
    else:
        lines.append("  no sentence in both builds: no score comparison")
    for name in ("pearson", "spearman"):
        lines.append(f"  split-half reliability ({name}, mean ± sd): {_shr(old, name)} -> {_shr(new, name)}")
    return "\n".join(lines)
