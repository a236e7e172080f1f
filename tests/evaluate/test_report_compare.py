"""Paired comparisons (issue 18, point 2; issue 21's mutation "the paired bootstrap resamples the two rows
independently"): the same draw of sentences and few-shot sets for both rows, verdicts that name what they
condition on, rows named as given, and one line (exit 2) for rows that share too few sentences. Labels
(point 3): parse rates with their counts, no "-0.000"."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fsb.evaluate.agreement import bootstrap, paired_difference
from fsb.evaluate.report import comparison_verdict, fmt, parse_cell, row_flags
from fsb.evaluate.results import TaskSamples

FSB = Path(sys.executable).parent / "fsb"


def _set(name: str, preds: np.ndarray, golds: np.ndarray) -> TaskSamples:
    return TaskSamples(name, np.arange(1, golds.size + 1), np.asarray(preds, dtype=float), golds)


def _width(ci: dict) -> float:
    return ci["high"] - ci["low"]


def test_two_scorers_sharing_their_noise_get_a_paired_interval_far_narrower_than_unpaired() -> None:
    """Kills the mutation that resamples the two rows independently: their shared noise then no longer cancels."""
    rng = np.random.default_rng(0)
    golds = rng.random(400)
    shared = rng.normal(0, 0.3, 400)
    a = _set("fsb", golds + shared + rng.normal(0, 0.02, 400), golds)
    b = _set("fsb", golds + shared + rng.normal(0, 0.02, 400), golds)
    paired = paired_difference([a], [b], "pearson", n_boot=500)
    unpaired = math.hypot(_width(bootstrap([a], n_boot=500, seed=1)["pearson"]), _width(bootstrap([b], n_boot=500, seed=2)["pearson"]))
    assert _width(paired["ci95"]) * 4 < unpaired, (paired["ci95"], unpaired)


def test_the_few_shot_sets_are_resampled_paired_for_rows_of_the_same_sets() -> None:
    """Five sets that differ a lot from each other, the two rows nearly equal set by set: drawing the same sets
    for both rows keeps the interval narrow; drawing each row's own sets (as for rows of different sets) widens it."""
    rng = np.random.default_rng(1)
    golds = rng.random(300)
    quality = [0.05, 0.2, 0.4, 0.6, 0.9]
    a = [_set(f"fsb_set{k}", golds + rng.normal(0, q, 300), golds) for k, q in enumerate(quality)]
    b = [_set(s.name, s.preds + rng.normal(0, 0.01, 300), golds) for s in a]
    same = paired_difference(a, b, "pearson", n_boot=500)
    other = paired_difference(a, [_set(f"other{k}", s.preds, golds) for k, s in enumerate(b)], "pearson", n_boot=500)
    assert "the same draw of both for both rows" in same["resampled"] and same["conditional_on"] == ""
    assert "each row's own sets" in other["resampled"]
    assert _width(same["ci95"]) * 4 < _width(other["ci95"]), (same["ci95"], other["ci95"])
    fixed = paired_difference(a, b, "pearson", n_boot=500, over_sets=False)
    assert fixed["conditional_on"] == "these 5 few-shot sets"
    assert (
        comparison_verdict("pearson", {"low": 0.1, "high": 0.2}, fixed["conditional_on"])
        == "a better (higher pearson), for these 5 few-shot sets"
    )


def _write_run(folder: Path, rows: list[tuple[int, float, float]], model: str) -> None:
    """A one-task lm-eval output folder (results_*.json, samples_fsb_*.jsonl) run with --limit."""
    folder.mkdir(parents=True)
    results = {"results": {"fsb": {"pearson,none": 0.0, "parse_rate,none": 1.0}}, "configs": {"fsb": {}}, "group_subtasks": {}}
    results["config"] = {"model": "hf", "model_args": f"pretrained=/m/{model}", "limit": len(rows)}
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps(results))
    with open(folder / "samples_fsb_2026-01-01T00-00-00.jsonl", "w", encoding="utf-8") as f:
        for i, p, g in rows:
            f.write(json.dumps({"doc": {"id": i}, "pearson": [p, g]}) + "\n")


def test_rows_that_share_too_few_sentences_are_one_line_and_exit_2(release_dataset: Path, tmp_path: Path) -> None:
    """`fsb report RUN_A RUN_B --compare 1 2` on runs that scored different sentences: was a traceback (ValueError, exit 1)."""
    from fsb.evaluate.results import dataset_table

    t = dataset_table(str(release_dataset))
    ids, scores = t.ids[t.scored], t.scores[t.scored]
    rng = np.random.default_rng(0)
    _write_run(tmp_path / "A", [(int(i), float(rng.random()), float(s)) for i, s in zip(ids[:40], scores[:40])], "ModelA")
    _write_run(tmp_path / "B", [(int(i), float(rng.random()), float(s)) for i, s in zip(ids[39:80], scores[39:80])], "ModelB")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    args = [str(FSB), "report", "A", "B", "--dataset", str(release_dataset), "--bootstrap", "50", "--trials", "2"]
    proc = subprocess.run([*args, "--compare", "1", "2"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "ModelA fsb and ModelB fsb share 1 scored sentence;" in line
    done = subprocess.run([*args, "--compare", "2", "1", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 2, "numbers name the rows as given: 2 is B, 1 is A, whatever their sort order"
    assert "ModelB fsb and ModelA fsb" in done.stderr


def _row(**over: object) -> dict:
    row = {"values": {"parse_rate": math.nan}, "sentences": 24, "variants": 1, "flags": [], "correlation_meaningful": True}
    return {**row, **over}


def test_a_parse_rate_of_zero_reads_with_its_count_never_none() -> None:
    bws = {"values": {"parse_rate": 0.0}, "presentations": 24}
    assert parse_cell(_row(bws=bws)) == "0.000 (0/24)", "a best-worst run whose answers all fail to parse"
    assert parse_cell(_row(values={"parse_rate": 0.0})) == "0.000 (0/24)"
    assert parse_cell(_row(values={"parse_rate": 0.75}, variants=2)) == "0.750 (36/48)"
    assert parse_cell(_row()) == "none", "only a row with nothing to parse"


def test_labels_never_read_minus_zero_and_flags_mark_a_stratified_sample() -> None:
    assert fmt(-0.0001) == "0.000" and fmt(-0.0001, {"low": -0.0002, "high": 0.1, "defined": 1.0}) == "0.000 [0.000, 0.100]"
    assert fmt(-0.01) == "-0.010"
    assert row_flags(_row(flags=["sample: 8 per bin, not comparable with full-protocol figures"])) == ["B"]
    assert row_flags(_row(flags=["--limit 32", "sample: 32 of 960 sentences, not comparable"])) == ["S"]


@pytest.mark.parametrize("metric", ["pearson", "mse"])
def test_a_paired_interval_is_seeded(metric: str) -> None:
    rng = np.random.default_rng(2)
    golds = rng.random(100)
    a, b = _set("x", golds + rng.normal(0, 0.2, 100), golds), _set("x", golds + rng.normal(0, 0.3, 100), golds)
    assert paired_difference([a], [b], metric, n_boot=100) == paired_difference([a], [b], metric, n_boot=100)
