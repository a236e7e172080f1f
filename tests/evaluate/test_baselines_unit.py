"""Issue 20: a baseline's scores and their provenance are one unit (fsb.core.output.write_unit). A `fsb
baseline` killed (SIGKILL) at every step of its write, and at random instants inside it, leaves the old
scores beside the old provenance or the new beside the new, never lexicon scores beside provenance that
says "mean"."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fsb.core.output import recover_units

# Armed only once the baseline is computed and run_baseline calls write_unit: the n-th os.replace, os.fsync or
# os.unlink after that kills the process (argv[1] = n); with n = 0 a timer kills it argv[2] seconds after.
KILLER = """
import os, signal, sys, threading
n, delay, calls, armed = int(sys.argv[1]), float(sys.argv[2]), [0], [False]
def step(real):
    def wrapped(*a, **k):
        if armed[0]:
            calls[0] += 1
            if calls[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)
    return wrapped
os.replace, os.fsync, os.unlink = step(os.replace), step(os.fsync), step(os.unlink)
import fsb.evaluate.baselines as b
real_unit = b.write_unit
def unit(*a, **k):
    armed[0] = True
    if n == 0:
        threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
    return real_unit(*a, **k)
b.write_unit = unit
from fsb.cli.app import main
sys.exit(main(sys.argv[3:]))
"""
FILES = ("b.csv", "b.csv.json")


def _run(folder: Path, n: int, delay: float, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-c", KILLER, str(n), str(delay), "baseline", *args, "--out", str(folder / "b.csv")]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, timeout=600)


def _state(folder: Path) -> dict[str, bytes]:
    recover_units(folder)  # what the next fsb run does before it reads or writes here
    return {f: (folder / f).read_bytes() for f in FILES if (folder / f).exists()}


@pytest.mark.slow
def test_a_killed_baseline_leaves_scores_and_provenance_both_old_or_both_new(release_dataset: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bl"
    folder.mkdir()
    data = ["--dataset", str(release_dataset)]
    assert _run(folder, -1, 0, "mean", *data).returncode == 0
    old, old_folder = _state(folder), _copy(folder, tmp_path / "old")
    assert _run(folder, -1, 0, "lexicon", *data).returncode == 0
    new = _state(folder)
    assert b'"baseline": "mean"' in old["b.csv.json"] and b'"baseline": "lexicon"' in new["b.csv.json"]
    assert old["b.csv"] != new["b.csv"]
    assert _run(folder, -1, 0, "mean", *data).returncode == 0 and _state(folder) == old
    assert _files(folder) == _files(old_folder), "a rerun of mean writes the same files, fsb's records too"
    kills = 0
    for n in range(1, 200):  # mean -> lexicon, killed at its n-th step
        proc = _run(folder, n, 0, "lexicon", *data)
        assert _state(folder) in (old, new), (n, proc.stderr[-500:])
        if proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, proc.stderr[-2000:]
            break
        kills += 1
        if kills <= 2:  # the next real run recovers and writes (checked twice; then the old folder is put back directly)
            assert _run(folder, -1, 0, "mean", *data).returncode == 0 and _state(folder) == old, "the next run recovers and writes"
        else:
            _restore(old_folder, folder)
    assert kills > 5, "every fsync, rename and unlink of the unit was a kill point"
    rng = random.Random(20)
    for _ in range(4):  # at random instants inside the write
        _run(folder, 0, rng.uniform(0, 0.05), "lexicon", *data)
        assert _state(folder) in (old, new)
        _restore(old_folder, folder)
    assert _run(folder, -1, 0, "mean", *data).returncode == 0 and _state(folder) == old


def _copy(folder: Path, to: Path) -> Path:
    """A copy of every file of `folder` (fsb's records too) at `to`."""
    shutil.copytree(folder, to)
    return to


def _files(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.is_file()}


def _restore(saved: Path, folder: Path) -> None:
    """`folder` exactly as `saved` (what a rerun of the old command writes, without its 2-second start)."""
    shutil.rmtree(folder)
    shutil.copytree(saved, folder)
