"""The default config of a built dataset as one table (`read_sentences`): the Parquet files that the card's
YAML lists, read straight from a folder, or a Hub repo through `fifty_shades_of_bias.load` (ClassLabel codes
mapped to their names), with the stats.json a folder holds. What `fsb analyse` reads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import fifty_shades_of_bias as spec
from fsb.core.readers import InputError, read_utf8
from fsb.data.cardmeta import read_card

__all__ = ["Sentences", "read_sentences"]


@dataclass(frozen=True)
class Sentences:
    """The default config as a table with string labels, where it came from, and its stats.json if any."""

    frame: pd.DataFrame
    source: str
    stats: dict[str, Any] | None


_REQUIRED = ("text", "score", "seed_type", "prompt_type")


def _default_files(folder: Path) -> list[Path]:
    """The Parquet files of the default config's test split, as the card's YAML lists them."""
    card = read_card(folder / "README.md")
    if "default" not in card.configs:
        raise InputError(card.path, "not a Fifty Shades of Bias dataset card: its YAML has no 'default' config")
    patterns = [p for p in card.data_files("default", spec.SPLIT) if isinstance(p, str)]
    files = sorted({f for p in patterns for f in folder.glob(p) if f.is_file()})
    if not files:
        raise InputError(card.path, f"the 'default' config lists no data file that exists in {folder} ({', '.join(patterns) or 'none'})")
    return files


def _labels(values: pd.Series, feature: Any) -> pd.Series:
    names = getattr(feature, "names", None)
    if names is not None and pd.api.types.is_integer_dtype(values):
        return values.map(lambda v: names[int(v)])
    return values.astype(str)


def read_sentences(source: str | os.PathLike[str] | None = None) -> Sentences:
    """Read the default config of a dataset folder (its Parquet files, straight) or a Hub repo (through
    `fifty_shades_of_bias.load`, ClassLabel codes mapped to their names). `source` as in `locate()`."""
    if source is not None:
        given = Path(source).expanduser()
        # "results/ds" that is not there, beside a real "results/": a mistyped folder, not a Hub repo id.
        if not given.exists() and given.parent != Path() and given.parent.is_dir():
            raise InputError(given, "no such dataset folder")
    where = spec.locate(source)
    folder = Path(where)
    stats = None
    if folder.is_dir():
        import pyarrow.parquet as pq

        files = _default_files(folder)
        frames = []
        for f in files:
            try:
                frames.append(pq.read_table(f).to_pandas())
            except Exception as e:  # pyarrow raises several types for a file that is not Parquet
                raise InputError(f, f"cannot read as Parquet: {str(e).splitlines()[0]}") from None
        frame = pd.concat(frames, ignore_index=True)
        bad_at = files[0]
        if (folder / "stats.json").is_file():
            try:
                stats = json.loads(read_utf8(folder / "stats.json"))
            except ValueError as e:
                raise InputError(folder / "stats.json", f"not valid JSON: {e}") from None
    else:
        try:
            ds = spec.load("default", source=where)
        except Exception as e:  # offline, no such repo, no access: one line that says which
            raise spec.DatasetNotFound(
                f"{where!r} is not a folder here and could not be loaded from the Hub: {str(e).splitlines()[0]}"
            ) from None
        split = ds[spec.SPLIT] if spec.SPLIT in ds else ds[next(iter(ds))]
        frame = split.to_pandas()
        for col in ("seed_type", "prompt_type", "bin"):
            if col in frame:
                frame[col] = _labels(frame[col], split.features.get(col))
        bad_at = where
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(bad_at, f"not a Fifty Shades of Bias default config: no column {', '.join(repr(c) for c in missing)}")
    for col in ("seed_type", "prompt_type"):
        frame[col] = frame[col].astype(str)
    score = pd.to_numeric(frame["score"], errors="coerce")
    if score.isna().any() or score.min() < 0 or score.max() > 1:
        raise InputError(bad_at, "column 'score' must hold numbers in [0, 1] for every row", field="score")
    frame["score"] = score.astype(float)
    return Sentences(frame, where, stats)
