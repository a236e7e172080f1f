"""fsb report: the vectorised bootstrap agrees with the harness's metrics; intervals behave (two-level for
groups, paired differences); prediction files are reported exactly as an lm-eval run; undefined groups
keep the defined sets' mean; the page (Markdown, JSON, PNG) from the command line."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from fsb.evaluate import agreement
from fsb.evaluate import metrics as task_utils
from fsb.evaluate.agreement import bootstrap, draws, paired_difference, summary
from fsb.evaluate.results import TaskSamples, dataset_table, load_runs, read_predictions
from tests._support import run_fsb

FSB = Path(sys.executable).parent / "fsb"


def _samples(name: str, preds: list[float | None], golds: list[float], ids: list[int] | None = None) -> TaskSamples:
    ids = ids or list(range(1, len(golds) + 1))
    p = np.array([math.nan if x is None else x for x in preds])
    return TaskSamples(name, np.array(ids), p, np.array(golds, dtype=float))


def _fsb(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FSB_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return run_fsb(*args, cwd=cwd, env=env, timeout=600)


# --- units ------------------------------------------------------------------------------------------


def test_vectorised_draws_equal_the_harness_on_the_identity_resample() -> None:
    rng = np.random.default_rng(0)
    golds = rng.random(50)
    preds = [None if i % 7 == 0 else float(np.round(g + rng.normal(0, 0.2), 1)) for i, g in enumerate(golds)]
    s = _samples("t", preds, golds.tolist())
    d = draws(s, np.arange(50)[None, :])
    items = s.items()
    assert d["pearson"][0] == pytest.approx(task_utils.pearson(items), abs=1e-12)
    assert d["spearman"][0] == pytest.approx(task_utils.spearman(items), abs=1e-12)
    assert d["mse"][0] == pytest.approx(task_utils.mse(items), abs=1e-12)
    assert d["parse_rate"][0] == pytest.approx(42 / 50)  # i % 7 == 0 for 8 of the 50
    const = _samples("c", [0.5] * 10, list(np.linspace(0, 1, 10)))
    assert np.isnan(draws(const, np.arange(10)[None, :])["pearson"][0])


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


def test_group_bootstrap_uses_one_resample_for_every_set() -> None:
    golds = list(np.linspace(0, 1, 30))
    a = _samples("a", golds, golds)
    b = _samples("b", [1 - g for g in golds], golds)
    ci = bootstrap([a, b], n_boot=300)
    # r = +1 and -1 on every resample: their mean is exactly 0 on every draw if the resamples are shared
    assert ci["pearson"]["low"] == pytest.approx(0.0, abs=1e-12) and ci["pearson"]["high"] == pytest.approx(0.0, abs=1e-12)
    # resampling the sets too: draws that pick a twice or b twice reach +1 and -1
    two = bootstrap([a, b], n_boot=300, over_sets=True)
    assert two["pearson"]["low"] == pytest.approx(-1.0) and two["pearson"]["high"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same sentences"):
        bootstrap([a, _samples("c", golds, golds, ids=list(range(2, 32)))])


def test_the_group_interval_reflects_the_variation_over_sets() -> None:
    rng = np.random.default_rng(2)
    golds = rng.random(300)
    alike = [_samples(f"s{k}", (golds + rng.normal(0, 0.3, 300)).tolist(), golds.tolist()) for k in range(5)]
    unlike = [_samples(f"s{k}", (golds + rng.normal(0, sd, 300)).tolist(), golds.tolist()) for k, sd in enumerate((0.05, 0.1, 0.3, 1, 3))]
    width = lambda ci: ci["pearson"]["high"] - ci["pearson"]["low"]  # noqa: E731
    for sets in (alike, unlike):
        assert width(bootstrap(sets, n_boot=400, over_sets=True)) >= width(bootstrap(sets, n_boot=400)) * 0.9
    assert width(bootstrap(unlike, n_boot=400, over_sets=True)) > 3 * width(bootstrap(unlike, n_boot=400))


def test_a_constant_set_keeps_the_group_undefined_and_gives_the_defined_sets_mean() -> None:
    golds = list(np.linspace(0, 1, 40))
    sets = [_samples(f"fsb_set{k}", [g + 0.01 * k for g in golds], golds) for k in range(4)]
    sets.append(_samples("fsb_set4", [0.5] * 40, golds))
    s = summary(sets, n_boot=100)
    assert math.isnan(s["values"]["pearson"])
    d = s["defined_sets"]["pearson"]
    assert (d["mean"], d["sets"], d["of"]) == (pytest.approx(1.0), 4, 5)
    assert d["ci95"]["low"] == pytest.approx(1.0) and d["ci95"]["defined"] == 1.0, "its interval is over the defined sets"
    assert s["per_set"]["fsb_set4"]["pearson"] != s["per_set"]["fsb_set4"]["pearson"]  # NaN
    from fsb.evaluate.report import corr_cell as _corr_cell

    cell = _corr_cell({**s, "values": s["values"]}, "pearson")
    assert cell.startswith("undefined: constant predictions in set4; "), "the group value stays undefined and says why"
    assert "mean over the 4 defined sets of 5 (not the protocol's figure): 1.000 [1.000, 1.000]" in cell


def test_an_undefined_correlation_says_why() -> None:
    from fsb.evaluate.agreement import why_undefined
    from fsb.evaluate.report import corr_cell as _corr_cell

    golds = list(np.linspace(0, 1, 20))
    varied = _samples("fsb_set0", golds, golds)
    constant = lambda name: _samples(name, [0.3] * 20, golds)  # noqa: E731
    assert why_undefined([varied]) is None
    assert why_undefined([varied, constant("fsb_set1"), constant("fsb_set3")]) == "constant predictions in set1, set3"
    assert why_undefined([_samples("t", golds, [0.5] * 20)]) == "constant human scores"
    assert why_undefined([_samples("t", [0.2] + [None] * 19, golds)]) == "1 parsed answer"
    single = summary([constant("fsb_0shot")], n_boot=50)
    assert _corr_cell(single, "pearson") == "undefined: constant predictions", "a single task has no defined-sets mean"
    none = summary([constant("fsb_set0"), constant("fsb_set1")], n_boot=50)
    assert _corr_cell(none, "spearman").endswith("mean over the 0 defined sets of 2 (not the protocol's figure): none defined")


def test_paired_difference_separates_a_better_scorer_but_not_a_reseeded_one() -> None:
    rng = np.random.default_rng(3)
    golds = rng.random(500)
    noisy = lambda sd, seed: _samples("x", (golds + np.random.default_rng(seed).normal(0, sd, 500)).tolist(), golds.tolist())  # noqa: E731
    better = paired_difference([noisy(0.1, 1)], [noisy(0.5, 2)], n_boot=500)
    assert better["difference"] > 0 and better["ci95"]["low"] > 0
    same = paired_difference([noisy(0.3, 1)], [noisy(0.3, 2)], n_boot=500)
    assert same["ci95"]["low"] < 0 < same["ci95"]["high"]
    mse = paired_difference([noisy(0.1, 1)], [noisy(0.5, 2)], metric="mse", n_boot=500)
    assert mse["ci95"]["high"] < 0


def test_calibration_recovers_a_known_line() -> None:
    preds = np.linspace(0, 1, 50)
    s = _samples("t", preds.tolist(), (0.2 + 0.5 * preds).tolist())
    assert agreement.calibration([s]) == {"slope": pytest.approx(0.5), "intercept": pytest.approx(0.2)}


def test_prediction_files_csv_and_jsonl_and_their_errors(tmp_path: Path) -> None:
    csv_file = tmp_path / "p.csv"
    csv_file.write_text("id,score,extra\n3,0.25,x\n1,1,y\n")
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"id": 3, "score": 0.25}\n{"id": 1, "score": 1}\n')
    assert read_predictions(csv_file) == read_predictions(jsonl) == {3: 0.25, 1: 1.0}
    bad = {
        "id,score\n1,0.5\n1,0.2\n": "line 3, field 'id': id 1 appears twice",
        "id,score\n1,high\n": "line 2, field 'score': score 'high' is not a number",
        "id,value\n1,0.5\n": "line 1, field 'score': the header has no 'score' column",
        "id,score\nx,0.5\n": "line 2, field 'id': id 'x' is not an integer",
        "id,score\n1,nan\n": "not a finite number",
    }
    for k, (text, message) in enumerate(bad.items()):
        f = tmp_path / f"bad{k}.csv"
        f.write_text(text)
        with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
            read_predictions(f)
        assert str(f) in str(e.value)
    j = tmp_path / "bad.jsonl"
    j.write_text('{"id": 1}\n')
    with pytest.raises(Exception, match="line 1, field 'score': no 'score' key"):
        read_predictions(j)


# --- runs and prediction files over the release ----------------------------------------------------


def _write_run(
    folder: Path, tasks: dict[str, list[tuple[int, float | None, float]]], stamp: str, model_args: str, **config: object
) -> None:
    """An lm-eval output folder as lm-eval writes it: results_*.json and samples_<task>_*.jsonl."""
    folder.mkdir(parents=True)
    results: dict = {"results": {}, "configs": {}, "group_subtasks": {}, "config": {"model": "hf", "model_args": model_args, **config}}
    for task, rows in tasks.items():
        items = [(p, g) for _, p, g in rows]
        results["results"][task] = {"pearson,none": task_utils.pearson(items), "mse,none": task_utils.mse(items), "parse_rate,none": 1.0}
        results["configs"][task] = {}
        with open(folder / f"samples_{task}_{stamp}.jsonl", "w", encoding="utf-8") as f:
            for i, p, g in rows:
                f.write(json.dumps({"doc": {"id": i, "text": f"s{i}\u2028x"}, "pearson": [p, g]}, ensure_ascii=False) + "\n")
    if len(tasks) > 1:
        results["group_subtasks"]["fsb"] = list(tasks)
    (folder / f"results_{stamp}.json").write_text(json.dumps(results))


@pytest.fixture(scope="module")
def release_table(release_dataset: Path):
    return dataset_table(str(release_dataset))


def _noisy(table, sd: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(table.scores + rng.normal(0, sd, table.scores.size), 0, 1).round(2)


def test_a_prediction_file_is_reported_exactly_as_an_lm_eval_run(release_dataset: Path, release_table, tmp_path: Path) -> None:
    from fsb.evaluate import report as compare

    t = release_table
    preds = _noisy(t, 0.2, 0)
    rows = [(int(i), float(p), float(g)) for i, p, g, s in zip(t.ids, preds, t.scores, t.scored) if s]
    _write_run(tmp_path / "run", {"fsb_0shot": rows}, "2026-01-01T00-00-00", "pretrained=/models/Tiny-Model")
    pred_file = tmp_path / "tiny.csv"
    pred_file.write_text("id,score\n" + "".join(f"{int(i)},{p}\n" for i, p in zip(t.ids, preds)))
    report, _ = compare.build([tmp_path / "run", pred_file], dataset=str(release_dataset), n_boot=200, reference_trials=5)
    run_row, file_row = sorted(report["rows"], key=lambda r: r["kind"])
    assert run_row["label"] == "Tiny-Model fsb_0shot" and file_row["label"] == "tiny" and file_row["kind"] == "predictions"
    for key in ("values", "ci95", "breakdowns", "calibration", "sentences"):
        a, b = run_row[key], file_row[key]
        if key == "values" or key == "ci95":
            a = {m: v for m, v in a.items() if m != "parse_rate"}
            b = {m: v for m, v in b.items() if m != "parse_rate"}
        assert a == b, key
    assert run_row["values"]["parse_rate"] == 1.0 and math.isnan(file_row["values"]["parse_rate"])
    assert set(run_row["breakdowns"]) == {"seed_type", "prompt_type", "bin"}
    assert run_row["breakdowns"]["bin"]["low"]["sentences"] + run_row["breakdowns"]["bin"]["high"]["sentences"] < 960
    # a missing scored sentence is an error naming the file
    short = tmp_path / "short.csv"
    short.write_text("id,score\n" + "".join(f"{int(i)},{p}\n" for i, p in list(zip(t.ids, preds))[:-100]))
    with pytest.raises(Exception, match=r"short.csv, field 'id': no prediction for \d+ of the 960 scored sentences"):
        compare.build([short], dataset=str(release_dataset), n_boot=10)


def test_fsb_report_over_runs_and_prediction_files(release_dataset: Path, release_table, tmp_path: Path) -> None:
    t = release_table
    scored = t.ids[t.scored]
    good, other = _noisy(t, 0.1, 1), _noisy(t, 0.3, 2)
    # a 5-set group run on a sample of 100 sentences, one set answering a constant; made with --limit
    sample = set(scored[::9][:100].tolist())
    sets = {}
    for k in range(5):
        vals = _noisy(t, 0.25, 10 + k) if k != 3 else np.full(t.ids.size, 0.5)
        sets[f"fsb_set{k}"] = [(int(i), float(v), float(g)) for i, v, g in zip(t.ids, vals, t.scores) if int(i) in sample]
    _write_run(tmp_path / "runs" / "a", sets, "2026-01-01T00-00-00", "pretrained=/m/SmolThing,dtype=float32", limit=100)
    for name, vals in (("good", good), ("reseeded-a", other), ("reseeded-b", _noisy(t, 0.3, 3))):
        (tmp_path / f"{name}.csv").write_text("id,score\n" + "".join(f"{int(i)},{v}\n" for i, v in zip(t.ids, vals)))
    home, out = tmp_path / "home", tmp_path / "page"
    args = ["report", str(tmp_path / "runs"), str(tmp_path / "reseeded-b.csv"), "--predictions", str(tmp_path / "good.csv")]
    args += ["--predictions", str(tmp_path / "reseeded-a.csv"), "--dataset", str(release_dataset), "--bootstrap", "300"]
    args += ["--trials", "10"]
    args += ["--compare", "good", "reseeded-a", "--compare", "reseeded-a", "reseeded-b", "--out", str(out)]
    proc = _fsb(*args, cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
    labels = [line.split("|")[2].strip() for line in table_rows]
    assert labels[:3] == ["good", "reseeded-a", "reseeded-b"] or labels[0] == "good"
    assert "SmolThing fsb" in labels, "rows are labelled by model and task"
    smol = next(line for line in table_rows if "SmolThing fsb" in line)
    # the compact table: flags by key, the undefined group's defined-sets mean in parentheses, the count of parsed answers
    assert smol.rstrip(" |").endswith("S U") and "| 100 x 5 sets | (0." in smol and "| 1.000 (500/500) |" in smol
    assert "S: a sample" in text and "U: undefined in some few-shot set" in text, "the flag key names each flag used"
    assert "flags: --limit 100; sample: 100 of 960 sentences, not comparable with the 960-sentence figures" in text
    assert "undefined: constant predictions in set3; mean over the 4 defined sets of 5 (not the protocol's figure)" in text
    assert "NOT comparable with figures on all the scored sentences" in text
    good_row = next(line for line in table_rows if "| good |" in line)
    assert "| none |" in good_row, "a prediction file has no parse rate"
    assert "| split-half r |" in text and "| full-panel reliability |" in text and "| noise ceiling |" in text
    assert "Spearman-Brown 2r/(1+r)" in text and "sqrt(reliability)" in text and "(sd over 10 trials " in text
    assert "On 960 sentences" in text and "On 100 sentences" in text
    assert text.index("Reference points") < text.index("## Notes"), "the reference points sit right below the table"
    assert "QUOTED, all 1000 sentences" in text and "GPT-4 0.813 / 0.024" in text
    assert "annotators' own best-worst agreement" in text and "best 0.679 [" in text
    assert "two-level bootstrap" in text
    assert not re.search(r"\d(?:it|s)/(?:s|it)\b|%\|", text) and "Generating" not in text, "no progress bars in the report"
    assert "| good | reseeded-a |" in text and "a better" in text
    assert "| reseeded-a | reseeded-b |" in text and "no clear difference (interval includes 0)" in text
    page = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()
    assert "![Pearson r of every row" in md and md.index("(forest.png)") < md.index("## Notes"), "the forest plot near the top"
    without_plot = md.replace(next(line for line in md.splitlines() if "(forest.png)" in line) + "\n", "").replace(
        "0.285\n\n\n", "0.285\n\n"
    )
    assert without_plot.strip() == text.strip(), "report.md is the printed page plus the forest plot"
    # breakdowns: a correlation only for groups of 10+, each with the human figures of its own sentences
    small = big = 0
    for row in page["rows"]:
        assert row["human_reference"]["sentences"] == row["sentences"]
        for key, groups in row["breakdowns"].items():
            for g, b in groups.items():
                if b["sentences"] < 10:
                    small += 1
                    assert b["pearson"] is None and b["pearson_note"] == f"not meaningful: n = {b['sentences']} < 10", (key, g)
                    assert b["human_reference"]["noise_ceiling"] is None and b["human_reference"]["note"].startswith("not meaningful")
                    assert b["mse"] is not None
                else:
                    big += 1
                    h = b["human_reference"]
                    assert h["sentences"] == b["sentences"] and h["noise_ceiling_split_half_formula"] == pytest.approx(
                        math.sqrt(2 * h["split_half"] / (1 + h["split_half"]))
                    )
                    assert 0 < h["noise_ceiling"] <= 1 and "parametric bootstrap" in h["ceiling_method"]
                    if row["kind"] == "lm-eval":  # set 3 answers a constant: undefined in every group too
                        assert b["pearson"] is None and b["pearson_note"].startswith("undefined: constant predictions in set3; mean over")
                    else:
                        assert b["pearson"] is not None and b["pearson_note"] is None
    assert small and big, "the sample row has groups below 10 sentences, the full rows above"
    groups = page["rows"][0]["breakdowns"]["bin"]
    assert len({g["human_reference"]["split_half"] for g in groups.values()}) == 3, "each bin has its own reference"
    assert (
        "not meaningful: n = " in text
        and "| human split-half r | perfect scorer's bound (simulated) |" in text
        and "95th percentile, over studies simulated" in text
    )
    assert "a group gets a correlation only with at least 10 sentences" in text
    # the forest plot: each measured row with its own ceiling, the sample and the undefined group labelled as such
    from fsb.evaluate.report import forest_items, scatter_title

    items = {t["label"].split("\n")[0]: t for t in forest_items(page)}
    smol_item = items["SmolThing fsb (sample of 100: not comparable)"]
    assert smol_item["human"]["sentences"] == 100 and items["good"]["human"]["sentences"] == 960
    assert smol_item["human"]["noise_ceiling"] != items["good"]["human"]["noise_ceiling"], "per-row ceilings"
    assert items["GPT-4 (paper, quoted)"]["human"] is None and items["GPT-4 (paper, quoted)"]["ci"] is None
    by_label = {r["label"]: r for r in page["rows"]}
    good_title = scatter_title(by_label["good"])
    ci = by_label["good"]["ci95"]["pearson"]
    assert good_title == f"good\nr = {by_label['good']['values']['pearson']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}], n = 960"
    smol_title = " ".join(scatter_title(by_label["SmolThing fsb"]).split())
    assert "(sample: not comparable)" in smol_title and "r undefined (constant predictions in set3)" in smol_title
    assert smol_title.endswith("n = 100 x 5 sets")
    by = {c["a"]: c for c in page["comparisons"]}
    assert by["good"]["pearson"]["ci95"]["low"] > 0
    assert by["reseeded-a"]["pearson"]["ci95"]["low"] < 0 < by["reseeded-a"]["pearson"]["ci95"]["high"]
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert "forest.png" in pngs and len([p for p in pngs if p.startswith("scatter-")]) == 4
    assert all((out / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    j = _fsb(*args[:-2], "--json", cwd=tmp_path, home=home)
    assert j.returncode == 0, j.stderr[-2000:]
    assert json.loads(j.stdout)["rows"] == page["rows"]
    # a folder with the user's own files is never replaced
    (out / "notes.txt").write_text("mine")
    refused = _fsb(*args, cwd=tmp_path, home=home)
    assert refused.returncode == 2 and "refusing to replace it" in refused.stderr and (out / "notes.txt").read_text() == "mine"
    assert len(refused.stderr.strip().splitlines()) == 1
    unknown = _fsb(*args[:-2], "--compare", "good", "nobody", cwd=tmp_path, home=home)
    assert unknown.returncode == 2 and "no row 'nobody'" in unknown.stderr


def test_a_limited_run_without_its_dataset_is_still_flagged_a_sample(tmp_path: Path) -> None:
    from fsb.evaluate.results import load_entries

    rows = [(i, round(0.1 * (i % 10), 1), 0.1 * (i % 10) + 0.01) for i in range(1, 21)]
    _write_run(tmp_path / "lim", {"fsb_0shot": rows}, "2026-01-01T00-00-00", "pretrained=x", limit=20)
    _write_run(tmp_path / "full", {"fsb_0shot": rows}, "2026-01-01T00-00-00", "pretrained=y")
    limited, full = load_entries([tmp_path / "lim", tmp_path / "full"], None)
    assert limited.flags == ["--limit 20: a sample, not comparable with full-protocol figures"] and full.flags == []


def test_load_runs_reads_every_folder(tmp_path: Path) -> None:
    rows = [(i, round(0.1 * (i % 10), 1), 0.1 * (i % 10) + 0.01) for i in range(1, 21)]
    _write_run(tmp_path / "main" / "fsb" / "m", {"fsb_0shot": rows}, "2026-01-01T00-00-00", "pretrained=x")
    _write_run(tmp_path / "main" / "fsb_ll" / "m", {"fsb_set0": rows}, "2026-01-02T00-00-00", "pretrained=x")
    runs = load_runs(tmp_path / "main")
    assert [sorted(r.tasks) for r in runs] == [["fsb_0shot"], ["fsb_set0"]]
    s = agreement.summarize(runs[0], n_boot=50)["fsb_0shot"]
    assert s["values"]["pearson"] == pytest.approx(runs[0].results["results"]["fsb_0shot"]["pearson,none"])


def test_the_human_reference_is_shown_only_for_the_dataset_that_was_scored(release_dataset: Path, release_table, tmp_path: Path) -> None:
    from fsb.evaluate import report as compare

    t = release_table
    rows = [(int(i), 0.5 if k % 2 else 0.6, float(g)) for k, (i, g) in enumerate(zip(t.ids[t.scored][:30], t.scores[t.scored][:30]))]
    _write_run(tmp_path / "good", {"fsb_0shot": rows}, "2026-01-01T00-00-00", "pretrained=m")
    page, _ = compare.build([tmp_path / "good"], dataset=str(release_dataset), n_boot=50, reference_trials=5)
    assert [h["sentences"] for h in page["human_reference"]] == [30] and not page["dataset_note"]
    assert page["rows"][0]["breakdowns"]["bin"], "breakdowns from the dataset"
    _write_run(tmp_path / "other", {"fsb_0shot": [(i, p, g + 0.01) for i, p, g in rows]}, "2026-01-01T00-00-00", "pretrained=m")
    page, _ = compare.build([tmp_path / "other"], dataset=str(release_dataset), n_boot=50, reference_trials=5)
    assert page["human_reference"] == [] and "are not those of" in page["dataset_note"]
    assert "human reference figures: not shown for every row" in compare.render_markdown(page)


def test_a_paired_comparison_withholds_a_correlation_that_means_nothing_and_reads_each_metric(
    release_dataset: Path, release_table, tmp_path: Path
) -> None:
    """Against the mean baseline (a constant per fold: its correlation is an artefact) a Pearson or Spearman
    difference would read as a gain; it is withheld with the reason, and mse gets its own verdict."""
    from fsb.evaluate import report as compare

    t = release_table
    lex = tmp_path / "lex.csv"
    lex.write_text("id,score\n" + "".join(f"{int(i)},{v}\n" for i, v in zip(t.ids, _noisy(t, 0.25, 4))))
    folds = np.arange(t.ids.size) % 10
    fold_means = np.array([t.scores[folds != k].mean() for k in range(10)])
    mean = tmp_path / "mean.csv"
    mean.write_text("id,score\n" + "".join(f"{int(i)},{fold_means[k]:.6f}\n" for i, k in zip(t.ids, folds)))
    (tmp_path / "mean.csv.json").write_text(json.dumps({"baseline": "mean", "correlation_meaningful": False}))
    report, _ = compare.build(
        [lex, mean, lex], dataset=str(release_dataset), n_boot=200, reference_trials=2, compare=[("lex #1", "baseline mean"), ("1", "3")]
    )
    c = report["comparisons"][0]
    assert (c["a"], c["b"]) == ("lex #1", "baseline mean")
    for m in ("pearson", "spearman"):
        assert c[m]["withheld"] == "b's correlation is not meaningful (constant by design)" and math.isnan(c[m]["difference"])
    assert "withheld" not in c["mse"] and c["mse"]["difference"] > 0, "noisy predictions have the larger error"
    assert c["mse"]["reads"] == ("b better (lower mse)" if c["mse"]["ci95"]["low"] > 0 else "no clear difference (interval includes 0)")
    same = report["comparisons"][1]
    assert (same["a"], same["b"]) == ("lex #1", "lex #2"), "--compare numbers rows as given (1st and 3rd input), not as sorted"
    assert {m: same[m]["reads"] for m in ("pearson", "spearman", "mse")} == dict.fromkeys(
        ("pearson", "spearman", "mse"), "no clear difference (interval includes 0)"
    )
    text = compare.render_markdown(report)
    line = next(x for x in text.splitlines() if x.startswith("| lex #1 | baseline mean |"))
    assert line.count("withheld: b's correlation is not meaningful (constant by design)") == 2
    assert f": {c['mse']['reads']} |" in line and "a better" not in line
    assert compare.comparison_verdict("mse", {"low": -0.2, "high": -0.1}) == "a better (lower mse)"
    assert compare.comparison_verdict("spearman", {"low": -0.2, "high": -0.1}) == "b better (higher spearman)"


def test_the_human_reference_needs_ten_sentences_and_is_comparable_with_table_2_only_on_the_full_set(
    release_dataset: Path, release_table, tmp_path: Path
) -> None:
    from fsb.evaluate import report as compare

    t = release_table
    ids, golds = t.ids[t.scored], t.scores[t.scored]
    _write_run(
        tmp_path / "three",
        {"fsb_0shot": [(int(i), 0.5 + 0.1 * k, float(g)) for k, (i, g) in enumerate(zip(ids[:3], golds[:3]))]},
        "2026-01-01T00-00-00",
        "pretrained=m",
        limit=3,
    )
    _write_run(
        tmp_path / "thirty",
        {"fsb_0shot": [(int(i), float(g), float(g)) for i, g in zip(ids[:30], golds[:30])]},
        "2026-01-01T00-00-00",
        "pretrained=n",
    )
    full = tmp_path / "full.csv"
    full.write_text("id,score\n" + "".join(f"{int(i)},{v}\n" for i, v in zip(t.ids, _noisy(t, 0.2, 5))))
    page, _ = compare.build([tmp_path / "three", tmp_path / "thirty", full], dataset=str(release_dataset), n_boot=50, reference_trials=5)
    assert page["dataset"]["is_release"] is True
    by_n = {h["sentences"]: h for h in page["human_reference"]}
    assert set(by_n) == {3, 30, 960}
    assert by_n[3] == {"sentences": 3, "note": "not meaningful: n = 3 < 10"}, "no split-half r on 3 sentences"
    three = next(r for r in page["rows"] if r["sentences"] == 3)
    assert three["human_reference"] == {"sentences": 3, "note": "not meaningful: n = 3 < 10"}
    assert all(i["human"] is None for i in compare.forest_items(page) if i["label"].startswith("m fsb_0shot"))
    text = compare.render_markdown(page)
    assert "On the 3 scored sentences: not meaningful: n = 3 < 10" in text
    assert "human reference on this row's 3 sentences: not meaningful: n = 3 < 10" in text
    sections = {n: text.split(f"On {n} sentences")[1].split("References:")[0] for n in (30, 960)}
    assert "comparable with the paper's Table 2, over all 1000" in sections[960].splitlines()[0]
    assert "| two half-size panels, uncorrected (comparable with the paper's Table 2) |" in sections[960]
    assert "not comparable with the paper's Table 2" in sections[30].splitlines()[0]
    assert "(comparable with the paper's Table 2)" not in sections[30], "the heading and the row agree"


def test_the_main_jobs_results_folder_brings_its_baselines(release_dataset: Path, release_table, tmp_path: Path) -> None:
    """`fsb report results/main` shows the baselines report.txt shows: a folder's baselines/ files with their provenance."""
    from fsb.evaluate import report as compare

    t = release_table
    rows = [(int(i), float(g), float(g)) for i, g in zip(t.ids[t.scored][:30], t.scores[t.scored][:30])]
    _write_run(tmp_path / "main" / "fsb", {"fsb_0shot": rows}, "2026-01-01T00-00-00", "pretrained=/m/Model")
    (tmp_path / "main" / "baselines").mkdir()
    for name in ("lexicon", "stray"):
        (tmp_path / "main" / "baselines" / f"{name}.csv").write_text("id,score\n" + "".join(f"{int(i)},0.5\n" for i in t.ids))
    (tmp_path / "main" / "baselines" / "lexicon.csv.json").write_text(json.dumps({"baseline": "lexicon"}))
    page, _ = compare.build([tmp_path / "main"], dataset=str(release_dataset), n_boot=20, reference_trials=2)
    assert [r["label"] for r in sorted(page["rows"], key=lambda r: r["given"])] == ["Model fsb_0shot", "baseline lexicon"]
    assert "stray" not in json.dumps(page["rows"]), "only files fsb baseline wrote (with their provenance)"
