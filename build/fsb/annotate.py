"""Comparative annotation with best-worst scaling: make a tuple design for a set of sentences, export it
for annotators, and import their best/worst choices into the common judgments format."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import bws
from ._io import InputError, atomic_write
from .raw import read_generations

__all__ = ["make_tuples"]


def _item_labels(items: str | int) -> np.ndarray:
    """Item labels: 1..N for a number, else the uids of a generations file (sorted)."""
    text = str(items)
    if text.isdigit():
        n = int(text)
        if n < 5:
            raise InputError("items", f"need at least 5 items, got {n}")
        return np.arange(1, n + 1)
    return np.sort(read_generations(text).frame["uid"].to_numpy())


def make_tuples(
    items: str | int,
    out: str | os.PathLike[str],
    tuple_size: int = 4,
    appearances: int = 8,
    seed: int = 0,
) -> dict[str, Any]:
    """Write a design CSV (tuple_id, Item1..ItemK) for the items and return its independent check."""
    labels = _item_labels(items)
    design = bws.bws_design(labels.size, tuple_size=tuple_size, appearances=appearances, seed=seed)
    frame = pd.DataFrame(labels[design], columns=[f"Item{j + 1}" for j in range(tuple_size)])
    frame.insert(0, "tuple_id", np.arange(len(frame)))
    atomic_write(out, frame.to_csv(index=False, lineterminator="\n"))
    return {**bws.design_report(design, labels.size), "seed": seed, "out": str(Path(out))}
