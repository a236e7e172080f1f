"""FSB's own build carries 95% bootstrap intervals of `score` and `score_maxdiff` (issue 19, part 2): computed by the
study build's `fsb.data.intervals.item_intervals`, seeded, recorded in stats.json and on the card with the coverage
measured on a simulated study, null with the reason counted where an item has none, and seen by `load_dataset`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest

import fifty_shades_of_bias as spec
from fsb.cli import main
from fsb.data import cardmeta, intervals
from fsb.data.dataset import build_dataset
from tests._support import make_raw

CI = ("score_ci_low", "score_ci_high", "score_maxdiff_ci_low", "score_maxdiff_ci_high")


def _default(out: Path) -> pd.DataFrame:
    (path,) = sorted((out / "data" / "default").glob("*.parquet"))
    return pd.read_parquet(path)


@pytest.fixture(scope="module")
def release_build(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("iv") / spec.NAME
    assert main(["build", "--raw-dir", str(release), "--out", str(out), "--no-record"]) == 0
    return out


@pytest.mark.release
def test_the_release_build_has_intervals_around_its_scores(release_build: Path) -> None:
    frame = _default(release_build)
    stats = json.loads((release_build / "stats.json").read_text())
    iv = stats["intervals"]
    assert list(frame.columns[6:13]) == ["score", "score_raw", "score_ci_low", "score_ci_high", "score_maxdiff", *CI[2:]]
    assert iv["resamples"] == intervals.N_BOOT == 200 and iv["seed"] == 0 and iv["level"] == 0.95
    # every sentence is in 8 tuples: each gets a counting interval, inside [0, 1] and around its score
    assert iv["null"]["score"] == int(frame["score_ci_low"].isna().sum()) == 0
    assert ((frame["score_ci_low"] <= frame["score"]) & (frame["score"] <= frame["score_ci_high"])).all()
    assert frame["score_ci_low"].ge(0).all() and frame["score_ci_high"].le(1).all()
    width = frame["score_ci_high"] - frame["score_ci_low"]
    assert width.between(0, 0.6).all() and width.median() > 0.1
    # width 0 only for sentences chosen best (or worst) in every judgment, and stats.json counts them
    assert (frame.loc[width == 0, "score"].isin([0.0, 1.0])).all() and iv["zero_width_score"] == int((width == 0).sum()) == 1
    # MaxDiff: the nulls are counted with their reason, the rest sit around the anchored utility on its scale
    md_null = frame["score_maxdiff_ci_low"].isna()
    assert iv["null"]["score_maxdiff"] == int(md_null.sum()) == int(frame["score_maxdiff_ci_high"].isna().sum())
    assert (md_null.sum() == 0) == (iv["reasons"]["score_maxdiff"] == [])
    ok = frame[~md_null]
    inside = (ok["score_maxdiff_ci_low"] <= ok["score_maxdiff"]) & (ok["score_maxdiff"] <= ok["score_maxdiff_ci_high"])
    assert inside.mean() > 0.99
    assert iv["coverage_on_simulated_study"] == intervals.COVERAGE


@pytest.mark.release
def test_the_release_card_says_how_the_intervals_were_made(release_build: Path) -> None:
    card = (release_build / "README.md").read_text(encoding="utf-8")
    iv = json.loads((release_build / "stats.json").read_text())["intervals"]
    cov = intervals.COVERAGE
    section = card[card.index("## Intervals") : card.index("## Source and provenance")]
    assert "200 resamples, seed 0" in section and "nonparametric bootstrap" in section
    assert "1 sentence has a counting interval of width 0" in section
    assert f"{cov['score']:.1%}" in section and f"{cov['score_maxdiff']:.1%}" in section and "nominal 95%" in section
    assert f"({cov['items']} items" in section and "measure_coverage()" in section
    assert f"{iv['null']['score']} for `score`, {iv['null']['score_maxdiff']} for\n`score_maxdiff`" in section
    for line in iv["reasons"]["score_maxdiff"]:
        assert f"- {line}" in section
    for column in CI:
        assert f"| `{column}` | float64 |" in card
    meta = cardmeta.read_card(release_build / "README.md")
    assert meta.num_examples("default") == 1000
    info = datasets.load_dataset_builder(str(release_build)).info
    assert info.features == spec.features("default")
    assert all(info.features[c] == datasets.Value("float64") for c in CI)


def _always_best(src: Path, dst: Path, uid: int) -> Path:
    """The judgments with `uid` chosen best in every tuple that shows it: its utility has no finite estimate."""
    with open(src, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    for row in rows[1:]:
        shown = [int(x) for x in row[:4]]
        if uid in shown:
            row[4] = str(uid)
            if int(row[5]) == uid:
                row[5] = str(min(x for x in shown if x != uid))
    with open(dst, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return dst


def test_an_item_without_an_interval_is_null_with_its_reason_and_loads_as_none(tmp_path: Path) -> None:
    g, a = make_raw(tmp_path / "raw", n=24, seed=2, judgments_per_tuple=3)
    a = _always_best(a, tmp_path / "always.csv", uid=5)
    out = tmp_path / "ds"
    stats = build_dataset(g, a, out, record=False, n_boot=50).stats
    iv = stats["intervals"]
    assert iv["resamples"] == 50 and iv["null"]["score_maxdiff"] >= 1
    reason = next(line for line in iv["reasons"]["score_maxdiff"] if "chosen best (or worst) in every judgment" in line)
    frame = _default(out).set_index("id")
    assert np.isnan(frame.loc[5, "score_maxdiff_ci_low"]) and np.isnan(frame.loc[5, "score_maxdiff_ci_high"])
    assert not np.isnan(frame.loc[5, "score_ci_low"]), "the counting score of an always-best item still has an interval"
    assert frame.loc[5, "score"] == 1.0
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"- {reason}" in card and "50 resamples, seed 0" in card
    rows = datasets.load_dataset(str(out))[spec.SPLIT].to_pandas().set_index("id")
    assert rows.loc[5, ["score_maxdiff_ci_low", "score_maxdiff_ci_high"]].isna().all()
    assert int(rows["score_maxdiff_ci_low"].isna().sum()) == iv["null"]["score_maxdiff"]
    assert json.loads((out / "stats.json").read_text())["intervals"]["null"] == iv["null"]


def test_the_seed_moves_only_the_intervals_and_a_rebuild_is_seen_by_load_dataset(tmp_path: Path) -> None:
    """Only the intervals change with the seed; the content-named data file changes the card's YAML, so the
    datasets cache (keyed on the YAML alone) does not serve the first build's intervals again."""
    g, a = make_raw(tmp_path / "raw", n=30, seed=4, judgments_per_tuple=2)
    out = tmp_path / "ds"
    first = build_dataset(g, a, out, record=False, seed=0, n_boot=40).stats
    before = datasets.load_dataset(str(out))[spec.SPLIT].to_pandas()
    yaml_before = (out / "README.md").read_text().split("---")[1]
    second = build_dataset(g, a, out, record=False, seed=1, n_boot=40).stats
    after = datasets.load_dataset(str(out))[spec.SPLIT].to_pandas()
    assert second["intervals"]["seed"] == 1 and first["intervals"]["seed"] == 0
    assert first["fingerprint"] != second["fingerprint"] and (out / "README.md").read_text().split("---")[1] != yaml_before
    old_columns = [c for c in spec.features("default") if c not in CI]
    pd.testing.assert_frame_equal(before[old_columns], after[old_columns])
    assert not before[list(CI)].equals(after[list(CI)])
    pd.testing.assert_frame_equal(after[list(CI)], _default(out)[list(CI)], check_exact=True)


