"""`fsb analyse`: the statistics on hand-made inputs with known answers, the numbers on the real release
checked against independent computations, and the command end to end (real PNGs, determinism, bad input)."""

from __future__ import annotations

import json
import math
import re
import struct
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import scipy.stats

import fifty_shades_of_bias as spec
from fsb.analyse import analysis, terms
from fsb.analyse import figures as analysis_figures
from fsb.core.readers import InputError
from tests._support import run_fsb


def fsb(*args: str) -> subprocess.CompletedProcess[str]:
    return run_fsb(*args)


def default_parquet(folder: Path) -> pd.DataFrame:
    (path,) = sorted((folder / "data" / "default").glob("*.parquet"))
    return pq.read_table(path).to_pandas()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    assert data[-8:-4] == b"IEND", f"{path} is truncated"
    return struct.unpack(">II", data[16:24])


# --- tokenizer -----------------------------------------------------------------------------------


def test_tokenizer_rules() -> None:
    text = "She\u2019s so self-absorbed, she doesn't care; the woman's dog (and HIS cat) 42 times!"
    assert terms.phrases(text) == [
        ["she", "so", "self-absorbed"],
        ["she", "doesn't", "care"],
        ["the", "woman", "dog"],
        ["and", "his", "cat"],
        ["42", "times"],
    ]
    assert terms.tokenize("'Men' -- are... fine.") == ["men", "are", "fine"]
    assert terms.ngrams(["a", "b", "c"], 2) == [("a", "b"), ("b", "c")]
    assert terms.ngrams(["a"], 2) == []


def test_term_counts_bigrams_stay_inside_phrases_and_drop_only_all_stopword_grams() -> None:
    stop = frozenset({"the", "of", "are"})
    texts = ["Women are emotional, men of the world.", "women are"]
    assert terms.term_counts(texts, 1, stop) == Counter({"women": 2, "emotional": 1, "men": 1, "world": 1})
    bigrams = terms.term_counts(texts, 2, stop)
    assert bigrams == Counter({"women are": 2, "are emotional": 1, "men of": 1, "the world": 1})  # "of the" dropped
    assert "emotional men" not in bigrams  # the comma ends the phrase
    assert sum(terms.term_counts(texts, 1).values()) == 9  # no stopwords: every word counted


def test_the_project_stopword_list_keeps_pronouns_and_gendered_words() -> None:
    stop = terms.load_stopwords()
    assert {"the", "of", "and", "is"} <= stop
    assert not stop & {"he", "she", "his", "her", "him", "they", "women", "men", "not", "than", "always"}


def test_stopword_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "stop.txt"
    bad.write_text("# comment\nthe\ntwo words\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 3.*not a single word"):
        terms.load_stopwords(bad)


# --- log-odds with a Dirichlet prior ---------------------------------------------------------------


def test_log_odds_matches_the_formula_by_hand() -> None:
    # y_i = (2, 0), y_j = (0, 2), alpha = (1, 1): delta_0 = log(3/1) - log(1/3), var_0 = 1/3 + 1/1.
    delta, var, z = terms.log_odds_dirichlet(np.array([2, 0]), np.array([0, 2]), np.array([1.0, 1.0]))
    assert delta[0] == pytest.approx(2 * math.log(3))
    assert var[0] == pytest.approx(4 / 3)
    assert z[0] == pytest.approx(2 * math.log(3) / math.sqrt(4 / 3))
    assert z[1] == pytest.approx(-z[0])


def test_log_odds_symmetric_inputs_give_zero_and_swapping_negates() -> None:
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 50, size=40).astype(float)
    prior = counts + 1
    delta, _, z = terms.log_odds_dirichlet(counts, counts, prior)
    assert np.all(delta == 0) and np.all(z == 0)
    other = rng.integers(0, 50, size=40).astype(float)
    _, _, z_ij = terms.log_odds_dirichlet(counts, other, prior)
    _, _, z_ji = terms.log_odds_dirichlet(other, counts, prior)
    np.testing.assert_allclose(z_ij, -z_ji)
    with pytest.raises(ValueError, match="positive"):
        terms.log_odds_dirichlet(counts, other, np.zeros(40))


