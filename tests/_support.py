"""Shared test helpers: small synthetic inputs (a consistent generations file and judgments file, simulated
best-worst judgments) and `run_fsb`, the one way a test runs the `fsb` command (in process by default)."""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

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


# --- the one way tests run the `fsb` command -------------------------------------------------------------

# Variables that libraries read once, at import (huggingface_hub's endpoint and offline flags, datasets'
# cache, tokenizers' threads, ...): a run that needs other values than this process has gets a process of
# its own, because in this one those libraries may already be imported with the old values.
_IMPORT_TIME_ENV = (
    *("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "DATASETS_", "TOKENIZERS_", "TORCH"),
    *("OMP_", "MKL_", "OPENBLAS_", "PYTHON", "LC_", "LANG"),
)
_SIGNALS = ("SIGINT", "SIGTERM")


def simulated_study(n: int = 90, seed: int = 3) -> tuple[Any, np.ndarray]:
    """A simulated best-worst study coded as `fsb.bws.coded.Coded` (a 2N design of n items, 3 judgments a
    tuple from the logit on normal utilities), and its MaxDiff fit's utilities: the bootstrap tests' input."""
    from fsb import bws
    from fsb.bws import maxdiff
    from fsb.bws.coded import Coded

    truth = np.random.default_rng(seed).normal(size=n)
    design = bws.bws_design(n, seed=seed)
    ti, best, worst = simulate_bws(design, truth, 3, seed=seed + 1)
    coded = Coded(np.arange(n), design[ti], design, ti, best, worst)
    return coded, maxdiff.fit_maxdiff(design, best, worst, ti, n).utility


def run_fsb(
    *args: object,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    in_process: bool = True,
    timeout: float | None = None,
    input: str | None = None,
    preexec_fn: Callable[[], Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `fsb ARGS...` and return what a subprocess would: return code, stdout and stderr as text.

    In process (the default) it calls `fsb.cli.main([...])` with stdout and stderr captured, the working
    folder `cwd` and the environment `env` (the whole environment, as for `subprocess.run`; None keeps this
    process's) set for the call and restored after it, as are logging's handlers and levels, warning
    filters, the SIGINT/SIGTERM handlers and fsb's `functools.cache` caches, so that no state leaks from
    one test to the next. A `SystemExit` (argparse's usage errors) gives its code; an unexpected exception
    gives return code 1 and its traceback on stderr, as the interpreter would print it.

    A real `python -m fsb` subprocess runs instead when `in_process` is False (tests of exit codes, broken
    pipes, signals and the console script itself), when `preexec_fn` is given, or when `env` changes a
    variable that a library reads at import (`HF_*`, `TRANSFORMERS_*`, ...: see `_IMPORT_TIME_ENV`).
    `timeout` applies to subprocesses only.

    Parameters
    ----------
    *args
        The command line after `fsb`; each is converted with `str`.
    cwd
        The working folder of the command (None: the current one).
    env
        The command's whole environment (None: this process's).
    in_process
        False forces a real subprocess.
    timeout
        Seconds before a subprocess is killed (`subprocess.TimeoutExpired`).
    input
        Text on the command's standard input (None: an empty one in process, inherited in a subprocess).
    preexec_fn
        Run in the child before `fsb` starts (e.g. resource limits); forces a subprocess.

    Returns
    -------
    subprocess.CompletedProcess[str]
        `args` is the full command line (`[sys.executable, "-m", "fsb", ...]`) either way.
    """
    argv = [str(a) for a in args]
    cmd = [sys.executable, "-m", "fsb", *argv]
    if not in_process or preexec_fn is not None or (env is not None and _changes_import_time_env(env)):
        return subprocess.run(
            cmd, cwd=cwd, env=None if env is None else dict(env), capture_output=True, text=True, timeout=timeout,
            input=input, preexec_fn=preexec_fn, check=False,
        )  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    with _isolated(cwd, env, io.StringIO(input or "")), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        from fsb.cli import main

        try:
            code = main(argv)
        except SystemExit as e:
            code = _exit_code(e.code, err)
        except BaseException:
            traceback.print_exc(file=err)
            code = 1
    return subprocess.CompletedProcess(cmd, int(code or 0), out.getvalue(), err.getvalue())


def _changes_import_time_env(env: Mapping[str, str]) -> bool:
    keys = {k for k in (*env, *os.environ) if k.startswith(_IMPORT_TIME_ENV)}
    return any(env.get(k) != os.environ.get(k) for k in keys)


def _exit_code(code: object, err: io.StringIO) -> int:
    """The return code of `sys.exit(code)` as the interpreter gives it: None is 0, a message is printed and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1


@contextlib.contextmanager
def _isolated(cwd: str | os.PathLike[str] | None, env: Mapping[str, str] | None, stdin: io.StringIO) -> Iterator[None]:
    """The process-wide state a command may change, saved before and restored after it."""
    saved_env, saved_cwd, saved_argv, saved_stdin = dict(os.environ), os.getcwd(), sys.argv[:], sys.stdin
    saved_signals = {name: signal.getsignal(getattr(signal, name)) for name in _SIGNALS}
    saved_logging = _logging_state()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv, sys.stdin = ["fsb"], stdin
        with warnings.catch_warnings():
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.argv, sys.stdin = saved_argv, saved_stdin
        for name, handler in saved_signals.items():
            signal.signal(getattr(signal, name), handler)
        _restore_logging(saved_logging)
        _clear_fsb_caches()


def _logging_state() -> dict[str, tuple[list[logging.Handler], int, bool, bool]]:
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger))]
    return {lg.name: (list(lg.handlers), lg.level, lg.disabled, lg.propagate) for lg in loggers}


def _restore_logging(saved: dict[str, tuple[list[logging.Handler], int, bool, bool]]) -> None:
    """Put back every logger's handlers, level and flags; loggers made during the run lose the handlers they
    got (which may point at the captured streams)."""
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger))]
    for lg in loggers:
        handlers, level, disabled, propagate = saved.get(lg.name, ([], logging.NOTSET, False, True))
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.disabled, lg.propagate = disabled, propagate
    logging.disable(logging.NOTSET)


def _clear_fsb_caches() -> None:
    """Empty every `functools.cache` of fsb's modules (results read by path: a later test may reuse a path)."""
    for name, module in list(sys.modules.items()):
        if name == "fsb" or name.startswith("fsb."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == name:
                    value.cache_clear()