def test_the_intervals_are_the_study_builds_own_on_the_same_judgments(tmp_path: Path) -> None:
    """One implementation: FSB's build gives the counting intervals `item_intervals` gives, and the MaxDiff ones
    shifted exactly as `score_maxdiff` is (anchored on round 1)."""
    from fsb.bws import maxdiff
    from fsb.bws.coded import encode
    from fsb.data.dataset import score_dataset
    from fsb.tables.csvrows import read_generations
    from fsb.tables.judgments import read_annotations

    g, a = make_raw(tmp_path / "raw", n=20, seed=5)
    ann = read_annotations(a, integer_ids=True)
    scored = score_dataset(read_generations(g), ann, seed=3, n_boot=30)
    uids = scored.default["id"].to_numpy()
    coded = encode(ann, labels=uids)
    fit = maxdiff.fit_maxdiff(coded.design, coded.best, coded.worst, coded.tuple_index, uids.size)
    iv = intervals.item_intervals(coded, fit.utility, n_boot=30, seed=3)
    shift = fit.utility - scored.default["score_maxdiff"].to_numpy()
    np.testing.assert_array_equal(scored.default["score_ci_low"], iv.score_low)
    np.testing.assert_array_equal(scored.default["score_ci_high"], iv.score_high)
    np.testing.assert_allclose(scored.default["score_maxdiff_ci_low"], iv.maxdiff_low - shift, rtol=0, atol=1e-12)
    np.testing.assert_allclose(scored.default["score_maxdiff_ci_high"], iv.maxdiff_high - shift, rtol=0, atol=1e-12)
    summary = dict(scored.stats["intervals"])
    assert summary.pop("zero_width_score") == int((iv.score_high == iv.score_low).sum())
    bound = scored.default["bound"].to_numpy().astype(str)
    assert summary.pop("zero_width_bound") == int(((iv.score_high == iv.score_low) & (np.char.find(bound, "-always") >= 0)).sum())
    assert summary == iv.summary(30, 3)


def test_coverage_text_names_the_measurement() -> None:
    text = intervals.coverage_text({"coverage_on_simulated_study": intervals.COVERAGE})
    assert "92.9%" in text and "94.5%" in text and "1000 items" in text and "200 resamples, seed 0" in text
    assert intervals.coverage_text({"coverage_on_simulated_study": None}) == ""
