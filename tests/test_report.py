"""fsb report on hand-made runs: the vectorised bootstrap agrees with the harness's metrics, intervals
behave, several runs load together, the human ceiling is shown only for the dataset that was scored."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

import fifty_shades_of_bias as spec
from fsb.report import TaskSamples, _draws, bootstrap, format_report, harness_utils, load_runs, summarize

U = harness_utils()


def _samples(name: str, preds: list[float | None], golds: list[float], ids: list[int] | None = None) -> TaskSamples:
    ids = ids or list(range(1, len(golds) + 1))
    p = np.array([math.nan if x is None else x for x in preds])
    return TaskSamples(name, np.array(ids), p, np.array(golds, dtype=float))


def test_vectorised_draws_equal_the_harness_on_the_identity_resample() -> None:
    rng = np.random.default_rng(0)
    golds = rng.random(50)
    preds = [None if i % 7 == 0 else float(np.round(g + rng.normal(0, 0.2), 1)) for i, g in enumerate(golds)]
    s = _samples("t", preds, golds.tolist())
    d = _draws(s, np.arange(50)[None, :])
    items = s.items()
    assert d["pearson"][0] == pytest.approx(U.pearson(items), abs=1e-12)
    assert d["spearman"][0] == pytest.approx(U.spearman(items), abs=1e-12)
    assert d["mse"][0] == pytest.approx(U.mse(items), abs=1e-12)
    assert d["parse_rate"][0] == pytest.approx(42 / 50)  # i % 7 == 0 for 8 of the 50
    # a resample with constant answers has no correlation
    const = _samples("c", [0.5] * 10, list(np.linspace(0, 1, 10)))
    assert np.isnan(_draws(const, np.arange(10)[None, :])["pearson"][0])


def test_bootstrap_intervals_cover_and_tighten() -> None:
    rng = np.random.default_rng(1)
    golds = rng.random(400)
    s = _samples("t", (golds + rng.normal(0, 0.3, 400)).tolist(), golds.tolist())
    ci = bootstrap([s], n_boot=500)
    r = scipy.stats.pearsonr(s.preds, s.golds)[0]
    assert ci["pearson"]["low"] < r < ci["pearson"]["high"] and ci["pearson"]["defined"] == 1.0
    small = _samples("s", s.preds[:40].tolist(), s.golds[:40].tolist())
    ci_small = bootstrap([small], n_boot=500)
    assert ci_small["pearson"]["high"] - ci_small["pearson"]["low"] > ci["pearson"]["high"] - ci["pearson"]["low"]
    assert bootstrap([s], n_boot=200, seed=3) == bootstrap([s], n_boot=200, seed=3)


def test_group_bootstrap_uses_one_resample_for_every_variant() -> None:
    golds = list(np.linspace(0, 1, 30))
    a = _samples("a", golds, golds)
    b = _samples("b", [1 - g for g in golds], golds)
    ci = bootstrap([a, b], n_boot=300)
    # r = +1 and -1 on every resample: their mean is exactly 0, on every draw, if the resamples are shared
    assert ci["pearson"]["low"] == pytest.approx(0.0, abs=1e-12) and ci["pearson"]["high"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="same sentences"):
        bootstrap([a, _samples("c", golds, golds, ids=list(range(2, 32)))])


def test_mostly_constant_answers_give_a_marked_or_no_interval() -> None:
    golds = list(np.linspace(0, 1, 40))
    one_off = _samples("x", [0.5] * 39 + [0.9], golds)
    ci = bootstrap([one_off], n_boot=400)["pearson"]
    assert 0.5 <= ci["defined"] < 1.0 or math.isnan(ci["low"])


def _write_run(folder: Path, task: str, rows: list[tuple[int, float | None, float, str]], stamp: str) -> None:
    folder.mkdir(parents=True)
    items = [(p, g) for _, p, g, _ in rows]
    results = {
        "results": {task: {"pearson,none": U.pearson(items), "mse,none": U.mse(items)}},
        "configs": {task: {}},
        "group_subtasks": {task: []},
        "config": {"model": "hand", "model_args": ""},
    }
    (folder / f"results_{stamp}.json").write_text(json.dumps(results))
    with open(folder / f"samples_{task}_{stamp}.jsonl", "w", encoding="utf-8") as f:
        for i, p, g, text in rows:
            f.write(json.dumps({"doc": {"id": i, "text": text}, "pearson": [p, g]}, ensure_ascii=False) + "\n")


def test_several_runs_load_together_and_answers_may_hold_line_separators(tmp_path: Path) -> None:
    rows = [(i, round(0.1 * (i % 10), 1), 0.1 * (i % 10) + 0.01, f"sentence {i}\u2028with a line separator") for i in range(1, 21)]
    _write_run(tmp_path / "main" / "fsb" / "m", "fsb_0shot", rows, "2026-01-01T00-00-00")
    _write_run(tmp_path / "main" / "fsb_ll" / "m", "fsb_set0", rows, "2026-01-02T00-00-00")
    runs = load_runs(tmp_path / "main")
    assert [sorted(r.tasks) for r in runs] == [["fsb_0shot"], ["fsb_set0"]]
    s = summarize(runs[0], n_boot=50)["fsb_0shot"]
    assert s["values"]["pearson"] == pytest.approx(runs[0].results["results"]["fsb_0shot"]["pearson,none"])


def test_the_ceiling_is_shown_only_for_the_dataset_that_was_scored(release_dataset: Path, tmp_path: Path) -> None:
    data = spec.load(source=str(release_dataset))[spec.SPLIT]
    rows = [(int(i), 0.5 if k % 2 else 0.6, float(sc), "") for k, (i, sc) in enumerate(zip(data["id"][:30], data["score"][:30]))]
    _write_run(tmp_path / "good" / "m", "fsb_0shot", rows, "2026-01-01T00-00-00")
    text = format_report(load_runs(tmp_path / "good"), dataset=str(release_dataset), n_boot=50)
    assert "human split-half reliability (the ceiling), this dataset: Pearson 0.872" in text
    other = [(i, p, g + 0.01, t) for i, p, g, t in rows]
    _write_run(tmp_path / "other" / "m", "fsb_0shot", other, "2026-01-01T00-00-00")
    text = format_report(load_runs(tmp_path / "other"), dataset=str(release_dataset), n_boot=50)
    assert "the ceiling): not shown: the scores in" in text and "0.872" not in text
