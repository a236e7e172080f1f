"""Group ceilings a perfect scorer cannot beat (issue 18, point 1), checked against a known truth.

A study is simulated from a latent truth (1000 sentences, each in 8 tuples, 1-4 judgments per tuple,
each judgment reads the truth plus normal noise of sd 0.7: a Thurstonian annotator, not the MaxDiff model
the ceiling simulates from). The truth itself is reported as a prediction file through `fsb report
--json`; for every group of every breakdown its Pearson must be at most the printed ceiling + 0.03, and
no printed ceiling may be more than 0.2 above it. The same study shows that the split-half formula,
which the report printed before, fails inside a score bin (so the check can fail).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fsb import bws
from fsb.data.reference import loo_agreement, simulate_counting

FSB = Path(sys.executable).parent / "fsb"
SEED_TYPES = ("explicit", "implicit", "neutral", "random")
PROMPT_TYPES = ("conversion", "completion")


def make_study(folder: Path, n: int = 1000, seed: int = 0, noise: float = 0.7) -> np.ndarray:
    """generations.csv, judgments.csv and truth.csv (the truth mapped linearly onto [0, 1]) in `folder`."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    truth = rng.normal(0, 1, n)
    with open(folder / "generations.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "prompt_type", "seed_type", "query", "response"])
        for i in range(n):
            w.writerow([i + 1, PROMPT_TYPES[rng.integers(2)], SEED_TYPES[rng.integers(4)], f"seed {i}", f"sentence number {i + 1}"])
    with open(folder / "judgments.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"])
        for tup in bws.bws_design(n, seed=seed):
            for _ in range(rng.integers(1, 5)):
                x = truth[tup] + rng.normal(0, noise, tup.size)
                w.writerow([*(tup + 1).tolist(), int(tup[np.argmax(x)]) + 1, int(tup[np.argmin(x)]) + 1])
    scaled = (truth - truth.min()) / (truth.max() - truth.min())
    with open(folder / "truth.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "score"])
        w.writerows([i + 1, f"{v:.9f}"] for i, v in enumerate(scaled))
    return truth


def _fsb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([str(FSB), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def truth_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("study")
    make_study(folder)
    built = _fsb("build", "--generations", "generations.csv", "--annotations", "judgments.csv", "--out", "ds", "--no-record", cwd=folder)
    assert built.returncode == 0, built.stderr
    done = _fsb("report", "--predictions", "truth.csv", "--dataset", "ds", "--json", "--bootstrap", "200", cwd=folder)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_truth_never_beats_a_printed_group_ceiling_and_no_ceiling_is_far_above_it(truth_report: dict) -> None:
    (row,) = truth_report["rows"]
    seen = []
    for kind, groups in row["breakdowns"].items():
        for group, b in groups.items():
            ceiling = (b.get("human_reference") or {}).get("noise_ceiling")
            if kind in ("seed_type", "prompt_type"):
                assert ceiling is not None, f"{kind} {group} must print a ceiling"
            if ceiling is None:
                continue
            seen.append(kind)
            assert b["pearson"] <= ceiling + 0.03, (
                f"the truth beats the printed ceiling in {kind} {group}: {b['pearson']:.3f} > {ceiling:.3f}"
            )
            assert ceiling <= b["pearson"] + 0.2, f"{kind} {group}'s ceiling {ceiling:.3f} is far above the truth {b['pearson']:.3f}"
    assert set(seen) == {"seed_type", "prompt_type", "bin"}, "every breakdown was checked"


def test_the_old_split_half_formula_fails_inside_a_score_bin(truth_report: dict) -> None:
    """Kept in the JSON for comparison: in the medium bin the truth beats sqrt(2r/(1+r)) of the bin's own split-half."""
    (row,) = truth_report["rows"]
    medium = row["breakdowns"]["bin"]["medium"]
    formula = medium["human_reference"]["noise_ceiling_split_half_formula"]
    assert medium["pearson"] > formula + 0.03, "selection on the noisy score breaks the formula (the check can fail)"
    assert "re-cut" in medium["human_reference"]["ceiling_method"]


def test_simulated_counting_follows_the_logit() -> None:
    """One tuple judged 400 times: each item's mean simulated score is the logit's expected score."""
    design = np.array([[0, 1, 2, 3]])
    utility = np.array([2.0, 0.5, 0.0, -2.0])
    scores = simulate_counting(design, np.zeros(400, dtype=int), utility, draws=50, seed=1)
    e = np.exp(utility)
    p_best = e / e.sum()
    p_worst = np.zeros(4)
    for b in range(4):
        rest = [i for i in range(4) if i != b]
        inv = 1 / e[rest]
        p_worst[rest] += p_best[b] * inv / inv.sum()
    assert np.allclose(scores.mean(axis=0), (p_best - p_worst + 1) / 2, atol=0.01)
    assert np.array_equal(scores, simulate_counting(design, np.zeros(400, dtype=int), utility, draws=50, seed=1)), "seeded"


def test_leave_one_out_agreement_counts_ties_and_skips_single_judgments() -> None:
    design = np.array([[0, 1, 2, 3], [4, 5, 6, 7]])
    # tuple 0: best 0, 0, 1 -> judgment 1 (0) vs others {0, 1}: tie, both count -> hit; judgment 3 (1) vs {0, 0}: miss
    best = np.array([0, 0, 1, 4])
    worst = np.array([3, 3, 3, 7])
    out = loo_agreement(design, best, worst, np.array([0, 0, 0, 1]), n_boot=50)
    assert out["judgments"] == 3 and out["tuples"] == 1, "tuple 1 has one judgment: no others to agree with"
    assert out["best"]["value"] == pytest.approx(2 / 3)
    assert out["worst"]["value"] == 1.0


def test_release_leave_one_out_agreement(release_dataset: Path) -> None:
    from fsb.data.reference import Judgments

    out = Judgments(str(release_dataset)).agreement(n_boot=200)
    assert out["best"]["value"] == pytest.approx(0.679, abs=0.001) and out["worst"]["value"] == pytest.approx(0.651, abs=0.001)
    assert out["best"]["ci95"]["low"] < 0.679 < out["best"]["ci95"]["high"]
