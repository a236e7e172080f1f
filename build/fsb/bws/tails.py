"""Per-item quantiles of bootstrap draws, for `fsb.bws.bootstrap.bootstrap_intervals`: of all the draws
at once, a column block at a time with one sort each (`quantiles`; numpy's nanquantile calls Python once
per item), or streamed, keeping only each item's lowest and highest draws (`Tails`: the 95% interval of
200 draws reads 6 at each end, so 1e6 items need not hold all their draws).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["Tails", "quantiles"]


def quantiles(draws: NDArray[np.floating], levels: list[float], block: int = 1 << 15) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per-column quantiles of the draws that are not NaN (numpy's default 'linear' rule, as
    `np.nanquantile`), and the mask of columns with none (NaN there). One sort per block of columns."""
    r, n = draws.shape
    out = np.full((len(levels), n), np.nan)
    empty = np.zeros(n, dtype=bool)
    for s in range(0, n, block):
        part = np.sort(draws[:, s : s + block], axis=0).astype(np.float64)  # NaN sorts last
        valid = r - np.isnan(part).sum(axis=0)
        empty[s : s + block] = valid == 0
        for j, q in enumerate(levels):
            pos = q * np.maximum(valid - 1, 0)
            lo = np.floor(pos).astype(np.int64)
            hi = np.minimum(lo + 1, np.maximum(valid - 1, 0))
            a = np.take_along_axis(part, lo[None], axis=0)[0]
            b = np.take_along_axis(part, hi[None], axis=0)[0]
            out[j, s : s + block] = np.where(valid > 0, a + (b - a) * (pos - lo), np.nan)
    return out, empty


class Tails:
    """Per-column quantiles of draws that arrive b rows at a time, holding only each column's m lowest and m
    highest values and its count of non-NaN draws (2 m rows instead of all of them: at 1e6 items 200
    float32 draws were 800 MB). A level q in [0, a] or [1 - a, 1] needs at most the floor(a (R - 1)) + 2
    values at its end of R draws (numpy's 'linear' rule reads positions floor(q (v - 1)) and the next of
    v valid draws), so `quantile` gives what `quantiles` gives on all the draws.

    Parameters
    ----------
    n_cols : columns (items).
    n_rows : draws that will arrive in all (R).
    alpha : the largest distance from 0 or 1 of a level that will be asked for (a).
    """

    def __init__(self, n_cols: int, n_rows: int, alpha: float) -> None:
        self.m = min(n_rows, int(np.floor(alpha * (n_rows - 1))) + 2)
        self.low = np.full((self.m, n_cols), np.inf, dtype=np.float32)
        self.high = np.full((self.m, n_cols), -np.inf, dtype=np.float32)
        self.valid = np.zeros(n_cols, dtype=np.int64)

    def add(self, draws: NDArray[np.floating]) -> None:
        """Take in draws (b, n_cols); NaN = no draw."""
        missing = np.isnan(draws)
        self.valid += draws.shape[0] - missing.sum(axis=0)
        both = np.concatenate([self.low, np.where(missing, np.inf, draws)])
        self.low = np.partition(both, self.m - 1, axis=0)[: self.m] if both.shape[0] > self.m else both
        both = np.concatenate([self.high, np.where(missing, -np.inf, draws)])
        self.high = -np.partition(-both, self.m - 1, axis=0)[: self.m] if both.shape[0] > self.m else both

    def quantile(self, q: float) -> NDArray[np.float64]:
        """The q-quantile of each column's non-NaN draws.

        Parameters
        ----------
        q : the level, within alpha of 0 or 1.

        Returns
        -------
        (n_cols,) float64
            By numpy's 'linear' rule, as `quantiles` (NaN where a column has no draw).
        """
        v = self.valid
        pos = q * np.maximum(v - 1, 0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, np.maximum(v - 1, 0))
        if q <= 0.5:
            part, a_at, b_at = np.sort(self.low, axis=0).astype(np.float64), lo, hi
        else:  # the j-th highest is row j of the highs sorted down
            part, a_at, b_at = -np.sort(-self.high, axis=0).astype(np.float64), np.maximum(v - 1 - lo, 0), np.maximum(v - 1 - hi, 0)
        a = np.take_along_axis(part, np.minimum(a_at, self.m - 1)[None], axis=0)[0]
        b = np.take_along_axis(part, np.minimum(b_at, self.m - 1)[None], axis=0)[0]
        with np.errstate(invalid="ignore"):
            return np.where(v > 0, a + (b - a) * (pos - lo), np.nan)