def test_a_word_only_in_one_group_ranks_top_for_it() -> None:
    shared = {"the": 40, "cat": 6, "sat": 6, "mat": 6}
    groups = {
        "low": {**shared, "apple": 8},
        "medium": dict(shared),
        "high": {**shared, "dog": 9, "rare": 2},
    }
    out = terms.distinctive_terms(groups, min_count=3)
    assert out["low"][0]["term"] == "apple"
    assert out["high"][0]["term"] == "dog"
    assert all(t["term"] not in {"apple", "dog"} for t in out["medium"])
    assert all(t["term"] != "rare" for ts in out.values() for t in ts)  # pooled count 2 < min_count
    pooled = Counter()
    for g in groups.values():
        pooled.update(g)
    for name, ranked in out.items():
        assert [t["z"] for t in ranked] == sorted((t["z"] for t in ranked), reverse=True)
        for t in ranked:
            assert t["z"] > 0
            assert t["count"] == groups[name].get(t["term"], 0)
            assert t["count"] + t["count_rest"] == pooled[t["term"]]


def test_identical_groups_have_no_distinctive_terms() -> None:
    same = {"women": 10, "men": 7, "the": 30}
    out = terms.distinctive_terms({"a": same, "b": dict(same)}, min_count=1)
    assert out == {"a": [], "b": []}
    assert terms.distinctive_terms({"a": {}, "b": {}}) == {"a": [], "b": []}


# --- histogram, bins, tables -------------------------------------------------------------------


def test_histogram_edges_are_exact_and_one_is_in_the_last_bin() -> None:
    # 0.3 computed as (1 - 0.4) / 2 lies a hair below 0.3; it still opens [0.3, 0.4).
    on_edge = (1 - 0.4) / 2
    scores = [0.0, 0.05, 0.1, on_edge, 0.3, 0.35, 0.999, 1.0]
    assert analysis.score_histogram(scores) == [2, 1, 0, 3, 0, 0, 0, 0, 0, 2]
    assert sum(analysis.score_histogram(np.linspace(0, 1, 101))) == 101
    with pytest.raises(ValueError):
        analysis.score_histogram([0.5, 1.2])
    with pytest.raises(ValueError):
        analysis.score_histogram([float("nan")])


def test_analysis_bins_follow_the_papers_edges() -> None:
    scores = [0.0, 0.3159, 0.316, 0.5789, 0.579, 1.0]
    assert analysis.analysis_bins(scores).tolist() == [0, 0, 1, 1, 2, 2]
    assert [spec.BIN_NAMES[k] for k in analysis.analysis_bins(scores)] == [spec.analysis_bin(s) for s in scores]


def test_the_release_rounded_scores_bin_exactly() -> None:
    """fifty_shades_of_bias.rounded_bin_codes bins (round(score_raw, 3) + 1) / 2 in integers: it agrees with the
    float binning on all 2001 values the release's 3-decimal file can hold, and an edge opens the bin above."""
    raw = np.arange(-1000, 1001) / 1000
    exact = spec.rounded_bin_codes(raw, spec.ANALYSIS_BIN_EDGES)
    assert exact.tolist() == spec.bin_codes((raw + 1) / 2, spec.ANALYSIS_BIN_EDGES).tolist()
    assert np.bincount(exact).tolist() == [632, 526, 843]  # k in -1000..-369, -368..157, 158..1000
    # -0.368 -> 0.316 and 0.158 -> 0.579 sit on the edges; -0.3689 -> 0.3155 and 0.1574 -> 0.5785 below them
    assert spec.rounded_bin_codes([-0.3689, -0.368, 0.1574, 0.158, 1.0], spec.ANALYSIS_BIN_EDGES).tolist() == [0, 1, 1, 2, 2]


