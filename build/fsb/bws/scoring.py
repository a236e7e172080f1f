"""Label-level best-worst scoring: validated `Annotations` (coded item labels) -> tuples (`fsb.bws.coded`) ->
counting or MaxDiff scores (optionally with 95% bootstrap intervals, `fsb.bws.bootstrap`) and split-half
reliability, via the array functions in `fsb.bws` and `fsb.bws.maxdiff`; and the score table's CSV writers
(Python's csv module and pyarrow's, one output byte for byte). Only numpy is imported here: pandas only in
`score_table`."""

from __future__ import annotations

import csv
import io
import os
import sys
from typing import TYPE_CHECKING, Literal

import numpy as np

from fsb import bws
from fsb.bws.bounds import bound_column, bound_counts, bound_sentence, score_bounds
from fsb.bws.coded import Coded, encode

if TYPE_CHECKING:
    import pandas as pd

    from fsb.tables.judgments import Annotations

__all__ = [
    "MAXDIFF_COUNT_REFUSAL",
    "METHODS",
    "VALUE_CI_REFUSAL",
    "VALUE_COUNT_REFUSAL",
    "annotator_agreement",
    "csv_bytes",
    "format_csv",
    "release_arrow_memory",
    "reliability",
    "score_columns",
    "score_order",
    "score_table",
]

METHODS = ("counting", "maxdiff", "value")
VALUE_CI_REFUSAL = (
    "--method value gives no interval: its scores are a shrunken tournament, not a fitted model (no standard error), "
    "and a bootstrap would rerun its 100 passes per resample; use --method maxdiff --ci (or counting --ci) for intervals"
)
RIDGE_REFUSAL = "--ridge is the prior precision of the MaxDiff fit: it needs --method maxdiff"
VALUE_COUNT_REFUSAL = (
    "--method value cannot take --invalid count: a quality-control row (a tuple repeating an item, or best = worst) "
    "would make an item beat itself; use --invalid drop to score without those rows, or the default refuse to see the first"
)
MAXDIFF_COUNT_REFUSAL = (
    "--method maxdiff cannot take --invalid count: counting a quality-control row (a tuple repeating an item, or best = worst) "
    "is a rule of the NRC Perl counting script, and the MaxDiff likelihood has no such choice (a logit never picks one item "
    "both best and worst, nor shows it twice); use --invalid drop to fit without those rows, or the default refuse to see the first"
)
Method = Literal["counting", "maxdiff", "value"]


def release_arrow_memory() -> int:
    """Hand the memory pyarrow's pool keeps after freeing back to the system; the bytes handed back.

    Returns
    -------
    int
        Resident bytes before minus after (0 when pyarrow was never imported: nothing to release).

    Why: a large file is read and its labels coded through pyarrow, whose default pool (mimalloc or
    jemalloc) keeps the pages of freed buffers for later Arrow allocations. numpy never allocates from it,
    so after reading 1e6 items' judgments (6e6 rows) 450 MB stayed resident through the MaxDiff fit and
    the bootstrap for nothing (resident 724 MB after the read, 275 MB after this)."""
    if "pyarrow" not in sys.modules:
        return 0
    import pyarrow as pa

    before = _resident()
    pa.default_memory_pool().release_unused()
    return max(0, before - _resident())


