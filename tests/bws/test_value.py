"""fsb.bws.value: Hollis's value and Rescorla-Wagner scoring. The pairings by hand, one update by hand, the
vectorised batches against a plain loop of the sequential update (written here from the formulas of Hollis
2018 and the module docstring), invariances, determinism for a seed, and `fsb score --method value`."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from fsb.bws.value import ITERATIONS, RATE, pairings, rw_scores, value_scores
from tests._support import run_fsb


def _hollis_loop(winners, losers, n, *, iterations, seed, rule):
    """The sequential update, one pairing at a time, in the order the module draws (dummies appended as it does)."""
    items = np.arange(n)
    w_all = np.concatenate([winners, np.full(n, n), items])
    l_all = np.concatenate([losers, items, np.full(n, n + 1)])
    rng = np.random.default_rng(seed)
    value = [0.5] * (n + 2)
    win, lose = [0.0] * (n + 2), [0.0] * (n + 2)
    for i in range(1, iterations + 1):
        rate = RATE / i
        for j in rng.permutation(w_all.size).tolist():
            a, b = int(w_all[j]), int(l_all[j])
            if rule == "value":
                rw_, rl = value[a] / (1 - value[a]), value[b] / (1 - value[b])
                s = 1.0 - rw_ / (rw_ + rl)
                value[a] += s * rate * (1.0 - value[a])
                value[b] += s * rate * (0.0 - value[b])
            else:
                ta, tb = win[a] + lose[a], win[b] + lose[b]
                pa = win[a] / ta if ta else 0.5
                pb = win[b] / tb if tb else 0.5
                oa, ob = pa / max(1e-4, 1 - pa), pb / max(1e-4, 1 - pb)
                s = 1.0 - oa / (oa + ob) if oa + ob else 1.0
                win[a] += s * rate * (1.0 - ta)
                lose[b] += s * rate * (1.0 - tb)
    if rule == "value":
        return np.array(value[:n])
    return np.array([w / (w + lo) if w + lo else 0.5 for w, lo in zip(win[:n], lose[:n], strict=True)])


def _study(n: int = 60, seed: int = 0):
    from fsb import bws
    from fsb.data.intervals import simulate_judgments

    truth = np.random.default_rng(seed).normal(0.0, 1.0, n)
    design = bws.bws_design(n, seed=seed)
    ti, best, worst = simulate_judgments(design, truth, 1, seed=seed + 1)
    return truth, design, ti, best, worst


def test_pairings_of_one_judgment_by_hand() -> None:
    """(a, b, c, d), best a, worst d: a > d, a > b, b > d, a > c, c > d (2k - 3 = 5 wins)."""
    winners, losers = pairings(np.array([[0, 1, 2, 3]]), np.array([0]), np.array([3]), np.array([0]))
    assert list(zip(winners.tolist(), losers.tolist(), strict=True)) == [(0, 3), (0, 1), (1, 3), (0, 2), (2, 3)]


def test_one_win_moves_both_values_by_hand() -> None:
    """v = 0.5 both: odds 1 and 1, salience 1/2; v_w = 0.5 + 0.5 * 0.025 * 0.5, v_l = 0.5 - 0.5 * 0.025 * 0.5."""
    v = value_scores(np.array([0]), np.array([1]), 2, iterations=1, dummies=False)
    np.testing.assert_allclose(v, [0.5 + 0.5 * RATE * 0.5, 0.5 - 0.5 * RATE * 0.5], rtol=0, atol=1e-15)
    r = rw_scores(np.array([0]), np.array([1]), 2, iterations=1, dummies=False)
    np.testing.assert_array_equal(r, [1.0, 0.0])  # one association each: the winner's all win, the loser's all loss


@pytest.mark.parametrize("rule", ["value", "rw"])
def test_one_pairing_a_batch_is_the_sequential_update_exactly(rule: str) -> None:
    _, design, ti, best, worst = _study(24)
    winners, losers = pairings(design, best, worst, ti)
    fn = value_scores if rule == "value" else rw_scores
    got = fn(winners, losers, 24, iterations=4, seed=7, batch=1)
    want = _hollis_loop(winners, losers, 24, iterations=4, seed=7, rule=rule)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fn", [value_scores, rw_scores])
def test_batches_agree_with_the_sequential_update_within_the_orders_spread(fn) -> None:
    """Default batches (about n/2 pairings) against one pairing a batch: closer than two seeds of the sequential order."""
    _, design, ti, best, worst = _study(200)
    winners, losers = pairings(design, best, worst, ti)
    batched = fn(winners, losers, 200, iterations=20)
    seq = fn(winners, losers, 200, iterations=20, batch=1)
    seq_other = fn(winners, losers, 200, iterations=20, batch=1, seed=1)
    assert np.abs(batched - seq).max() < 3 * np.abs(seq_other - seq).max()
    assert np.corrcoef(batched, seq)[0, 1] > 0.999


def test_relabelling_items_permutes_the_scores() -> None:
    """Exactly, without the dummies (their pairings are appended in item order, which a relabelling reorders)."""
    _, design, ti, best, worst = _study(80)
    perm = np.random.default_rng(3).permutation(80)
    a = value_scores(*pairings(design, best, worst, ti), 80, seed=5, dummies=False)
    b = value_scores(*pairings(perm[design], perm[best], perm[worst], ti), 80, seed=5, dummies=False)
    np.testing.assert_allclose(b[perm], a, rtol=0, atol=1e-12)


def test_reversing_every_choice_mirrors_the_values() -> None:
    """The update is symmetric under v -> 1 - v with winner and loser swapped (the odds invert, the salience
    stays): best and worst swapped gives 1 - v (without the dummies, whose order the mirror would change)."""
    _, design, ti, best, worst = _study(80)
    w, lo = pairings(design, best, worst, ti)
    a = value_scores(w, lo, 80, seed=2, dummies=False)
    b = value_scores(lo, w, 80, seed=2, dummies=False)
    np.testing.assert_allclose(b, 1.0 - a, rtol=0, atol=1e-12)


def test_same_seed_same_scores_and_the_truth_is_recovered() -> None:
    truth, design, ti, best, worst = _study(300)
    w, lo = pairings(design, best, worst, ti)
    a, b, c = (value_scores(w, lo, 300, seed=s) for s in (4, 4, 5))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and np.corrcoef(a, c)[0, 1] > 0.99
    assert ((a > 0) & (a < 1)).all() and np.corrcoef(a, truth)[0, 1] > 0.8
    assert np.corrcoef(rw_scores(w, lo, 300), truth)[0, 1] > 0.8
    assert ITERATIONS == 100 and RATE == 0.025  # Hollis's defaults


def test_an_item_in_no_pairing_keeps_one_half() -> None:
    v = value_scores(np.array([0]), np.array([1]), 3)
    assert v[2] != 0.5  # the dummies still play it
    v = value_scores(np.array([0]), np.array([1]), 3, dummies=False)
    assert v[2] == 0.5


def _judgments(folder: Path) -> Path:
    path = folder / "j.csv"
    path.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\na,b,c,d,a,d\na,b,c,e,a,c\nb,c,d,e,b,d\nc,d,e,a,e,d\n")
    return path


def test_score_method_value_from_the_cli(tmp_path: Path) -> None:
    judgments = _judgments(tmp_path)
    runs = [
        run_fsb("score", judgments, "--method", "value", *extra, "--out", tmp_path / f"{i}.csv")
        for i, extra in enumerate([[], [], ["--seed", "3"]])
    ]
    assert all(p.returncode == 0 for p in runs), [p.stderr for p in runs]
    table = list(csv.DictReader((tmp_path / "0.csv").open()))
    assert list(table[0]) == ["item", "score", "n", "best", "worst", "bound"]
    assert [r["item"] for r in table] == ["a", "b", "e", "c", "d"]  # a won most, d lost every time
    assert table[-1]["bound"] == "worst-always" and all(0 < float(r["score"]) < 1 for r in table)
    assert (tmp_path / "0.csv").read_bytes() == (tmp_path / "1.csv").read_bytes() != (tmp_path / "2.csv").read_bytes()


@pytest.mark.parametrize(
    ("extra", "says"),
    [(["--ci"], "--method value gives no interval"), (["--invalid", "count"], "--method value cannot take --invalid count")],
)
def test_score_method_value_refuses_what_it_cannot_do(tmp_path: Path, extra: list[str], says: str) -> None:
    proc = run_fsb("score", _judgments(tmp_path), "--method", "value", *extra, "--out", tmp_path / "s.csv")
    assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "s.csv").exists()


def test_an_item_in_no_pairing_is_near_but_not_at_one_half_with_dummies() -> None:
    """Review finding S5: the docstrings said 0.5 for an item in no pairing; with the dummies it plays them, so value
    ends near 0.5 and Rescorla-Wagner well above it; without dummies both are exactly 0.5."""
    import numpy as np

    from fsb.bws import value

    w, lose = np.array([0, 1, 0]), np.array([1, 2, 2])
    v, rw = value.value_scores(w, lose, 4, seed=0)[3], value.rw_scores(w, lose, 4, seed=0)[3]
    assert v != 0.5 and abs(v - 0.5) < 1e-3 and rw > 0.6
    assert value.value_scores(w, lose, 4, seed=0, dummies=False)[3] == value.rw_scores(w, lose, 4, seed=0, dummies=False)[3] == 0.5
