"""`build_study`: any best-worst study (judgments, optional items and study files) becomes a dataset folder
that `datasets.load_dataset` reads (both configs), with per-item intervals and annotators kept private."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from fsb.annotate.study import DEFAULT, form_wording, labeling_config, read_study
from fsb.core.errors import FsbError
from fsb.core.readers import InputError
from fsb.data import annotators
from fsb.data.dataset import build_dataset, is_build_folder
from fsb.data.intervals import COVERAGE, measure_coverage
from fsb.data.study_build import build_study
from tests._support import make_raw
from tests.data.study_fixture import EMAIL, PHONE, make_study, published_text, write_csv


def table(out: Path, config: str) -> pd.DataFrame:
    (path,) = sorted((out / "data" / config).glob("*.parquet"))
    return pq.read_table(path).to_pandas()


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_study(tmp_path_factory.mktemp("study"))


@pytest.fixture(scope="module")
def built(study: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built") / "offensiveness"
    return build_study(study["judgments"], out, items=study["items"], study=study["study"], invalid="count").out


def test_string_ids_stay_strings_and_both_configs_load(built: Path, study: dict[str, Path]) -> None:
    ds = datasets.load_dataset(str(built))["test"]
    ann = datasets.load_dataset(str(built), "annotations")["test"]
    items = pd.read_csv(study["items"], dtype=str)
    assert ds.features["id"].dtype == "string" and ann.features["best"].dtype == "string"
    assert sorted(ds["id"]) == sorted(items["id"]) and all(i.startswith("c") for i in ds["id"])
    assert ann.num_rows == len(pd.read_csv(study["judgments"]))  # the two control rows counted (--invalid count)
    # the further columns are kept and typed from their cells
    assert ds.features["length"].dtype == "int64" and ds.features["toxicity"].dtype == "float64"
    assert ds.features["subreddit"].dtype == "string"
    row = dict(zip(ds["id"], ds["text"]))
    assert all(row[i] == f"comment {i}, with a comma" for i in items["id"])
    frame = ds.to_pandas()
    np.testing.assert_allclose(frame["score_raw"], (frame["n_best"] - frame["n_worst"]) / frame["n_judgments"])


def test_every_item_has_both_intervals_around_its_score(built: Path) -> None:
    frame = table(built, "default")
    assert frame[["score_ci_low", "score_ci_high", "score_maxdiff_ci_low", "score_maxdiff_ci_high"]].notna().all().all()
    assert (frame["score_ci_low"] <= frame["score"] + 1e-6).all() and (frame["score"] <= frame["score_ci_high"] + 1e-6).all()
    assert (frame["score_ci_high"] - frame["score_ci_low"] > 0).all()
    assert (frame["score_maxdiff_ci_high"] > frame["score_maxdiff_ci_low"]).all()
    stats = json.loads((built / "stats.json").read_text())
    iv = stats["intervals"]
    assert iv["seed"] == 0 and iv["resamples"] == 200 and iv["null"] == {"score": 0, "score_maxdiff": 0}
    card = (built / "README.md").read_text()
    assert f"{COVERAGE['score']:.1%}" in card and f"{COVERAGE['score_maxdiff']:.1%}" in card
    assert "200\nresamples, seed 0" in card


def test_an_item_without_an_interval_gets_null_and_the_reason_is_counted(tmp_path: Path) -> None:
    paths = make_study(tmp_path / "raw", n=16, control_rows=False)
    rows = pd.read_csv(paths["judgments"], dtype=str)
    lonely = ["zz1", "zz2", "zz3", rows.loc[0, "Item1"]]  # three items shown in one tuple only
    extra = pd.DataFrame([[*lonely, "zz1", "zz2", "w3"]], columns=rows.columns)
    pd.concat([rows, extra]).to_csv(paths["judgments"], index=False)
    out = build_study(paths["judgments"], tmp_path / "out").out
    frame = table(out, "default").set_index("id")
    assert frame.loc[["zz1", "zz2", "zz3"], "score_ci_low"].isna().all()
    assert frame.drop(index=["zz1", "zz2", "zz3"])["score_ci_low"].notna().all()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["intervals"]["null"]["score"] == 3
    card = (out / "README.md").read_text()
    assert "Items without an interval: 3 for `score`" in card
    assert "no interval for 3 items shown in only one tuple" in card


def test_without_an_items_file_there_is_no_text_column_and_integer_ids_stay_integers(tmp_path: Path) -> None:
    _, annotations = make_raw(tmp_path / "raw", n=12)
    out = build_study(annotations, tmp_path / "out").out
    ds = datasets.load_dataset(str(out))["test"]
    assert "text" not in ds.column_names and ds.features["id"].dtype == "int64"
    assert sorted(ds["id"]) == list(range(1, 13))
    ann = datasets.load_dataset(str(out), "annotations")["test"]
    assert ann.features["items"].feature.dtype == "int64"
    assert "no annotator ids" in (out / "README.md").read_text()


def test_a_rebuild_is_seen_by_load_dataset(tmp_path: Path) -> None:
    """datasets caches a local folder by its card's YAML: content-named data files make a rebuild visible."""
    out = tmp_path / "same-name"
    first = make_study(tmp_path / "a", n=16, seed=0, control_rows=False)
    build_study(first["judgments"], out, items=first["items"])
    assert datasets.load_dataset(str(out))["test"].num_rows == 16
    second = make_study(tmp_path / "b", n=20, seed=1, control_rows=False)
    build_study(second["judgments"], out, items=second["items"])
    again = datasets.load_dataset(str(out))["test"]
    assert again.num_rows == 20 and sorted(again["id"]) == sorted(pd.read_csv(second["items"], dtype=str)["id"])