def _resident() -> int:
    """This process's resident bytes (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def score_columns(
    ann: Annotations,
    *,
    method: Method = "counting",
    ci: bool = False,
    n_boot: int = 200,
    seed: int = 0,
    notes: list[str] | None = None,
    sort: bool = True,
    ridge: float | None = None,
) -> dict[str, np.ndarray]:
    """The score table as numpy columns, most biased first (ties in label order), or in label order (`sort`).

    Parameters
    ----------
    ann : the validated judgments.
    method : "counting" (Orme 2009; Kiritchenko and Mohammad 2017), "maxdiff" (`fsb.bws.maxdiff`) or "value"
        (Hollis 2018's value scoring, `fsb.bws.value`; no intervals: with `ci`, ValueError `VALUE_CI_REFUSAL`).
    ci : add 95% bootstrap intervals over tuples.
    n_boot, seed : resamples and their seed (for "value": the seed of its pairings' order).
    notes : list to which one line per reason for a missing interval is appended, and one counting the items
        whose score is a bound (with or without `ci`).
    sort : False leaves the rows in label order, for a writer that puts them in `score_order` as it writes
        (`csv_bytes(cols, rows=...)`: 1e6 40-character labels are not gathered as a 160 MB unicode array).
    ridge : "maxdiff" only: prior precision of the fit and every bootstrap refit (None: `maxdiff.RIDGE`); noted.

    Returns
    -------
    dict of numpy columns
        counting: item, score_raw = (B - W) / n in [-1, 1], score = (score_raw + 1) / 2, n (appearances),
        best, worst. maxdiff: item, score (the MaxDiff utility, logit scale, centred to mean 0), se (its
        standard error), n, best, worst. value: item, score (Hollis's value in (0, 1)), n, best, worst.
        With `ci`: ci_low, ci_high (`fsb.bws.bootstrap.bootstrap_intervals`; NaN for items without one).
        Last, always: bound, per item "" (an estimate) or why its score is a bound rather than an estimate
        (best-always, worst-always, disconnected; `fsb.bws.bounds`). method="maxdiff" or "value" refuses
        judgments read with invalid="count" (InputError, `MAXDIFF_COUNT_REFUSAL`, `VALUE_COUNT_REFUSAL`)."""
    if method in ("maxdiff", "value") and ann.invalid == "count":
        from fsb.core.readers import InputError

        raise InputError(ann.path, MAXDIFF_COUNT_REFUSAL if method == "maxdiff" else VALUE_COUNT_REFUSAL)
    if method == "value" and ci:
        raise ValueError(VALUE_CI_REFUSAL)
    if ridge is not None and method != "maxdiff":
        raise ValueError(RIDGE_REFUSAL)
    if method == "counting" and not ci:  # counting needs no tuple identities: one row per judgment will do
        n_items = ann.labels.size
        counts = bws.count_best_worst(ann.item_codes, ann.best_codes, ann.worst_codes, n_items)
        cols: dict[str, np.ndarray] = {"item": np.asarray(ann.labels)}
        cols |= {"score_raw": counts.score_raw, "score": counts.score, "n": counts.appearances, "best": counts.best}
        cols |= {"worst": counts.worst}
        cols["bound"] = bound_column(score_bounds(ann.item_codes, ann.best_codes, ann.worst_codes, None, n_items, counts))
        _note_bounds(cols["bound"], notes)
        return _sorted(cols) if sort else cols
    coded = encode(ann)
    release_arrow_memory()  # the reading's and the coding's Arrow buffers are gone: their pages need not stay through the fit
    counts = bws.count_best_worst(coded.design, coded.best, coded.worst, coded.n_items, coded.tuple_index)
    cols = {"item": coded.labels}
    if method == "counting":
        cols |= {"score_raw": counts.score_raw, "score": counts.score}
    elif method == "maxdiff":
        cols |= _maxdiff_columns(coded, ridge, notes)
    elif method == "value":
        from fsb.bws import value

        winners, losers = value.pairings(coded.design, coded.best, coded.worst, coded.tuple_index)
        cols |= {"score": value.value_scores(winners, losers, coded.n_items, seed=seed)}
    else:
        raise ValueError(f"method must be one of {METHODS}")
    cols |= {"n": counts.appearances, "best": counts.best, "worst": counts.worst}
    if ci:
        from fsb.bws import bootstrap

        start = cols["score"] if method == "maxdiff" else None  # the fit above: not fitted twice
        low, high = bootstrap.bootstrap_intervals(coded, method=method, n_boot=n_boot, seed=seed, start=start, notes=notes, ridge=ridge)
        cols |= {"ci_low": low, "ci_high": high}
    cols["bound"] = bound_column(score_bounds(coded.design, coded.best, coded.worst, coded.tuple_index, coded.n_items, counts))
    zero = (cols["ci_high"] - cols["ci_low"] == 0) if ci and method == "counting" else None
    _note_bounds(cols["bound"], notes, zero)
    return _sorted(cols) if sort else cols


def _maxdiff_columns(coded: Coded, ridge: float | None, notes: list[str] | None) -> dict[str, np.ndarray]:
    """score and se of the MaxDiff fit with `ridge` (None: the default), and a note naming a ridge given."""
    from fsb.bws import maxdiff

    fit = maxdiff.fit_maxdiff(coded.design, coded.best, coded.worst, coded.tuple_index, coded.n_items, ridge=ridge)
    if ridge is not None and notes is not None:
        notes.append(
            f"MaxDiff fitted with ridge {ridge:g}: a N(0, {1 / ridge:g}) prior on each utility, in the fit and every bootstrap refit"
        )
    return {"score": fit.utility, "se": fit.se}


def _note_bounds(bound: np.ndarray, notes: list[str] | None, zero_width: np.ndarray | None = None) -> None:
    """One note counting the items whose score is a bound (`fsb.bws.bounds.bound_sentence`), and with counting
    intervals (`zero_width`: which have width 0) one more for the always-chosen ones among them: an item chosen
    best (or worst) every time gives every resample the same score, an interval of width 0 that reads as certainty."""
    if notes is None:
        return
    if sentence := bound_sentence(bound_counts(bound), explain=False):
        notes.append(sentence)
    always = 0 if zero_width is None else int((zero_width & (np.char.find(bound, "-always") >= 0)).sum())
    if always:
        notes.append(
            f"the counting interval of {always} best-always/worst-always {'item' if always == 1 else 'items'} has width 0: "
            "every resample scores it at the end of the scale, no spread for the bootstrap to see; a bound, not certainty"
        )


def score_order(cols: dict[str, np.ndarray]) -> np.ndarray:
    """The rows of `score_columns(..., sort=False)` most biased first.

    Parameters
    ----------
    cols : columns in label order (as `score_columns(..., sort=False)` gives them), with a "score" column.

    Returns
    -------
    numpy.ndarray
        The permutation putting rows in descending score; ties keep their order (a stable sort), which is
        label order for columns in label order."""
    return np.argsort(-cols["score"], kind="stable")


def _sorted(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    order = score_order(cols)
    return {name: np.take(values, order, axis=0) for name, values in cols.items()}


def score_table(ann: Annotations, *, method: Method = "counting", ci: bool = False, n_boot: int = 200, seed: int = 0) -> pd.DataFrame:
    """`score_columns` as a DataFrame (for the dataset build and notebooks)."""
    import pandas as pd

    return pd.DataFrame(score_columns(ann, method=method, ci=ci, n_boot=n_boot, seed=seed))


def format_csv(cols: dict[str, np.ndarray], decimals: int = 6) -> str:
    """The columns as CSV text: floats with `decimals` places (as "%.6f"; NaN as an empty field), labels
    quoted as needed. Tables of 1e5 rows or more whose labels are integers, or strings that need no
    quoting, are formatted by pyarrow (a float to decimal cast formats exactly as "%.6f" does; NaN is a
    null, written empty), the rest by Python's csv module."""
    return _format_arrow(cols, decimals).decode("utf-8") if _arrow_formats(cols) else _format_python(cols, decimals)


def csv_bytes(cols: dict[str, np.ndarray], decimals: int = 6, rows: np.ndarray | None = None) -> bytes:
    """`format_csv` as UTF-8 bytes, for a file or a byte stream: a large table's text is never decoded into a
    Python str and encoded back (3 copies of ~75 MB saved at 1e6 items).

    Parameters
    ----------
    cols : the columns (e.g. `score_columns`), all of one length.
    decimals : places of the float columns ("%.6f" by default; NaN is an empty field).
    rows : the order to write the rows in (e.g. `score_order`), each column gathered as it is written (on
        the pyarrow path, labels as UTF-8 bytes: a quarter of a numpy unicode array's); None: as they are.

    Returns
    -------
    bytes
        The header line and one line per row, as `format_csv(...).encode()` of the gathered columns."""
    if _arrow_formats(cols):
        return _format_arrow(cols, decimals, rows)
    return _format_python(cols if rows is None else {k: np.take(v, rows, axis=0) for k, v in cols.items()}, decimals).encode("utf-8")


def _arrow_formats(cols: dict[str, np.ndarray]) -> bool:
    """Whether pyarrow writes the table (see `format_csv`)."""
    rows = next(iter(cols.values())).size
    simple = all(v.dtype.kind in "iufU" for v in cols.values())
    # the bound column's values (`fsb.bws.bounds.BOUND_VALUES`) need no quotes, and its empty field is written empty by both
    labels = (v for name, v in cols.items() if v.dtype.kind == "U" and name != "bound")
    return simple and rows >= 100_000 and not any(_needs_quotes(v) for v in labels)


def _format_python(cols: dict[str, np.ndarray], decimals: int) -> str:
    """`format_csv` by Python's csv module."""
    out = []
    for values in cols.values():
        if values.dtype.kind == "f":
            fmt = f"{{:.{decimals}f}}".format
            out.append(["" if v != v else fmt(v) for v in values.tolist()])
        else:
            out.append(values.tolist())
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(cols))
    writer.writerows(zip(*out))
    return buf.getvalue()


def _needs_quotes(labels: np.ndarray) -> bool:
    """Whether a label holds a comma, a quote, a line break, or is empty (Python's csv module writes "").
    Read a block of labels at a time: the comparisons' temporaries stay small (all at once they were 40 MB
    each for 1e6 40-character labels, fresh pages every time)."""
    if labels.size == 0:
        return False
    units = np.ascontiguousarray(labels).view(np.uint32).reshape(labels.size, -1)  # UCS-4 code points, NUL-padded
    if units.shape[1] == 0 or not units[:, 0].all():  # an empty label (numpy strings hold no leading NUL otherwise)
        return True
    step = max(1, (1 << 18) // units.shape[1])
    for start in range(0, labels.size, step):
        part = units[start : start + step]
        if any((part == ord(c)).any() for c in ',"\n\r'):
            return True
    return False


def _format_arrow(cols: dict[str, np.ndarray], decimals: int, rows: np.ndarray | None = None) -> bytes:
    """`csv_bytes` by pyarrow's CSV writer: no Python object per row; labels gathered in `rows` order as
    UTF-8 bytes (a quarter of a numpy unicode array's)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from fsb.tables.labelcodes import arrow_call, cast_options, numpy_to_arrow, strings_to_arrow

    def column(v: np.ndarray) -> pa.Array:
        if v.dtype.kind == "U":
            labels = strings_to_arrow(v)
            return labels if rows is None else arrow_call("take", labels, numpy_to_arrow(np.asarray(rows, dtype=np.int64)))
        v = v if rows is None else np.take(v, rows)
        if v.dtype.kind != "f":
            return numpy_to_arrow(v)
        nan = np.isnan(v)
        valid = pa.py_buffer(np.packbits(~nan, bitorder="little")) if nan.any() else None
        values = np.ascontiguousarray(np.where(nan, 0.0, v), dtype=np.float64)
        floats = pa.Array.from_buffers(pa.float64(), v.size, [valid, pa.py_buffer(values)])
        decimal = arrow_call("cast", floats, options=cast_options(pa.decimal128(38, decimals), safe=False))
        return arrow_call("cast", decimal, options=cast_options(pa.string()))

    sink = pa.BufferOutputStream()
    sink.write((",".join(cols) + "\n").encode("utf-8"))
    options = pacsv.WriteOptions(include_header=False, quoting_style="none")
    pacsv.write_csv(pa.table([column(v) for v in cols.values()], names=list(cols)), sink, write_options=options)
    return sink.getvalue().to_pybytes()


def reliability(ann: Annotations, trials: int = 100, seed: int = 0) -> bws.SplitHalfResult:
    """Split-half reliability of the counting scores, judgments grouped by tuple (item set).

    Parameters
    ----------
    ann : the validated judgments.
    trials : random splits averaged.
    seed : seed of the splits.

    Returns
    -------
    bws.SplitHalfResult
        Mean and sd over the trials of Pearson and Spearman r between the counting scores of two halves
        (each tuple's judgments shuffled, floor(n/2) to one half, a coin for an odd one), as the NRC
        SHR-BWS.pl does (Kiritchenko and Mohammad 2017). NaN when a half scores fewer than 2 items
        (e.g. a file of one judgment): the caller says so."""
    coded = encode(ann)
    return bws.split_half_reliability(coded.design, coded.best, coded.worst, coded.tuple_index, coded.n_items, trials, seed)


def annotator_agreement(ann: Annotations, *, outlier_z: float = 3.0) -> list[dict[str, object]] | None:
    """Each annotator's agreement with the leave-one-out consensus of the others, or None without annotator ids.

    The consensus is the counting score from everyone else's judgments (B - W) / n with the annotator's
    own removed. For each of the annotator's judgments, the best choice agrees when the chosen item has
    the highest consensus score in its tuple (ties count as agreement), the worst when it has the lowest;
    tuples holding an item nobody else judged are skipped. `agreement` is the mean of the two shares.
    An annotator is flagged `outlier` when the agreement lies more than `outlier_z` robust standard
    deviations (1.4826 x the median absolute deviation) below the annotators' median."""
    if ann.annotator is None:
        return None
    ids = np.array([str(a).strip() for a in ann.annotator], dtype=object)
    present = ids != ""
    if len(set(ids[present].tolist())) < 2:
        return None
    coded = encode(ann)
    n = coded.n_items
    shown = coded.items
    b_all = np.bincount(coded.best, minlength=n)
    w_all = np.bincount(coded.worst, minlength=n)
    n_all = np.bincount(shown.ravel(), minlength=n)
    names, which = np.unique(ids[present], return_inverse=True)
    rows_present = np.flatnonzero(present)
    out: list[dict[str, object]] = []
    for a, name in enumerate(names.tolist()):
        rows = rows_present[which == a]
        own_items = shown[rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            loo = (b_all - np.bincount(coded.best[rows], minlength=n) - w_all + np.bincount(coded.worst[rows], minlength=n)) / (
                n_all - np.bincount(own_items.ravel(), minlength=n)
            )
        s = loo[own_items]
        usable = ~np.isnan(s).any(axis=1)
        best_ok = loo[coded.best[rows]] >= s.max(axis=1)
        worst_ok = loo[coded.worst[rows]] <= s.min(axis=1)
        k = int(usable.sum())
        best_share = float(best_ok[usable].mean()) if k else float("nan")
        worst_share = float(worst_ok[usable].mean()) if k else float("nan")
        out.append(
            {
                "annotator": name,
                "judgments": int(rows.size),
                "compared": k,
                "best_agreement": best_share,
                "worst_agreement": worst_share,
                "agreement": (best_share + worst_share) / 2,
            }
        )
    scores = np.array([r["agreement"] for r in out], dtype=float)
    median = float(np.nanmedian(scores))
    mad = 1.4826 * float(np.nanmedian(np.abs(scores - median)))
    for r in out:
        r["outlier"] = bool(mad > 0 and (median - float(r["agreement"])) > outlier_z * mad)  # type: ignore[arg-type]
    return out