def test_crosstab_counts_add_up_and_chi_square_matches_scipy() -> None:
    rows = ["a", "a", "b", "b", "b", "c", "a", "c", "c", "c"]
    cols = ["x", "y", "x", "x", "y", "y", "y", "x", "y", "y"]
    t = analysis.crosstab(rows, cols, ["a", "b", "c", "unused"], ["x", "y"])
    assert t.tolist() == [[1, 2], [2, 1], [1, 3], [0, 0]]
    assert t.sum() == len(rows)
    ours = analysis.chi_square_independence(t)
    ref = scipy.stats.chi2_contingency(t[:3], correction=False)
    assert ours["chi2"] == pytest.approx(ref.statistic)
    assert ours["p"] == pytest.approx(ref.pvalue)
    assert ours["dof"] == ref.dof == 2
    assert ours["cramers_v"] == pytest.approx(scipy.stats.contingency.association(t[:3], method="cramer"))
    with pytest.raises(ValueError, match="not among the levels"):
        analysis.crosstab(["a"], ["z"], ["a"], ["x"])


def test_by_bin_figure_titles_carry_the_p_value() -> None:
    t = analysis.crosstab(
        ["a", "a", "b", "b", "b", "c", "a", "c", "c", "c"], ["x", "y", "x", "x", "y", "y", "y", "x", "y", "y"], ["a", "b", "c"], ["x", "y"]
    )
    test = analysis.chi_square_independence(t)
    title = analysis_figures.by_bin_title({"test": test}, "seed type")
    assert f"p = {test['p']:.2g}" in title and "chi2 = " in title and "dof 2" in title and "Cramér's V" in title
    assert analysis_figures.format_p(3.4e-8) == "p = 3.4e-08"
    assert analysis_figures.format_p(0.0) == "p < 1e-300" and analysis_figures.format_p(0.0123) == "p = 0.012"


def test_score_summary() -> None:
    s = analysis.score_summary([0.1, 0.2, 0.3, 0.4])
    assert s["n"] == 4
    assert s["mean"] == pytest.approx(0.25)
    assert s["sd"] == pytest.approx(np.std([0.1, 0.2, 0.3, 0.4], ddof=1))
    assert (s["min"], s["median"], s["max"]) == pytest.approx((0.1, 0.25, 0.4))
    assert analysis.score_summary([]) == {"n": 0}


# --- the real release ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def release_result(release_dataset: Path) -> tuple[analysis.Sentences, dict]:
    sentences = analysis.read_sentences(release_dataset)
    return sentences, analysis.analyse(sentences)


