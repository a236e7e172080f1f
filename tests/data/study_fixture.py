"""A simulated non-FSB best-worst study for the study-build tests: string ids, texts and further item
columns, five annotators (one an e-mail address, one a phone number), two quality-control rows, and a
study file worded for offensiveness. Judgments are drawn from the best-worst logit of a known truth."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from fsb import bws
from fsb.data.intervals import simulate_judgments

EMAIL = "worker2@example.com"
PHONE = "+44 20 7946 0958"
WORKERS = ("worker1", EMAIL, "w3", "w4", PHONE)
STUDY_YAML = (
    "pretty_name: Offensiveness of comments (simulated)\n"
    "construct: offensiveness\n"
    "question: Which comment is the MOST offensive, and which the LEAST?\n"
    "best_label: Most offensive\n"
    "worst_label: Least offensive\n"
    "high_means: the comment was judged more offensive than the comments it was compared with\n"
    "license: cc-by-4.0\n"
    'citation: "@misc{sim2026, title={A simulated study}}"\n'
)


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(header)
        out.writerows(rows)
    return path


def make_study(
    folder: Path, n: int = 40, per_tuple: int = 3, seed: int = 0, workers: tuple[str, ...] = WORKERS, control_rows: bool = True
) -> dict[str, Path]:
    """Write items.csv, judgments.csv and study.yaml into `folder`; returns their paths and the truth file."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz0123456789")
    ids: list[str] = []
    while len(ids) < n:
        candidate = "c" + "".join(rng.choice(letters, 6))
        if candidate not in ids:
            ids.append(candidate)
    truth = rng.normal(0, 1, n)
    design = bws.bws_design(n, seed=seed)
    ti, b, w = simulate_judgments(design, truth, per_tuple, seed=seed + 1)
    items = write_csv(
        folder / "items.csv",
        ["id", "text", "subreddit", "length", "toxicity"],
        [[x, f"comment {x}, with a comma", ("news", "pics")[i % 2], 10 + i, f"{i / n:.3f}"] for i, x in enumerate(ids)],
    )
    rows: list[list[object]] = []
    for j in range(ti.size):
        rows.append([*(ids[k] for k in design[ti[j]]), ids[b[j]], ids[w[j]], workers[j % len(workers)]])
    if control_rows:
        t = [ids[k] for k in design[0]]
        rows.append([t[0], t[0], t[2], t[3], t[0], t[2], workers[2]])  # a repeated item
        rows.append([*t, t[1], t[1], workers[3]])  # best = worst
    judgments = write_csv(folder / "judgments.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator"], rows)
    study = folder / "study.yaml"
    study.write_text(STUDY_YAML, encoding="utf-8")
    return {"items": items, "judgments": judgments, "study": study}


def published_text(folder: Path) -> str:
    """Everything a build folder publishes, as text to search for a value in the clear: every file read as
    text (card, stats.json, seal) and every Parquet file's decoded cells (its bytes are compressed, so a
    byte search alone could miss a value)."""
    import pyarrow.parquet as pq

    parts = []
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            parts.append(p.read_bytes().decode("utf-8", "replace"))
            if p.suffix == ".parquet":
                parts.append(repr(pq.read_table(p).to_pylist()))
    return "\n".join(parts)