def test_card_is_worded_from_the_study_file(built: Path) -> None:
    card = (built / "README.md").read_text()
    assert card.startswith("---\npretty_name: Offensiveness of comments (simulated)\n")
    assert "license: cc-by-4.0" in card and "@misc{sim2026" in card
    assert 'asked "Which comment is the MOST offensive, and which the LEAST?"' in card
    assert '| `best` | string | the id chosen "Most offensive" |' in card
    assert "gender" not in card.lower(), "FSB's wording leaked into another study's card"
    assert is_build_folder(built)


def test_study_wording_for_forms_and_label_studio(study: dict[str, Path]) -> None:
    s = read_study(study["study"])
    assert form_wording(s) == {
        "question": s.question,
        "best": "Most offensive",
        "worst": "Least offensive",
        "high_means": s.high_means,
    }
    config = labeling_config(4, s)
    assert 'value="Which comment is the MOST offensive, and which the LEAST?"' in config
    assert 'value="Most offensive"' in config and 'value="Least offensive"' in config
    assert 'name="best"' in config and 'name="worst"' in config and "biased" not in config
    assert read_study(None) == DEFAULT and "biased" in labeling_config(4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("question: [1, 2]\n", "question must be a plain string"),
        ("colour: red\n", "unknown key 'colour'"),
        ("- a\n- b\n", "a study file is a mapping"),
        ("license: Not A Licence\n", "license must be a Hub licence id"),
        ('best_label: "two\\nlines"\n', "control character"),
        ("question: &a x\nbest_label: *a\nworst_label: [\n", "not valid YAML"),
        ("language: [english]\n", "language must be a language code"),
    ],
)
def test_bad_study_files_are_refused_with_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message) as e:
        read_study(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_items_file_problems_are_refused_naming_line_and_column(tmp_path: Path, study: dict[str, Path]) -> None:
    items = pd.read_csv(study["items"], dtype=str)
    cases = {
        "missing id column": (items.rename(columns={"id": "key"}), "needs an `id` column"),
        "repeated id": (pd.concat([items, items.iloc[[3]]]), "repeats line 5"),
        "reserved column": (items.assign(score="1"), "column 'score' is one the build computes"),
        "unjudged item": (pd.concat([items, items.iloc[[0]].assign(id="never")]), "no judgment covers the item with id 'never'"),
        "unknown judged id": (items.iloc[1:], "no such id in the items file"),
    }
    for name, (frame, message) in cases.items():
        path = tmp_path / f"{name}.csv"
        frame.to_csv(path, index=False)
        with pytest.raises(InputError, match=message):
            build_study(study["judgments"], tmp_path / "out", items=path, invalid="count")
        assert not (tmp_path / "out").exists(), f"{name}: a refused build wrote its folder"


def test_control_rows_are_refused_by_default(study: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--invalid"):
        build_study(study["judgments"], tmp_path / "out", items=study["items"])


# --- annotators: agreement published, identities never -------------------------------------------


def test_email_and_phone_never_reach_the_published_files_whatever_the_flags(study: dict[str, Path], tmp_path: Path) -> None:
    for keep in (False, True):
        out = build_study(study["judgments"], tmp_path / f"out-{keep}", items=study["items"], invalid="count", keep_annotator_ids=keep).out
        text = published_text(out)
        assert EMAIL not in text and "example.com" not in text and PHONE not in text
        assert not re.search(r"(?<![\d.])7946(?!\d)", text), "no part of the phone number (a float's digits are no leak)"
        stats = json.loads((out / "stats.json").read_text())
        assert stats["annotators"]["published_as"]["personal_values"] == {"e-mail": 1, "phone": 1}
        published = set(table(out, "annotations")["annotator"])
        assert len(published) == 5, "distinct annotators stay distinct"
        if keep:  # other ids kept as given, explicitly
            assert {"worker1", "w3", "w4"} <= published and "--keep-annotator-ids" in (out / "README.md").read_text()
        else:
            assert all(a.startswith(annotators.PREFIX) for a in published) and "worker1" not in text
            assert "keyed-hash pseudonyms" in (out / "README.md").read_text()


def test_the_fsb_build_never_publishes_an_email_address(tmp_path: Path) -> None:
    """Before: `fsb build` from answers whose annotator column holds worker2@example.com published the address
    and the card called it pseudonymous. Now every id is a keyed-hash pseudonym, agreement is published."""
    g, a = make_raw(tmp_path / "raw", n=16)
    rows = pd.read_csv(a)
    rows["Annotator"] = [("worker1", EMAIL, "worker3")[i % 3] for i in range(len(rows))]
    rows.to_csv(a, index=False)
    for keep in (False, True):
        out = build_dataset(g, a, tmp_path / f"fsb-{keep}", record=False, keep_annotator_ids=keep).out
        assert EMAIL not in published_text(out)
        stats = json.loads((out / "stats.json").read_text())
        agreement = stats["annotators"]["agreement"]
        assert len(agreement) == 3 and all(r["judgments"] > 0 and 0 <= r["agreement"] <= 1 for r in agreement)
        assert {r["annotator"] for r in agreement} == set(table(out, "annotations")["annotator"])
        assert "leave-one-out majority" in (out / "README.md").read_text()


def test_pseudonyms_are_stable_across_rebuilds_and_the_key_is_created_once(tmp_path: Path, study: dict[str, Path]) -> None:
    home = Path(os.environ["FSB_HOME"])
    first = build_study(study["judgments"], tmp_path / "one", items=study["items"], invalid="count").out
    key_file = home / annotators.KEY_FILE
    key = key_file.read_bytes()
    assert len(key) == 32 and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    second = build_study(study["judgments"], tmp_path / "two", items=study["items"], invalid="count", seed=3).out
    assert key_file.read_bytes() == key, "the key is created once, never replaced"
    assert table(first, "annotations")["annotator"].tolist() == table(second, "annotations")["annotator"].tolist()
    assert key.hex() not in published_text(first) and str(key_file) not in published_text(first)
    expected = annotators.pseudonym("worker1", key)
    assert expected in set(table(first, "annotations")["annotator"])


def test_personal_kind_tells_contact_details_from_worker_ids() -> None:
    for value, kind in [
        (EMAIL, "e-mail"),
        ("mailto:someone@uni.edu", "e-mail"),
        (PHONE, "phone"),
        ("(555) 123-4567", "phone"),
        ("4915112345678", "phone"),
        ("https://example.org/u/7", "url"),
        ("www.example.org", "url"),
        ("example.com/worker", "url"),
    ]:
        assert annotators.personal_kind(value) == kind, value
    for value in ("worker1", "A2X9QW", "12345", "w-3", "annotator 7", "worker_000042"):
        assert annotators.personal_kind(value) is None, value


def test_fsb_errors_only_for_a_bad_key_file(tmp_path: Path) -> None:
    (tmp_path / annotators.KEY_FILE).write_bytes(b"short")
    with pytest.raises(FsbError, match="must be 32 bytes"):
        annotators.annotator_key(tmp_path)


# --- interval coverage -----------------------------------------------------------------------------


@pytest.mark.slow
def test_coverage_on_a_simulated_study_is_what_the_card_reports() -> None:
    measured = measure_coverage()
    assert measured == COVERAGE
    assert 0.9 <= measured["score"] <= 0.99 and 0.9 <= measured["score_maxdiff"] <= 0.99


def test_coverage_of_a_wrong_interval_is_caught() -> None:
    """The measurement can fail: intervals a tenth as wide must cover far less than 95%."""
    import fsb.data.intervals as iv

    small = iv.measure_coverage(n_items=200, n_boot=50)
    assert small["score"] > 0.85 and small["score_maxdiff"] > 0.85
    rng = np.random.default_rng(0)
    truth = rng.normal(0, 1, 200)
    from fsb import bws

    design = bws.bws_design(200, seed=0)
    expected = iv.expected_counting_score(design, truth, np.full(design.shape[0], 3))
    ti, best, worst = iv.simulate_judgments(design, truth, 300, seed=1)
    counts = bws.count_best_worst(design, best, worst, n_items=200, tuple_index=ti)
    np.testing.assert_allclose(counts.score, expected, atol=0.02)  # the exact expectation is what counting converges to


def test_write_csv_helper_round_trips(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "x.csv", ["id", "text"], [["a", "b, c"]])
    assert pd.read_csv(path).to_dict("records") == [{"id": "a", "text": "b, c"}]


def test_summary_lines_say_what_each_figure_is(built: Path) -> None:
    from fsb.data.study_build import summary_lines

    stats = json.loads((built / "stats.json").read_text())
    text = "\n".join(summary_lines(stats))
    assert f"{stats['n_items']} items" in text and "no Spearman-Brown" in text
    assert "bootstrap over tuples, 200 resamples, seed 0" in text and f"{COVERAGE['score']:.1%}" in text
    assert "keyed-hash pseudonyms" in text and "1 e-mail, 1 phone" in text and EMAIL not in text


def test_instructions_are_worded_from_the_study(study: dict[str, Path]) -> None:
    from fsb.annotate.study import instructions

    text = instructions(read_study(study["study"]))
    assert text.startswith("Which comment is the MOST offensive") and "'Most offensive'" in text and "biased" not in text


def test_the_bound_column_and_the_card_count_the_scores_that_are_bounds(tmp_path: Path) -> None:
    """Issue 30, section 3: an item chosen best in every judgment, one chosen worst in every judgment, and a part of
    the design linked to nothing else: the `bound` column says so per item, stats.json and the card count them."""
    rows = ["a,b,c,d,a,d", "a,b,c,e,a,c", "b,c,d,e,b,d", "a,c,d,e,a,d", "b,c,e,a,a,c", "f,g,h,i,g,h", "f,g,h,i,h,g"]
    judgments = tmp_path / "j.csv"
    judgments.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n" + "\n".join(rows) + "\n")
    out = build_study(judgments, tmp_path / "ds", trials=2, n_boot=39).out
    frame = table(out, "default").set_index("id")
    assert frame["bound"].to_dict() == {
        "a": "best-always",
        "b": "",
        "c": "",
        "d": "worst-always",
        "e": "",
        "f": "disconnected",
        "g": "disconnected",
        "h": "disconnected",
        "i": "disconnected",  # f..i beat each other round (g over h, h over g): one group, no side bound
    }
    stats = json.loads((out / "stats.json").read_text())
    assert stats["bounds"] == {"total": 6, "best-always": 1, "worst-always": 1, "disconnected": 4}
    card = (out / "README.md").read_text()
    assert "6 items are not estimates: 1 best-always, 1 worst-always, 4 disconnected (the `bound` column" in card
    assert datasets.load_dataset(str(out))["test"].features["bound"].dtype == "string"
    # review M5: the study card names counting intervals of width 0 as the FSB card does, agreeing with the column
    width = frame["score_ci_high"] - frame["score_ci_low"]
    zero, zero_bound = int((width == 0).sum()), int(((width == 0) & frame["bound"].str.contains("-always")).sum())
    assert (stats["intervals"]["zero_width_score"], stats["intervals"]["zero_width_bound"]) == (zero, zero_bound) and zero_bound >= 1
    assert (
        f"{zero} items have a counting interval of width 0" in " ".join(card.split())
        if zero > 1
        else "1 item has a counting interval" in card
    )
    from fsb.data.study_build import summary_lines

    assert "  6 items are not estimates: 1 best-always, 1 worst-always, 4 disconnected (their bound column)" in summary_lines(stats)


def test_a_card_without_bounds_says_every_score_is_an_estimate(built: Path) -> None:
    assert json.loads((built / "stats.json").read_text())["bounds"] == {"total": 0}
    assert (table(built, "default")["bound"] == "").all()
    assert "Every item's scores are estimates" in (built / "README.md").read_text()
