"""Issue 8's kill loop: `fsb build` into an existing build, SIGKILLed at random moments (half at any time,
half just after its staging folder appears), alternating between two builds with different data.
After every kill the folder is one complete build; after one more successful build no stage of that
target is left."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fifty_shades_of_bias as spec
from fsb.data.dataset import is_build_folder

KILLS = 24


def _command(generations: Path, annotations: Path, out: Path) -> list[str]:
    args = ["build", "--generations", str(generations), "--annotations", str(annotations), "--out", str(out), "--trials", "2"]
    return [sys.executable, "-m", "fsb", *args, "--no-record"]


def _stages(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith((f".{name}.staging-", f".{name}.old-")))


def _complete(out: Path) -> str:
    """The build's fingerprint, after checking the folder is exactly one build: stats.json's fingerprint
    matches the data files, nothing else is there, and the card names those very files."""
    assert is_build_folder(out), sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    card = (out / "README.md").read_text(encoding="utf-8")
    for parquet in out.glob("data/*/*.parquet"):
        assert parquet.relative_to(out).as_posix() in card, "the card and the data files come from one build"
    return json.loads((out / "stats.json").read_text(encoding="utf-8"))["fingerprint"]


@pytest.mark.slow
def test_kill_loop_never_leaves_a_mixed_folder_or_a_stage(release: Path, tmp_path: Path) -> None:
    generations, annotations = release / "FSB" / "FSB_text.csv", release / "FSB" / "fsb-tuples-annotations.csv"
    variant = tmp_path / "fewer-judgments.csv"  # a second, different build: the release minus its last 200 judgments
    variant.write_text("".join(annotations.read_text(encoding="utf-8").splitlines(keepends=True)[:-200]), encoding="utf-8")
    parent = tmp_path / "builds"
    parent.mkdir()
    out = parent / "ds"
    fingerprints = set()
    started = time.monotonic()
    for inputs in ((generations, variant), (generations, annotations)):
        subprocess.run(_command(*inputs, out), check=True, capture_output=True)
        fingerprints.add(_complete(out))
    duration = (time.monotonic() - started) / 2
    assert len(fingerprints) == 2

    seed = int(os.environ.get("FSB_KILL_SEED", "0"))
    rng = random.Random(seed)
    left_stages = 0
    for i in range(KILLS):
        proc = subprocess.Popen(
            _command(generations, (variant, annotations)[i % 2], out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if i % 2:
            time.sleep(rng.uniform(0, duration))
        else:  # wait for the write phase, then kill within it
            deadline = time.monotonic() + 10 * duration + 5
            while proc.poll() is None and time.monotonic() < deadline and not any(".staging-" in n for n in os.listdir(parent)):
                time.sleep(0.0005)
            time.sleep(rng.uniform(0, 0.02))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _complete(out) in fingerprints, f"kill {i} (seed {seed})"
        left_stages += bool(_stages(parent, "ds"))
    print(f"{KILLS} kills, {left_stages} left a staging folder behind (seed {seed})")

    done = subprocess.run(_command(generations, annotations, out), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert _stages(parent, "ds") == [], "the next build sweeps every stale stage of its target"
    assert sorted(p.name for p in parent.iterdir()) == ["ds"]
    assert _complete(out) in fingerprints
    assert left_stages >= 1, "no kill landed in the write phase: the loop did not test what it claims"
    default = spec.load("default", source=out)[spec.SPLIT]
    judgments = spec.load("annotations", source=out)[spec.SPLIT]
    assert default.num_rows == 1000 and judgments.num_rows == 5360