def test_release_histogram_equals_an_exact_integer_count(release_dataset: Path, release_result: tuple) -> None:
    _, result = release_result
    table = default_parquet(release_dataset)
    n, best, worst = (table[c].to_numpy(dtype=np.int64) for c in ("n_judgments", "n_best", "n_worst"))
    # score = (n + best - worst) / 2n exactly, so its tenth is floor(10 (n + best - worst) / 2n) in integers.
    exact = np.bincount(np.minimum(5 * (n + best - worst) // n, 9), minlength=10).tolist()
    assert result["histogram"]["counts"] == exact
    assert sum(exact) == result["n_sentences"] == 1000
    assert result["histogram"]["edges"] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    # The build bins the integers (exact_bin_codes), the analysis the float scores (bin_codes): they agree.
    stats = json.loads((release_dataset / "stats.json").read_text(encoding="utf-8"))
    assert stats["histogram"]["counts"] == exact


def test_release_tables_match_the_parquet_and_stats_json(release_dataset: Path, release_result: tuple) -> None:
    _, result = release_result
    table = default_parquet(release_dataset)
    stats = json.loads((release_dataset / "stats.json").read_text(encoding="utf-8"))
    assert result["bins"]["counts"] == stats["bins"]["counts"]
    assert result["checks"]["bin_column_agrees"] is True
    assert result["checks"]["stats_json_bins_agree"] is True
    for column in ("seed_type", "prompt_type"):
        t = result[f"{column}_by_bin"]
        assert t["row_totals"] == {k: v for k, v in stats[column].items() if v}
        assert t["bin_totals"] == stats["bins"]["counts"]
        reference = pd.crosstab(table[column], table["bin"])
        for level in t["levels"]:
            for b in spec.BIN_NAMES:
                assert t["counts"][level][b] == reference.loc[level, b]
    assert result["seed_type_by_bin"]["levels"] == list(spec.SEED_TYPES)
    assert result["prompt_type_by_bin"]["absent_levels"] == ["conversation"]
    compared = {row["what"].split(" (")[0]: row["counts"] for row in result["bins"]["compared"]}
    assert compared["the paper"] == {"low": 364, "medium": 248, "high": 388}
    assert compared["the release's scores"] == stats["bins"]["counts_from_rounded_scores"]


def test_release_distinctive_words(release_dataset: Path, release_result: tuple) -> None:
    _, result = release_result
    table = default_parquet(release_dataset)
    d = result["distinctive"]
    assert d["unigrams"]["high"][0]["term"] == "women"
    stop = terms.load_stopwords()
    for label in ("unigrams", "bigrams"):
        for b in spec.BIN_NAMES:
            in_bin = table.loc[table["bin"] == b, "text"]
            assert 0 < len(d[label][b]) <= 15
            for t in d[label][b]:
                assert t["count"] == occurrences(in_bin, t["term"])
                assert t["count"] + t["count_rest"] == occurrences(table["text"], t["term"]) >= 5
                assert not all(w in stop for w in t["term"].split())


def occurrences(texts: pd.Series, term: str) -> int:
    """How often `term` occurs in `texts`, counted by one regular expression over the raw text (not by the
    tokenizer): each word bounded by anything but a letter, digit, apostrophe or hyphen, optionally followed
    by a possessive 's, the words separated by spaces only (punctuation ends a phrase); overlaps counted."""
    words = r"\s+".join(re.escape(w) + r"(?:['\u2019]s)?" for w in term.split())
    pattern = re.compile(rf"(?=(?<![\w'\u2019-]){words}(?![\w'\u2019-]))")
    return sum(len(pattern.findall(text.lower())) for text in texts)


def test_hub_path_maps_class_labels_to_names(release_dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hub repo goes through `fifty_shades_of_bias.load` (datasets; ClassLabel columns come back as ints)."""
    import datasets

    monkeypatch.setattr(spec, "locate", lambda source=None: "org/fifty_shades_of_bias")
    monkeypatch.setattr(spec, "load", lambda config, source=None: datasets.load_dataset(str(release_dataset), config))
    via_hub = analysis.read_sentences("org/fifty_shades_of_bias")
    assert via_hub.source == "org/fifty_shades_of_bias" and via_hub.stats is None
    table = default_parquet(release_dataset)
    for column in ("seed_type", "prompt_type", "bin"):
        assert via_hub.frame[column].tolist() == table[column].tolist()
    ours = analysis.analyse(via_hub)
    theirs = analysis.analyse(analysis.read_sentences(release_dataset))
    for key in ("histogram", "bins", "seed_type_by_bin", "prompt_type_by_bin", "distinctive"):
        assert ours[key] == theirs[key]


def test_not_a_dataset_is_a_located_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such dataset folder"):
        analysis.read_sentences(tmp_path / "missing")
    (tmp_path / "README.md").write_text("just prose\n", encoding="utf-8")
    with pytest.raises(InputError, match="no YAML block"):
        analysis.read_sentences(tmp_path)
    (tmp_path / "README.md").write_text("---\nconfigs:\n- config_name: other\n---\n", encoding="utf-8")
    with pytest.raises(InputError, match="no 'default' config"):
        analysis.read_sentences(tmp_path)


def test_console_words_show_z_and_leave_out_those_below_the_mark() -> None:
    """Bug: `fsb main`/`fsb analyse` printed a bin's top 5 words without z, some with z < 1.96; report.md
    gives z. Now each word has its z, the ones at or below 1.96 are counted, not shown, and the line says so."""
    terms = [{"term": w, "z": z} for w, z in (("crashed", 2.49), ("no", 1.9), ("skin", 1.8), ("impress", 1.7), ("washed", 1.6))]
    line = analysis.marking_line("medium", terms)
    rule = "of the top 5 by z, those with z > 1.96, the uncorrected two-sided 5% mark of report.md"
    assert line == f"words marking the medium bin ({rule}): crashed (z 2.49); 4 more below 1.96 not shown"
    assert analysis.marking_line("low", terms[1:]).endswith("): none of the 4 has z > 1.96")
    assert analysis.marking_line("high", []).endswith("): (no term ranked)")
    assert analysis.marking_line("x", [{"term": "a", "z": 3.0}] * 7).count("(z 3.00)") == 5


def test_bin_maxima_print_below_the_open_upper_edge() -> None:
    """Bug: the report showed the low bin [0, 0.316) with max 0.316 (0.31579 rounded)."""
    assert analysis.format_below(0.3157894736842105, 0.316) == "0.3158"
    assert analysis.format_below(0.31599999, 0.316) == "0.31599999"
    assert analysis.format_below(0.2, 0.316) == "0.200" and analysis.format_below(1.0, None) == "1.000"
    assert float(analysis.format_below(0.5789999999, 0.579)) < 0.579


# --- the command ---------------------------------------------------------------------------------


def test_fsb_analyse_end_to_end_is_deterministic(release_dataset: Path, tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        proc = fsb("analyse", str(release_dataset), "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        assert "analysed 1000 sentences" in proc.stdout
        assert "words marking the high bin (of the top 5 by z, those with z > 1.96, the uncorrected two-sided 5% mark" in proc.stdout
        assert "report.md): women (z 4.60), " in proc.stdout and "words marking the medium bin" in proc.stdout
        runs.append(out)
    a, b = runs
    assert sorted(p.name for p in a.iterdir()) == sorted([*analysis.FIGURES, "analysis.json", "report.md", ".fsb-seal.json"])
    for name, size in analysis.FIGURES.items():
        assert png_size(a / name) == size
        assert (a / name).read_bytes() == (b / name).read_bytes(), f"{name} differs between two runs"
        assert b"Software" not in (a / name).read_bytes()
    for name in ("analysis.json", "report.md"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), f"{name} differs between two runs"
    report = (a / "report.md").read_text(encoding="utf-8")
    result = json.loads((a / "analysis.json").read_text(encoding="utf-8"))
    assert "| seed type | low | medium | high | total |" in report
    assert "| the paper (Hada et al. 2023), from its 5285 judgments | 364 | 248 | 388 | 1000 |" in report
    assert "| [0.9, 1.0] | " in report and "### Unigrams marking the high bin" in report
    # each bin's max prints below the bin's open upper edge (the low bin's 0.31579 is not "0.316")
    assert "| low | 255 | 0.219 | 0.061 | 0.023 | 0.3158 |" in report
    for line in proc.stdout.splitlines():  # the console's words are the report's, with their z, none below 1.96
        if "words marking the " in line and "): " in line:
            b = line.split("words marking the ")[1].split()[0]
            for term, z in re.findall(r"(\S+) \(z (\d+\.\d\d)\)", line.split("): ", 1)[1]):
                assert float(z) > 1.96 and f"| `{term}` | {z} |" in report.split(f"### Unigrams marking the {b} bin")[1]
    assert "| 1 | `women` |" in report
    for name in analysis.FIGURES:
        assert f"]({name})" in report
    assert result["n_sentences"] == 1000 and sum(result["histogram"]["counts"]) == 1000
    # An earlier analysis is replaced in place; a folder of other files is not.
    assert fsb("analyse", str(release_dataset), "--out", str(a), "--top", "3").returncode == 0
    assert len(json.loads((a / "analysis.json").read_text(encoding="utf-8"))["distinctive"]["unigrams"]["low"]) == 3


def test_fsb_analyse_bad_input_is_one_line_and_writes_nothing(release_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for args, message in (
        ([str(tmp_path / "nowhere")], "no such dataset folder"),
        ([str(tmp_path)], "holds no README.md dataset card"),
    ):
        proc = fsb("analyse", *args, "--out", str(out))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("fsb analyse: error:") and message in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert not out.exists()
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine\n", encoding="utf-8")
    proc = fsb("analyse", str(release_dataset), "--out", str(keep))
    assert proc.returncode == 2 and "refusing to replace it" in proc.stderr
    assert [p.name for p in keep.iterdir()] == ["notes.txt"]
