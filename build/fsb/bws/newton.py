"""The MaxDiff bootstrap's batched Newton refits (`newton_draws`, `NewtonChunks`): one Newton step from the
full fit per resample, all resamples of a chunk at once, for `fsb.bws.bootstrap.bootstrap_intervals`.

The refits work on the per-tuple counts of `fsb.bws.maxdiff` (never per judgment): the full fit's
per-tuple gradient and Hessian blocks are computed once (`tuple_pieces`, `Resamples`), each resample
only reweights them, and its Newton system is solved by Jacobi-preconditioned conjugate gradients in
float32 (`pcg`; the step is a small correction, its error far below the bootstrap's Monte Carlo error).
The resamples are solved a memory-sized chunk at a time (`NewtonChunks`; the Hessian products go
tuple-major through one batched (k, k) @ (k, b) matmul per block of tuples). A second Newton step on a
few resamples measures the ML fit's stretch of the scale. Efron and Tibshirani (1993), ch. 13.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from fsb.bws import maxdiff
from fsb.bws.maxdiff import RIDGE, TupleCounts

if TYPE_CHECKING:
    from fsb.bws.coded import Coded

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_MAX",
    "CHUNK_SMALL",
    "WEIGHT_SLICE",
    "NewtonChunks",
    "Resamples",
    "centred",
    "newton_draws",
    "pcg",
    "tuple_pieces",
]


def tuple_pieces(u: NDArray[np.float64], counts: TupleCounts) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Each tuple's share of the gradient and of the Hessian at u, tuple-major in float32.

    Parameters
    ----------
    u : (n,) utilities (the full fit).
    counts : the judgments per tuple (`fsb.bws.maxdiff.tuple_counts`).

    Returns
    -------
    (g, blocks)
        g (T, k): per slot, the sum over the tuple's judgments of p - q - [b] + [w]; blocks (T, k, k):
        n_t (diag p - p p^T) + sum_i nb_it (diag q_i - q_i q_i^T), q_i the worst softmax when slot i
        was best. Computed `maxdiff.BLOCK` tuples at a time (whole float64 (k, k, T) temporaries were
        256 MB at 1e6 items).
    """
    k, n_tuples = counts.slots.shape
    g_out = np.empty((n_tuples, k), dtype=np.float32)
    blocks_out = np.empty((n_tuples, k, k), dtype=np.float32)
    for s in range(0, n_tuples, maxdiff.BLOCK):
        part = slice(s, min(s + maxdiff.BLOCK, n_tuples))
        p, _, e, loo, _ = maxdiff.softmaxes(u[counts.slots[:, part]])
        n, nb = counts.n[part], counts.nb[:, part]
        g = p * n + counts.nw[:, part] - nb - e * maxdiff.others(nb / loo)
        g_out[part] = g.T
        for a in range(k):
            for c in range(a, k):
                v = n * ((p[a] if a == c else 0.0) - p[a] * p[c])
                for i in range(k):
                    if i in (a, c):
                        continue
                    qa, qc = e[a] / loo[i], e[c] / loo[i]
                    v += nb[i] * ((qa if a == c else 0.0) - qa * qc)
                blocks_out[part, a, c] = blocks_out[part, c, a] = v
    return g_out, blocks_out


