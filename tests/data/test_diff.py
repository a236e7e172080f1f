"""`fsb diff OLD NEW` over real `fsb build` folders: a second round that adds sentences and judgments, checked
against figures computed here another way (closed-form correlation on the Parquet scores, row multisets)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from fsb.core.readers import InputError, content_fingerprint, sha256_file
from fsb.data.dataset import build_dataset
from fsb.data.diff import diff_builds, format_diff
from tests._support import make_raw, read_rows, write_csv


@pytest.fixture(scope="module")
def rounds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Round 1: 12 sentences, 48 judgments. Round 2: the same plus 4 new sentences and a 16-sentence design's
    judgments on top of round 1's (so every round-1 judgment is kept and 64 are added)."""
    root = tmp_path_factory.mktemp("diff")
    g1, a1 = make_raw(root / "r1", n=12, seed=0)
    g2, a2 = make_raw(root / "r2", n=16, seed=3)
    rows1, rows2 = read_rows(a1), read_rows(a2)
    both = write_csv(root / "r2" / "all.csv", rows1[0], rows1[1:] + rows2[1:])
    old = build_dataset(g1, a1, root / "old" / "fifty_shades_of_bias", record=False).out
    new = build_dataset(g2, both, root / "new" / "fifty_shades_of_bias", record=False).out
    return {"old": old, "new": new, "n_added_rows": len(rows2) - 1, "root": root}


def scores(folder: Path) -> dict[int, tuple[float, str]]:
    (path,) = sorted((folder / "data" / "default").glob("*.parquet"))
    t = pq.read_table(path).to_pydict()
    return {i: (s, b) for i, s, b in zip(t["id"], t["score"], t["bin"])}


def ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = np.argsort(x, kind="stable")
    r = np.empty(x.size)
    sx = x[order]
    i = 0
    while i < x.size:
        j = i
        while j + 1 < x.size and sx[j + 1] == sx[i]:
            j += 1
        r[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return r


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """r = sum(da * db) / sqrt(sum(da^2) sum(db^2)), written out (not the scipy call diff.py makes)."""
    da, db = a - a.mean(), b - b.mean()
    return float((da * db).sum() / np.sqrt((da * da).sum() * (db * db).sum()))


def test_diff_of_a_second_round(rounds: dict[str, Any]) -> None:
    d = diff_builds(rounds["old"], rounds["new"], old_label="v1.0.0", new_label="round 2")
    assert d["sentences"] == {
        "added": [13, 14, 15, 16],
        "removed": [],
        "n_added": 4,
        "n_removed": 0,
        "common": 12,
        "text_changed": [],
        "n_text_changed": 0,
    }
    assert d["judgments"] == {"added": rounds["n_added_rows"], "removed": 0}
    assert (d["old"]["n_items"], d["new"]["n_items"]) == (12, 16)
    assert d["new"]["n_annotations"] - d["old"]["n_annotations"] == rounds["n_added_rows"]
    old, new = scores(rounds["old"]), scores(rounds["new"])
    ids = sorted(old)
    a = np.array([old[i][0] for i in ids])
    b = np.array([new[i][0] for i in ids])
    sc = d["scores"]
    assert sc["n"] == 12 and sc["pearson"] == pytest.approx(pearson(a, b), abs=1e-12)
    assert sc["spearman"] == pytest.approx(pearson(ranks(a), ranks(b)), abs=1e-12)
    assert sc["mean_abs_change"] == pytest.approx(np.abs(b - a).mean())
    assert sc["n_changed"] == int((a != b).sum()) > 0
    biggest = ids[int(np.argmax(np.abs(b - a)))]
    assert sc["largest_moves"][0]["id"] == biggest and sc["largest_moves"][0]["change"] == pytest.approx(new[biggest][0] - old[biggest][0])
    moved = [f"{old[i][1]}->{new[i][1]}" for i in ids if old[i][1] != new[i][1]]
    assert sc["n_bin_changed"] == len(moved) and sum(sc["bin_changes"].values()) == len(moved)
    for side in ("old", "new"):
        stats = json.loads((rounds[side] / "stats.json").read_text())
        assert d[side]["shr"] == stats["shr"] and d[side]["fingerprint"] == stats["fingerprint"]
    text = format_diff(d)
    assert "changes from v1.0.0" in text and "to round 2" in text
    assert "sentences: 12 -> 16 (+4 added, -0 removed, 12 in both)" in text and "added ids: 13, 14, 15, 16" in text
    assert f"+{rounds['n_added_rows']} added, -0 removed" in text
    assert f"scores of the 12 sentences in both: Pearson r {sc['pearson']:.4f}" in text
    shr = d["new"]["shr"]["pearson"]
    assert f"-> {shr['mean']:.4f} ± {shr['sd']:.4f} ({d['new']['shr']['trials']} trials" in text


def test_diff_of_a_build_with_itself_changes_nothing(rounds: dict[str, Any]) -> None:
    d = diff_builds(rounds["old"], rounds["old"])
    assert d["same_build"] and d["sentences"]["added"] == d["sentences"]["removed"] == []
    assert d["judgments"] == {"added": 0, "removed": 0}
    assert d["scores"]["pearson"] == pytest.approx(1.0) and d["scores"]["n_changed"] == 0 and d["scores"]["largest_moves"] == []
    assert "the same build" in format_diff(d)


def test_diff_refuses_a_folder_changed_after_the_build(rounds: dict[str, Any], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(rounds["new"], copy)
    (path,) = (copy / "data" / "default").glob("*.parquet")
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(InputError, match="does not match the data files"):
        diff_builds(rounds["old"], copy)
    with pytest.raises(InputError, match="not a dataset folder written by `fsb build`"):
        diff_builds(rounds["old"], tmp_path)
    # a build of another schema (no `score` column), with a matching fingerprint: named, not a KeyError
    # (`bin` and `text` may be missing: a study build has no bins and may have no texts)
    pq.write_table(pq.read_table(next((rounds["new"] / "data" / "default").glob("*.parquet"))).drop(["score"]), path)
    stats = json.loads((copy / "stats.json").read_text())
    ann = next((copy / "data" / "annotations").glob("*.parquet"))
    stats["fingerprint"] = content_fingerprint([sha256_file(path), sha256_file(ann)])
    (copy / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(InputError, match="has no column score"):
        diff_builds(rounds["old"], copy)


def test_fsb_diff_cli(rounds: dict[str, Any], tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "fsb", "diff", *args], capture_output=True, text=True, timeout=120, check=False)

    proc = run(str(rounds["old"]), str(rounds["new"]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == format_diff(diff_builds(rounds["old"], rounds["new"]))
    js = run(str(rounds["old"]), str(rounds["new"]), "--json")
    assert json.loads(js.stdout) == json.loads(json.dumps(diff_builds(rounds["old"], rounds["new"])))
    bad = run(str(rounds["old"]), str(tmp_path))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        f"fsb diff: error: {tmp_path / 'stats.json'}: file not found: not a dataset folder written by `fsb build`"
    ]
