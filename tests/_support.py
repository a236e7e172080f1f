"""Small synthetic inputs for tests: a consistent generations file and judgments file."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from fsb import bws

SEED_TYPES = ["explicit", "implicit", "neutral", "random"]
PROMPT_TYPES = ["conversion", "completion"]


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def make_raw(folder: Path, n: int = 12, seed: int = 0, judgments_per_tuple: int = 2) -> tuple[Path, Path]:
    """A small release-like pair: n sentences (uids 1..n) and judgments of a 2n-tuple design made by a
    noisy annotator whose latent bias is the uid (higher uid = more biased)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    gens = [
        [uid, PROMPT_TYPES[uid % 2], SEED_TYPES[uid % 4], f"seed sentence {uid}", f"generated sentence number {uid}, with a comma"]
        for uid in range(1, n + 1)
    ]
    g = write_csv(folder / "FSB_text.csv", ["uid", "prompt_type", "seed_type", "query", "response"], gens)
    design = bws.bws_design(n, seed=seed) + 1
    rows = []
    for tup in design:
        for _ in range(judgments_per_tuple):
            noisy = tup + rng.normal(0, n / 4, size=tup.size)
            rows.append([*tup.tolist(), int(tup[np.argmax(noisy)]), int(tup[np.argmin(noisy)])])
    # best == worst is impossible above (argmax != argmin for distinct noisy values)
    a = write_csv(folder / "annotations.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"], rows)
    return g, a


def read_rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def simulate_bws(design: np.ndarray, utility: np.ndarray, per_tuple: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Judgments drawn from the best-worst logit itself: best ~ softmax(u) over the tuple, then worst ~
    softmax(-u) over the rest. Returns (tuple_index, best, worst) as item codes."""
    rng = np.random.default_rng(seed)
    ti = np.repeat(np.arange(design.shape[0]), per_tuple)
    shown = design[ti]
    x = utility[shown]
    gumbel = rng.gumbel(size=x.shape)
    rows = np.arange(ti.size)
    b = np.argmax(x + gumbel, axis=1)
    y = -x + rng.gumbel(size=x.shape)
    y[rows, b] = -np.inf
    w = np.argmax(y, axis=1)
    return ti, shown[rows, b], shown[rows, w]