def pcg(matvec, rhs: NDArray[np.floating], diag: NDArray[np.floating], rtol: float = 1e-3, maxiter: int = 200) -> NDArray[np.floating]:
    """Solve H X = rhs column by column at once by conjugate gradients preconditioned with diag(H) (Jacobi),
    in the subspace of mean-zero vectors (H 1 = ridge 1: the utilities' free shift).

    Each column stops once its residual is below rtol of its start: it is frozen and dropped from the
    products (running all until the slowest converged cost about 10% more at 1e6 items). The rhs is
    projected on the subspace first: the projected preconditioner is positive only there (a rhs with a
    shift part made r.z negative and the iteration NaN), and as 1 is an eigenvector of H this changes the
    solution by a shift only, which the caller's centring removes. Hestenes and Stiefel (1952); Saad (2003), ch. 9.

    Parameters
    ----------
    matvec : (d (n, c), cols (c,) int) -> (n, c), H times each column of d (column j of d is column cols[j] of rhs).
    rhs : (n, b) right-hand sides.
    diag : (n, b) the diagonals of H (the preconditioner), per column.
    rtol, maxiter : residual reduction at which a column stops; at most this many iterations.

    Returns
    -------
    (n, b) the solutions, as rhs's dtype.
    """
    x = np.zeros_like(rhs)
    r = rhs - rhs.mean(axis=0)
    active = np.arange(rhs.shape[1])
    z = r / diag
    z -= z.mean(axis=0)
    d = z.copy()
    rz = np.einsum("ij,ij->j", r, z)
    stop = rtol * np.linalg.norm(r, axis=0)
    tiny = np.finfo(rhs.dtype).tiny
    for _ in range(maxiter):
        hd = matvec(d, active)
        alpha = rz / np.maximum(np.einsum("ij,ij->j", d, hd), tiny)
        x[:, active] += alpha * d  # (a fancy-index copy of x: a small cost beside the product)
        r -= alpha * hd
        done = np.linalg.norm(r, axis=0) <= stop
        if done.all():
            break
        if done.any():  # freeze the converged columns: the others iterate on alone
            active, r, d, rz, stop, diag = active[~done], r[:, ~done], d[:, ~done], rz[~done], stop[~done], diag[:, ~done]
        z = r / diag
        z -= z.mean(axis=0)
        rz_new = np.einsum("ij,ij->j", r, z)
        d = z + (rz_new / np.maximum(rz, tiny)) * d
        rz = rz_new
    return x


def _columns_of(w: NDArray[np.float32]):
    """cols -> w[:, cols], copied once per set of columns (`pcg` asks for one set until a column converges)."""
    cache: list = [None, w]

    def of(cols: NDArray[np.intp]) -> NDArray[np.float32]:
        if cols.size != w.shape[1] and (cache[0] is None or not np.array_equal(cache[0], cols)):
            cache[:] = [cols, np.ascontiguousarray(w[:, cols])]
        return w if cols.size == w.shape[1] else cache[1]

    return of


