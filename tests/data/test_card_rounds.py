"""Rounds, extended designs and one scale across versions: `fsb build --rounds`, `fsb tuples --extend`,
`score_maxdiff`, `fsb build --previous`, and `fsb generate --first-uid`'s plan, on simulated studies
with a known truth (judgments drawn from the best-worst logit itself, tests/_support.simulate_bws)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy.stats import spearmanr

from fsb import bws, engine
from fsb.annotate.forms import read_design
from fsb.bws.extend import extend_design, read_existing
from fsb.core.readers import InputError
from fsb.data.dataset import build_dataset, read_rounds
from fsb.generate.generations import build_generation_plan
from fsb.generate.prompts import load_prompt_set
from fsb.generate.seeds import read_seeds
from tests._support import run_fsb, simulate_bws, write_csv

JUDGMENT_HEADER = ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"]


def fsb(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_fsb(*args, cwd=cwd)


def generations_file(path: Path, uids: np.ndarray) -> Path:
    rows = [
        [u, ("conversion", "completion")[u % 2], ("explicit", "implicit", "neutral", "random")[u % 4], f"seed {u}", f"sentence {u}"]
        for u in uids
    ]
    return write_csv(path, ["uid", "prompt_type", "seed_type", "query", "response"], rows)


def judgments_file(path: Path, design: np.ndarray, truth: dict[int, float], per_tuple: int, seed: int, annotators: int) -> Path:
    """Judgments of the tuples `design` (labels) drawn from the logit with utilities `truth`, by a pool of annotators."""
    labels = np.unique(design)
    codes = np.searchsorted(labels, design)
    ti, best, worst = simulate_bws(codes, np.array([truth[v] for v in labels.tolist()]), per_tuple, seed=seed)
    rows = [
        [*design[t].tolist(), int(labels[b]), int(labels[w]), f"a{j % annotators + 1}"] for j, (t, b, w) in enumerate(zip(ti, best, worst))
    ]
    return write_csv(path, [*JUDGMENT_HEADER, "Annotator"], rows)


def default_frame(folder: Path) -> pd.DataFrame:
    (path,) = sorted((folder / "data" / "default").glob("*.parquet"))
    return pq.read_table(path).to_pandas().set_index("id")


def simulate_two_rounds(root: Path, m: int, n: int, shift: float, seed: int = 1) -> dict[str, Any]:
    """Round 1: m sentences in a 2m-tuple design judged 3 times; round 2: n new sentences (their truth shifted
    by `shift` logits: a more biased batch) in an extension of round 1's design, judged 3 times."""
    rng = np.random.default_rng(seed)
    old, new = np.arange(1, m + 1), np.arange(m + 1, m + n + 1)
    truth = dict(zip(old.tolist(), rng.normal(0, 1.5, m).tolist())) | dict(zip(new.tolist(), rng.normal(shift, 1.5, n).tolist()))
    root.mkdir(parents=True, exist_ok=True)
    (root / "round1").mkdir()
    g1 = generations_file(root / "round1" / "generations.csv", old)
    a1 = judgments_file(root / "round1" / "judgments.csv", bws.bws_design(m, seed=seed) + 1, truth, 3, seed, annotators=5)
    (root / "round2").mkdir()
    g2 = generations_file(root / "round2" / "generations.csv", new)
    proc = fsb("tuples", g2, "--extend", a1, "--out", root / "round2" / "design.csv", "--seed", seed)
    assert proc.returncode == 0, proc.stderr
    design2 = read_design(root / "round2" / "design.csv").drop(columns="tuple_id").to_numpy()
    a2 = judgments_file(root / "round2" / "judgments.csv", design2, truth, 3, seed + 1, annotators=4)
    manifest = root / "rounds.yaml"
    manifest.write_text(
        "rounds:\n"
        "  - {round: 1, name: first, generations: round1/generations.csv, annotations: round1/judgments.csv}\n"
        "  - {round: 2, name: second, generations: round2/generations.csv, annotations: round2/judgments.csv}\n",
        encoding="utf-8",
    )
    return {
        "old": old,
        "new": new,
        "truth": pd.Series(truth),
        "g1": g1,
        "a1": a1,
        "g2": g2,
        "a2": a2,
        "manifest": manifest,
        "check": json.loads(proc.stdout),
        "design2": design2,
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """v1 = round 1 built the plain way; v2 = both rounds from the manifest, with v1 as --previous."""
    root = tmp_path_factory.mktemp("rounds")
    s = simulate_two_rounds(root / "sim", m=400, n=120, shift=1.0)
    s["v1"] = build_dataset(s["g1"], s["a1"], root / "v1", record=False).out
    proc = fsb("build", "--rounds", s["manifest"], "--out", root / "v2", "--no-record", "--previous", s["v1"], "--previous-label", "v1.0.0")
    assert proc.returncode == 0, proc.stderr
    s["v2"], s["build_stdout"] = root / "v2", proc.stdout
    return s


def test_extension_check_printed_and_recomputed_from_the_file(study: dict[str, Any]) -> None:
    check, design2, old, new = study["check"], study["design2"], study["old"], study["new"]
    existing = read_existing(study["a1"])
    # recomputed here from the written file and the round-1 judgments, by other means than fsb.bws.extend
    assert check["new_tuples"] == design2.shape[0] == -(-120 * 8 // 3)
    assert pd.Series(design2[np.isin(design2, new)]).value_counts().eq(8).all() and set(design2.ravel()) >= set(new.tolist())
    olds_per_tuple = np.isin(design2, old).sum(axis=1)
    assert olds_per_tuple.min() >= 1 and olds_per_tuple.max() <= 2
    assert check["tuples_without_existing_item"] == 0 and check["existing_items_per_new_tuple_min"] == 1
    load = pd.Series(design2[np.isin(design2, old)]).value_counts().reindex(old, fill_value=0)
    assert load.max() - load.min() <= 1 and check["existing_extra_load_max"] - check["existing_extra_load_min"] <= 1
    all_tuples = [frozenset(r) for r in np.vstack([existing.tuples, design2]).tolist()]
    n_old = existing.tuples.shape[0]
    shared = max(len(a & b) for i, a in enumerate(all_tuples[n_old:]) for b in all_tuples[: n_old + i])
    assert shared <= 2 and check["max_shared_items"] == shared
    # the anchors spread over the existing counting scores: their quartiles sit near the existing quartiles
    ex_q, an_q = np.array(check["existing_score_quantiles"]), np.array(check["anchor_score_quantiles"])
    assert np.abs(ex_q[1:4] - an_q[1:4]).max() < 0.05
    score = dict(zip(existing.labels.tolist(), existing.scores.tolist()))
    anchor_scores = [score[v] for v in design2[np.isin(design2, old)].tolist()]
    assert min(anchor_scores) <= np.quantile(existing.scores, 0.05) and max(anchor_scores) >= np.quantile(existing.scores, 0.95)
    assert check["positions"]["items_spread_max"] <= 1
    first = read_design(study["g2"].parent / "design.csv")["tuple_id"]
    assert first.iloc[0] == existing.tuples.shape[0] == check["first_tuple_id"]


def test_extension_is_seeded_and_spreads_by_id_order_without_judgments(tmp_path: Path) -> None:
    design = write_csv(
        tmp_path / "design.csv",
        ["tuple_id", "Item1", "Item2", "Item3", "Item4"],
        [[t, *row] for t, row in enumerate((bws.bws_design(30, seed=0) + 1).tolist())],
    )
    new = tmp_path / "new.txt"
    new.write_text("\n".join(str(i) for i in range(31, 41)) + "\n", encoding="utf-8")
    runs = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        proc = fsb("tuples", new, "--extend", design, "--out", tmp_path / f"{name}.csv", "--seed", seed, "--k", 6)
        assert proc.returncode == 0, proc.stderr
        runs.append(((tmp_path / f"{name}.csv").read_text(), json.loads(proc.stdout)))
    assert runs[0][0] == runs[1][0] and runs[0][0] != runs[2][0]
    check = runs[0][1]
    assert check["new_item_appearances_min"] == check["new_item_appearances_max"] == 6 and check["new_tuples"] == 20
    assert check["anchor_spread"].startswith("id order") and check["first_tuple_id"] == 60
    assert check["anchor_id_rank_quantiles"][0] < 0.1 and check["anchor_id_rank_quantiles"][-1] > 0.9
    # a new id that is already an existing item is refused, naming the line
    new.write_text("31\n7\n", encoding="utf-8")
    proc = fsb("tuples", new, "--extend", design, "--out", tmp_path / "d.csv")
    assert proc.returncode == 2 and "line 2" in proc.stderr and "id 7 is already an item" in proc.stderr
    assert not (tmp_path / "d.csv").exists()


def test_extension_position_balance_is_over_the_items_of_the_new_tuples(tmp_path: Path) -> None:
    """Bug: the check averaged position balance over every existing item (0.0423 a position over the
    release's 1016 items when 60 are in the new tuples). Now it is over the items the new tuples show,
    labelled, with the new items alone beside it; recomputed here from the written file."""
    design = write_csv(
        tmp_path / "design.csv",
        ["tuple_id", "Item1", "Item2", "Item3", "Item4"],
        [[t, *row] for t, row in enumerate((bws.bws_design(200, seed=0) + 1).tolist())],
    )
    new = tmp_path / "new.txt"
    new.write_text("\n".join(str(i) for i in range(201, 213)) + "\n", encoding="utf-8")
    proc = fsb("tuples", new, "--extend", design, "--out", tmp_path / "ext.csv", "--k", 8)
    assert proc.returncode == 0, proc.stderr
    check = json.loads(proc.stdout)
    shown = read_design(tmp_path / "ext.csv").drop(columns="tuple_id").to_numpy()
    items = np.unique(shown)
    counts = np.array([[(shown[:, p] == i).sum() for p in range(4)] for i in items])
    is_new = items > 200
    pos, pos_new = check["positions"], check["positions_new_items"]
    assert pos["items"] == items.size < 200 and pos_new["items"] == 12
    assert (
        pos["over"] == f"the {items.size} items of the new tuples (12 new, {items.size - 12} existing); per_item figures count only those"
    )
    assert pos["expected_per_item_per_position"] == round(shown.size / items.size / 4, 4) > 0.5
    assert pos_new["expected_per_item_per_position"] == 2.0 and pos_new["over"] == "the new items only"
    assert (pos["per_item_per_position_min"], pos["per_item_per_position_max"]) == (counts.min(), counts.max())
    assert (pos_new["per_item_per_position_min"], pos_new["per_item_per_position_max"]) == (counts[is_new].min(), counts[is_new].max())
    spread = counts.max(axis=1) - counts.min(axis=1)
    assert pos["items_balanced"] == int((spread <= 1).sum()) and pos["items_spread_max"] == int(spread.max())


def test_extend_design_never_lets_tuples_share_three(tmp_path: Path) -> None:
    """Few new items, dense: the local search must still keep every 3-subset unique among the new tuples."""
    a = judgments_file(tmp_path / "j.csv", bws.bws_design(12, seed=2) + 1, {i: 0.0 for i in range(1, 13)}, 1, 0, annotators=1)
    existing = read_existing(a)
    for seed in range(5):
        t = extend_design(np.arange(100, 107), existing, k=8, seed=seed)
        report = bws.design_report(np.unique(t, return_inverse=True)[1].reshape(t.shape))
        assert report["max_shared_items"] <= 2 and report["tuples_repeating_an_item"] == 0
        assert (np.isin(t, np.arange(100, 107)).sum(axis=1) >= 2).all() and (~np.isin(t, np.arange(100, 107))).any(axis=1).all()


def test_rounds_build_card_and_round_fields(study: dict[str, Any]) -> None:
    v2 = study["v2"]
    stats = json.loads((v2 / "stats.json").read_text())
    r1, r2 = stats["rounds"]
    assert (r1["round"], r1["name"], r1["sentences"], r1["judgments"], r1["new_tuples"]) == (1, "first", 400, 2400, 800)
    assert (r2["round"], r2["sentences"], r2["judgments"], r2["tuples"], r2["tuples_linking_earlier_rounds"]) == (2, 120, 960, 320, 320)
    assert r1["annotators"]["n"] == 5 and r2["annotators"]["n"] == 4
    card = (v2 / "README.md").read_text()
    assert "| 1 | first | 400 | 2400 | 5 annotators (480 judgments each) | 800 (800, 0) |" in card
    assert "| 2 | second | 120 | 960 | 4 annotators (240 judgments each) | 320 (320, 320) |" in card
    assert 'load_dataset("v2")' in card and "Built from the release" not in card
    assert "round 2 (second): 120 sentences, 960 judgments, 320 new tuples" in study["build_stdout"]
    ds = datasets.load_dataset(str(v2))["test"].to_pandas().set_index("id")
    ann = datasets.load_dataset(str(v2), "annotations")["test"].to_pandas()
    assert (ds.loc[study["old"], "round"] == 1).all() and (ds.loc[study["new"], "round"] == 2).all()
    assert ann["round"].value_counts().to_dict() == {1: 2400, 2: 960}
    # tuple ids: round 1's tuples keep their numbers (first appearance), round 2's come after
    assert ann.loc[ann["round"] == 2, "tuple_id"].min() == 800


def test_changes_since_the_previous_version(study: dict[str, Any]) -> None:
    card = (study["v2"] / "README.md").read_text()
    assert "## Changes since v1.0.0" in card
    assert "sentences: 400 -> 520 (+120 added, -0 removed, 400 in both)" in card
    assert "judgments: 2400 -> 3360 (+960 added, -0 removed" in card
    stats = json.loads((study["v2"] / "stats.json").read_text())
    assert stats["changes_since"]["label"] == "v1.0.0"
    assert stats["changes_since"]["fingerprint"] == json.loads((study["v1"] / "stats.json").read_text())["fingerprint"]


def test_a_second_round_lands_on_the_existing_scale(study: dict[str, Any]) -> None:
    """Known truth: new sentences' score_maxdiff agrees with it as well as old ones' does (measured: Spearman
    0.955 new vs 0.956 old; pooled 0.961, where counting pools at 0.914 because the new batch is 1 logit
    more biased but competed mostly among itself), and old sentences move little between v1 and v2
    (Spearman 0.995, mean |change| 0.10 logits on a scale whose sd is 1.44)."""
    f1, f2, truth, old, new = default_frame(study["v1"]), default_frame(study["v2"]), study["truth"], study["old"], study["new"]

    def rho(frame: pd.DataFrame, ids: np.ndarray, col: str) -> float:
        return float(spearmanr(frame.loc[ids, col], truth[ids]).statistic)

    md_old, md_new = rho(f2, old, "score_maxdiff"), rho(f2, new, "score_maxdiff")
    assert md_old > 0.9 and md_new > md_old - 0.03, (md_old, md_new)
    ids = f2.index.to_numpy()
    pooled_md, pooled_count = rho(f2, ids, "score_maxdiff"), rho(f2, ids, "score")
    assert pooled_md > pooled_count + 0.02, (pooled_md, pooled_count)
    # the new batch's offset is recovered on the logit scale (truth: about 1.27 logits)
    offset = f2.loc[new, "score_maxdiff"].mean() - f2.loc[old, "score_maxdiff"].mean()
    assert abs(offset - (truth[new].mean() - truth[old].mean())) < 0.3
    before, after = f1.loc[old, "score_maxdiff"], f2.loc[old, "score_maxdiff"]
    assert spearmanr(before, after).statistic > 0.98
    assert (after - before).abs().mean() < 0.1 * before.std()
    assert abs(after.mean()) < 1e-9, "round 1 anchors the scale"


def test_rounds_manifest_errors(study: dict[str, Any], tmp_path: Path) -> None:
    sim = study["manifest"].parent

    def manifest(text: str) -> Path:
        p = sim / "bad.yaml"
        p.write_text(text, encoding="utf-8")
        return p

    with pytest.raises(InputError, match="rounds must increase"):
        read_rounds(manifest("rounds:\n  - {round: 2, generations: a, annotations: b}\n  - {round: 1, generations: a, annotations: b}\n"))
    with pytest.raises(InputError, match="missing annotations"):
        read_rounds(manifest("rounds:\n  - {generations: a}\n"))
    # a round-2 generations file that reuses a round-1 uid: named with its file and line
    generations_file(sim / "dup.csv", np.array([401, 5]))
    bad = manifest(
        "rounds:\n  - {generations: round1/generations.csv, annotations: round1/judgments.csv}\n"
        "  - {generations: dup.csv, annotations: round2/judgments.csv}\n"
    )
    proc = fsb("build", "--rounds", bad, "--out", tmp_path / "x", "--no-record")
    assert proc.returncode == 2 and "dup.csv, line 3, field 'uid': uid 5 is already a sentence of round 1" in proc.stderr
    # round 2's judgments name sentences no round has
    bad = manifest("rounds:\n  - {generations: round1/generations.csv, annotations: round2/judgments.csv}\n")
    proc = fsb("build", "--rounds", bad, "--out", tmp_path / "x", "--no-record")
    assert proc.returncode == 2 and "no such uid in any round's generations" in proc.stderr and not (tmp_path / "x").exists()
    proc = fsb("build", "--rounds", bad, "--raw-dir", sim, "--out", tmp_path / "x")
    assert proc.returncode == 2 and "one of the three" in proc.stderr


def test_generate_plan_numbers_a_later_round_past_the_earlier_uids(release: Path, tmp_path: Path) -> None:
    from tests.generate.test_generate import write_seed_file

    seeds, _ = read_seeds([str(write_seed_file(tmp_path / "seeds.jsonl"))])
    prompts = load_prompt_set(release, {}, formats=["conversion"], seed_types=sorted({s.seed_type for s in seeds}), shots=2, seed=0)
    sampling = engine.Sampling(temperature=0.0, max_tokens=8)
    first = build_generation_plan(seeds, prompts, ["conversion"], "m", sampling)
    later = build_generation_plan(seeds, prompts, ["conversion"], "m", sampling, first_uid=1001)
    assert [r.uid for r in first.requests] == list(range(1, 9)) and [r.uid for r in later.requests] == list(range(1001, 1009))
    assert [r.request_id for r in first.requests] == [r.request_id for r in later.requests], "the same requests"
    assert first.plan_id != later.plan_id and later.summary["first_uid"] == 1001, "a journal of another numbering is refused"
    with pytest.raises(ValueError, match="2\\*\\*31 - 1"):
        build_generation_plan(seeds, prompts, ["conversion"], "m", sampling, first_uid=2**31 - 4)


def both_rounds_judgments(study: dict[str, Any], path: Path, *, annotators: bool = True, extra: int = 0) -> Path:
    """Round 1's and round 2's judgments in one file (a valid round: every id is some round's sentence), plus
    the first `extra` rows of round 1 repeated at the end."""
    a1, a2 = pd.read_csv(study["a1"]), pd.read_csv(study["a2"])
    frame = pd.concat([a1, a2, a1.head(extra)])
    (frame if annotators else frame.drop(columns="Annotator")).to_csv(path, index=False)
    return path


def test_a_file_listed_in_two_rounds_is_refused(study: dict[str, Any], tmp_path: Path) -> None:
    """The same judgments file in two rounds (by another spelling of its path, or a copy) would count every
    judgment twice and inflate split-half reliability: refused in one line naming both rounds, nothing built."""
    sim = study["manifest"].parent
    both_rounds_judgments(study, sim / "both.csv")
    (sim / "both_copy.csv").write_bytes((sim / "both.csv").read_bytes())
    manifest = sim / "twice.yaml"
    for second in ("./both.csv", "round1/../both.csv", "both_copy.csv"):
        manifest.write_text(
            "rounds:\n  - {generations: round1/generations.csv, annotations: both.csv}\n"
            f"  - {{generations: round2/generations.csv, annotations: {second}}}\n",
            encoding="utf-8",
        )
        with pytest.raises(
            InputError,
            match=r"round 2's annotations file (is the same file|has the same content \(sha256 \w+\.\.\.\)) "
            r"as round 1's annotations file \(both.csv\)",
        ):
            build_dataset(rounds=manifest, out=tmp_path / "x", record=False, trials=2)
    proc = fsb("build", "--rounds", manifest, "--out", tmp_path / "x", "--no-record")
    assert proc.returncode == 2 and "round 2's annotations file has the same content (sha256" in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and not (tmp_path / "x").exists()


def test_judgments_repeated_across_rounds(study: dict[str, Any], tmp_path: Path) -> None:
    """A round repeating earlier rows: refused when the annotator id is the same too (the same judgment
    counted twice), counted with a warning giving their number when no annotator id tells them apart."""
    sim = study["manifest"].parent
    a1_rows = len(pd.read_csv(study["a1"]))
    both_rounds_judgments(study, sim / "r2_repeats.csv", extra=0)
    manifest = sim / "repeats.yaml"
    manifest.write_text(
        "rounds:\n  - {generations: round1/generations.csv, annotations: round1/judgments.csv}\n"
        "  - {generations: round2/generations.csv, annotations: r2_repeats.csv}\n",
        encoding="utf-8",
    )
    with pytest.raises(
        InputError, match=r"r2_repeats.csv, line 2, field 'Annotator': repeats round 1's judgment on line 2 of judgments.csv"
    ):
        build_dataset(rounds=manifest, out=tmp_path / "x", record=False, trials=2)
    # no annotator ids anywhere: 7 repeated rows are counted, and said
    pd.read_csv(study["a1"]).drop(columns="Annotator").to_csv(sim / "r1_anon.csv", index=False)
    both_rounds_judgments(study, sim / "r2_anon.csv", annotators=False, extra=7)
    a2_rows = len(pd.read_csv(study["a2"]))
    both_rounds_judgments(study, sim / "r2_anon.csv", annotators=False, extra=7)
    frame = pd.read_csv(sim / "r2_anon.csv")
    frame.iloc[7:].to_csv(sim / "r2_anon.csv", index=False)  # round 2: round 1's rows 8.. + round 2's + round 1's first 7
    manifest.write_text(
        "rounds:\n  - {generations: round1/generations.csv, annotations: r1_anon.csv}\n"
        "  - {generations: round2/generations.csv, annotations: r2_anon.csv}\n",
        encoding="utf-8",
    )
    result = build_dataset(rounds=manifest, out=tmp_path / "y", record=False, trials=2)
    repeated = a1_rows  # every round-1 row appears once in round 2
    assert result.stats["n_annotations"] == a1_rows + (a1_rows - 7) + a2_rows + 7
    (note,) = result.notes
    assert f"{repeated} of round 2's {a1_rows + a2_rows} judgments repeat an earlier round's row exactly" in note
    assert "first on line 2" in note and "r2_anon.csv" in note
    proc = fsb("build", "--rounds", manifest, "--out", tmp_path / "z", "--no-record", "--trials", 2)
    assert proc.returncode == 0 and f"fsb build: warning: {note}" in proc.stderr


def test_round_names_are_plain_one_line_strings(study: dict[str, Any], tmp_path: Path) -> None:
    """A round's name goes into the card's tables: YAML aliases (a "billion laughs" bomb), a mapping, a
    newline or an over-long name are refused in one line; `|` and Markdown in an allowed name are escaped."""
    sim = study["manifest"].parent

    def manifest(name: str, head: str = "") -> Path:
        p = sim / "named.yaml"
        p.write_text(
            f"{head}rounds:\n  - name: {name}\n    generations: round1/generations.csv\n    annotations: round1/judgments.csv\n",
            encoding="utf-8",
        )
        return p

    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
        for i in range(9)
    )
    with pytest.raises(InputError, match=r"named.yaml, line 1: not valid YAML: anchors and aliases .* are not allowed"):
        read_rounds(manifest("*j", head=bomb))
    with pytest.raises(InputError, match=r"field 'rounds\[0\].name': name must be a plain string, got a YAML dict"):
        read_rounds(manifest("{a: [1, 2]}"))
    with pytest.raises(InputError, match=r"name holds the control character '\\n'"):
        read_rounds(manifest('"two\\n---\\n# lines"'))
    with pytest.raises(InputError, match="name has 101 characters, at most 100"):
        read_rounds(manifest("x" * 101))
    with pytest.raises(InputError, match="must be a plain string, got a YAML int"):
        read_rounds(manifest("2024"))
    proc = fsb("build", "--rounds", manifest("*j", head=bomb), "--out", tmp_path / "x", "--no-record")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "anchors and aliases" in proc.stderr
    name = "v2 | **bold** <b>x</b> # [link](y) `code`"
    out = build_dataset(rounds=manifest(f"'{name}'"), out=tmp_path / "card", record=False, trials=2).out
    card = (out / "README.md").read_text(encoding="utf-8")
    escaped = r"v2 \| \*\*bold\*\* \<b\>x\</b\> \# \[link\](y) \`code\`"
    row = next(line for line in card.splitlines() if line.startswith("| 1 | v2"))
    assert row.startswith(f"| 1 | {escaped} | 400 |") and len(re.findall(r"(?<!\\)\|", row)) == 7, row
    assert name not in card and f"1: {escaped}" in card and f"Round 1 ({escaped})" in card


def test_a_rounds_manifest_pointing_at_a_system_file_quotes_no_line_of_it(tmp_path: Path) -> None:
    """A manifest whose generations and judgments are a system file (here a copy of a passwd file): the refusal
    printed that file's first line, "missing column (the header has: root:x:0:0:...)" (issue 32). It names the
    missing column and what fsb expected, in one line, and no line of the file."""
    system = tmp_path / "passwd"
    system.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n", encoding="utf-8")
    manifest = tmp_path / "rounds.yaml"
    write_csv(tmp_path / "j.csv", JUDGMENT_HEADER, [[1, 2, 3, 4, 1, 4]])
    manifest.write_text(f"rounds:\n  - {{generations: {system}, annotations: j.csv}}\n", encoding="utf-8")
    proc = fsb("build", "--rounds", manifest, "--out", tmp_path / "out", "--no-record")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    expected = f"fsb build: error: {system}, line 1, field 'uid': missing column (expected uid, prompt_type, seed_type, query, response)"
    assert proc.stderr.strip() == expected
    generations_file(tmp_path / "g.csv", np.arange(1, 9))
    manifest.write_text(f"rounds:\n  - {{generations: g.csv, annotations: {system}}}\n", encoding="utf-8")
    proc = fsb("build", "--rounds", manifest, "--out", tmp_path / "out", "--no-record")
    assert proc.returncode == 2 and "root:" not in proc.stderr and "daemon" not in proc.stderr, proc.stderr
    expected = f"fsb build: error: {system}, line 1, field 'Item1': missing column (expected Item1..ItemK, BestItem, WorstItem)"
    assert proc.stderr.strip() == expected


def test_rounds_judgments_with_a_gap_in_the_item_columns_are_refused(tmp_path: Path) -> None:
    """Issue 34, fault 1, on the --rounds path: Item1,Item2,Item3,Item5 dropped Item5 silently (and then said the
    judgments were not over 4-tuples, or blamed a row); the header is refused in one line naming Item4."""
    generations_file(tmp_path / "g.csv", np.arange(1, 9))
    write_csv(tmp_path / "j.csv", ["Item1", "Item2", "Item3", "Item5", "BestItem", "WorstItem"], [[1, 2, 3, 4, 1, 4], [5, 6, 7, 8, 5, 8]])
    manifest = tmp_path / "rounds.yaml"
    manifest.write_text("rounds:\n  - {generations: g.csv, annotations: j.csv}\n", encoding="utf-8")
    proc = fsb("build", "--rounds", manifest, "--out", tmp_path / "out", "--no-record")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"fsb build: error: {tmp_path / 'j.csv'}, line 1, field 'Item4': missing column"), proc.stderr
    assert "names Item5 but not Item4" in proc.stderr and not (tmp_path / "out").exists()