class Resamples:
    """The pieces of the full fit every resample reweights, tuple-major: per-slot gradients g (T, k), Hessian
    blocks (T, k, k) and their diagonals (T, k), float32 (`tuple_pieces`), and the items x tuple-slots
    scatter matrix (column t k + a is slot a of tuple t; CSR, row i the cells of item i).

    Parameters
    ----------
    start : (n,) the full fit's utilities.
    counts : the judgments per tuple (`fsb.bws.maxdiff.tuple_counts`).
    n : number of items.
    ridge : the fit's prior precision (`fsb.bws.maxdiff.fit_maxdiff`'s), added to every Hessian.
    """

    def __init__(self, start: NDArray[np.float64], counts: TupleCounts, n: int, ridge: float = RIDGE) -> None:
        import scipy.sparse as sp

        self.ridge = ridge
        self.g, self.blocks = tuple_pieces(start, counts)
        small = max(n, counts.slots.size) < 2**31
        self.slots = np.ascontiguousarray(counts.slots.T, dtype=np.int32 if small else np.intp)  # (T, k)
        self.n_tuples, k = self.slots.shape
        cells = k * self.n_tuples
        flat = self.slots.ravel()
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(flat, minlength=n), out=indptr[1:])
        order = np.argsort(flat, kind="stable").astype(np.int32 if small else np.int64)  # row i: the cells of item i
        self.scatter = sp.csr_matrix((np.ones(cells, np.float32), order, indptr.astype(order.dtype)), shape=(n, cells))
        self.block_diag = np.diagonal(self.blocks, axis1=1, axis2=2)  # a (T, k) view, no copy
        self.n = n

    def to_items(self, y: NDArray[np.float32]) -> NDArray[np.float32]:
        """Sum (T, k, b) slot values into (n, b) items."""
        return self.scatter @ y.reshape(-1, y.shape[-1])

    def hessian_times(self, x: NDArray[np.float32], w: NDArray[np.float32], out: NDArray[np.float32] | None = None) -> NDArray[np.float32]:
        """H_w x for b resamples at once.

        Parameters
        ----------
        x : (n, b) float32, one vector per resample.
        w : (T, b) float32, each resample's count of every tuple.
        out : a flat float32 scratch buffer of at least T k b for the slot values (allocated when None).

        Returns
        -------
        (n, b) float32
            sum_t w_t H_t x + ridge x: per block of tuples, x gathered to the slots (small enough to stay
            in cache) and one batched (k, k) @ (k, b) matmul; the slot values summed into items by the
            scatter matrix.
        """
        k, b = self.slots.shape[1], x.shape[1]
        size = self.n_tuples * k * b
        y = (np.empty(size, dtype=np.float32) if out is None else out[:size]).reshape(self.n_tuples, k, b)
        block = max(64, (1 << 16) // b)
        xs = np.empty((min(block, self.n_tuples), k, b), dtype=np.float32)
        for s in range(0, self.n_tuples, block):
            e = min(s + block, self.n_tuples)
            part = np.take(x, self.slots[s:e], axis=0, out=xs[: e - s])
            ys = np.matmul(self.blocks[s:e], part, out=y[s:e])
            ys *= w[s:e, None, :]
        total = self.to_items(y)
        total += np.float32(self.ridge) * x
        return total


CHUNK_BYTES = 6e8  # resamples solved together: their (T, k, b) slot values and (n, b) vectors in about this much float32
CHUNK_SMALL = 1.6e8  # unless all the resamples fit in this: then solved at once (a release of 1000 items: 6 MB)
CHUNK_MAX = 32  # and at most this many: the batched products gain little beyond, the memory grows (1e5 items: 745 -> 1049 MB at 83)


def newton_draws(
    coded: Coded,
    start: NDArray[np.float64],
    n_boot: int,
    rng: np.random.Generator,
    bias_resamples: int = 4,
    anchor: NDArray[np.bool_] | None = None,
    ridge: float = RIDGE,
) -> tuple[NDArray[np.float32], float]:
    """Bootstrap refits over tuples by one Newton step from the full fit, all resamples at once.

    Parameters
    ----------
    coded : the judgments, coded (`fsb.bws.coded.Coded`).
    start : (n,) the full fit's utilities.
    n_boot : resamples.
    rng : the seeded generator drawing the tuple counts.
    bias_resamples : resamples on which a second Newton step measures the stretch.
    anchor : items each draw is centred on (default: all).
    ridge : the full fit's prior precision (the resamples are refitted with the same prior).

    Returns
    -------
    (draws, stretch)
        draws (n_boot, n): for tuple counts w, u_r = u - H_r^{-1} g_r with g_r = sum_t (w_t - 1) s_t (the
        full fit's gradient is 0) and H_r = sum_t w_t H_t (each resample's own information: items drawn
        less often are less certain), centred on the mean of the `anchor` items it holds, NaN where an item
        is absent, and scaled by 1 + c. A full refit also stretches the scale a little (the ML fit's outward
        bias, about 5% at 24 judgments an item); a second Newton step on `bias_resamples` resamples
        measures that stretch c (slope of the second step on u, over the `anchor` items). The draws of
        `NewtonChunks`, kept whole (`bootstrap_intervals` keeps only their tails: `Tails`).
    """
    draws = np.empty((n_boot, coded.n_items), dtype=np.float32)
    chunks = NewtonChunks(coded, start, n_boot, rng, bias_resamples, anchor, ridge)
    s = 0
    for part in chunks:
        draws[s : s + part.shape[0]] = part
        s += part.shape[0]
    stretch = chunks.stretch
    draws *= np.float32(1.0 + stretch)
    return draws, stretch


class NewtonChunks:
    """The draws of `newton_draws` before the stretch, b resamples at a time: iterating yields (b, n) float32.

    b is as many resamples as fit `CHUNK_BYTES` (at 1e6 items the whole (n_boot, n) draws were 800 MB);
    `stretch` is final once the chunks holding the first `bias_resamples` are done (read it after the
    loop). The resamples are drawn from `rng` one after the other, so the draws depend on the chunk
    size only through the solver's tolerance.

    Parameters
    ----------
    coded, start, n_boot, rng, bias_resamples, anchor, ridge : as `newton_draws`.
    """

    def __init__(self, coded, start, n_boot, rng, bias_resamples=4, anchor=None, ridge=RIDGE) -> None:
        self.coded, self.start, self.n_boot, self.rng, self.bias = coded, start, n_boot, rng, bias_resamples
        self.ridge = ridge
        self.anchor = np.ones(coded.n_items, dtype=bool) if anchor is None else anchor
        self.stretch = 0.0

    def __iter__(self):
        coded, start, rng, n = self.coded, self.start, self.rng, self.coded.n_items
        counts = maxdiff.tuple_counts(coded.design, coded.best, coded.worst, coded.tuple_index, n)
        pieces = Resamples(start, counts, n, self.ridge)
        n_tuples, k = pieces.slots.shape
        per_resample = 4 * (n_tuples * k + 10 * n)
        chunk = max(1, min(self.n_boot, CHUNK_MAX, int(CHUNK_BYTES // per_resample)))
        if self.n_boot * per_resample <= CHUNK_SMALL:  # a small study: all at once, as before the chunks (same solves)
            chunk = self.n_boot
        chunk -= chunk % 8 if chunk > 8 else 0  # the batched matmul on a multiple of 8 columns (1e6 items: 6 took 1.2-1.3x the CPU of 8)
        scratch = np.empty(n_tuples * k * chunk, dtype=np.float32)
        per_tuple = counts.n.astype(np.float32)
        counts = None  # rebuilt for the second steps after the solve: held through it, 216 MB of the peak at 1e6
        slopes: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []
        for s in range(0, self.n_boot, chunk):
            b = min(chunk, self.n_boot - s)
            w = np.empty((n_tuples, b), dtype=np.float32)
            for r in range(b):
                w[:, r] = np.bincount(rng.integers(0, n_tuples, size=n_tuples), minlength=n_tuples)
            y = scratch[: n_tuples * k * b].reshape(n_tuples, k, b)
            np.copyto(y, (w * per_tuple[:, None])[:, None, :])
            seen = pieces.to_items(y) > 0
            np.multiply(pieces.block_diag[:, :, None], w[:, None, :], out=y)
            diag = pieces.to_items(y) + np.float32(self.ridge)
            np.multiply(pieces.g[:, :, None], (w - 1.0)[:, None, :], out=y)
            rhs = pieces.to_items(y)
            np.negative(rhs, out=rhs)
            rhs[~seen] = 0.0
            w_of = _columns_of(w)
            step = pcg(lambda x, cols, w_of=w_of: pieces.hessian_times(x, w_of(cols), scratch), rhs, diag)
            del rhs
            r = min(b, self.bias - len(slopes))
            if r > 0:
                rhs2 = _second_rhs(coded, start, step[:, :r], w[:, :r], seen[:, :r], self.ridge)
                slopes += _second_steps(start, rhs2, w[:, :r], seen[:, :r], diag[:, :r], pieces, self.anchor, scratch)
                del rhs2
                self.stretch = _stretch(slopes)
            u = step.astype(np.float64)  # in place from here: (n, b) float64 temporaries were the peak at 1e6
            del step
            u += start[:, None]
            u[~seen] = np.nan
            yield centred(u, seen & self.anchor[:, None]).T.astype(np.float32)


def _stretch(slopes: list[tuple[NDArray[np.float64], NDArray[np.float64]]]) -> float:
    """The least-squares slope of the second Newton steps on the centred utilities (0 without any)."""
    slopes = [pair for pair in slopes if pair[0].size]
    x = np.concatenate([a for a, _ in slopes]) if slopes else np.zeros(1)
    y = np.concatenate([b for _, b in slopes]) if slopes else np.zeros(1)
    return float(x @ y / (x @ x)) if x @ x > 0 else 0.0


WEIGHT_SLICE = 1 << 18  # tuples weighted at a time for the second steps' gradients


def _second_rhs(coded: Coded, start, steps, w, seen, ridge: float = RIDGE) -> NDArray[np.float32]:
    """For each column of the first Newton steps (n, r) (resample weights w (T, r)): minus the gradient of the
    resample's NLL at start + step, 0 at items it lacks, (n, r) float32. The tuple counts are built here and
    dropped on return (216 MB at 1e6 items, not held through the solves) and weighted `WEIGHT_SLICE` tuples
    at a time (a whole weighted copy was another 200 MB at the peak); one slice is the whole-array sum."""
    n = coded.n_items
    counts = maxdiff.tuple_counts(coded.design, coded.best, coded.worst, coded.tuple_index, n)
    n_tuples = counts.n.size
    rhs = np.empty(steps.shape, dtype=np.float32)
    for r in range(steps.shape[1]):
        u, wr = start + steps[:, r], w[:, r].astype(np.float64)
        if n_tuples <= WEIGHT_SLICE:
            _, g1 = maxdiff.tuple_nll(u, counts.weighted(wr), ridge)
        else:
            g1 = ridge * u
            for s in range(0, n_tuples, WEIGHT_SLICE):
                t = slice(s, s + WEIGHT_SLICE)
                part = TupleCounts.of(counts.slots[:, t], counts.n[t] * wr[t], counts.nb[:, t] * wr[t], counts.nw[:, t] * wr[t], n)
                g1 += maxdiff.tuple_nll(u, part, 0.0)[1]
        rhs[:, r] = -np.where(seen[:, r], g1, 0.0)
    return rhs


def _second_steps(start, rhs, w, seen, diag, pieces, anchor, scratch) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """For each column of the second steps' right-hand sides (n, r) (`_second_rhs`; resample weights w (T, r)):
    (centred u, centred second Newton step) over the anchor items the resample holds, for the stretch; the r
    second steps solved together. One pair per column (empty where the resample holds no anchor item)."""
    w_of = _columns_of(w)
    second = pcg(lambda x, cols: pieces.hessian_times(x, w_of(cols), scratch), rhs, diag).astype(np.float64)
    pairs = []
    for r in range(rhs.shape[1]):
        on = seen[:, r] & anchor
        pair = (start[on] - start[on].mean(), second[on, r] - second[on, r].mean()) if on.any() else (np.zeros(0), np.zeros(0))
        pairs.append(pair)
    return pairs


def centred(u: NDArray[np.floating], on: NDArray[np.bool_]) -> NDArray[np.floating]:
    """Each column of u minus its mean over the rows marked `on`, in place: the draws' common frame (the
    logit fixes utilities only up to a shift), shared by the Newton and the full refits.

    Parameters
    ----------
    u : (n, R) utilities, one column per resample (changed in place).
    on : (n, R) the rows each column's mean is taken over.

    Returns
    -------
    (n, R)
        u itself; all NaN in a column with no row `on`.
    """
    count = on.sum(axis=0)
    total = np.add.reduce(u, axis=0, where=on, initial=0.0)
    u -= np.divide(total, count, out=np.full(count.shape, np.nan), where=count > 0)
    return u
