"""Downloading an fsb build from the Hub (`fsb.data.download`): a release comes back byte for byte, a
revision that holds no fsb build is refused in one line, and an existing folder is never written into."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fsb.core.readers import InputError
from fsb.data.dataset import build_dataset
from fsb.data.download import download_build
from tests._fake_hub import FakeHub
from tests._support import make_raw, run_fsb

REPO = "org/fifty_shades_of_bias"


def _env(hub: FakeHub, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1", HF_HOME=str(home / "hf"))
    return env


def _diff(hub: FakeHub, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_fsb("diff", *args, env=_env(hub, home), cwd=home, timeout=120)


def test_an_existing_folder_is_refused_before_any_request(tmp_path: Path) -> None:
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me\n")
    with pytest.raises(InputError, match="already exists: give a new folder"):
        download_build(REPO, "v1.0.0", dest, endpoint="http://127.0.0.1:9")  # nothing listens there: no request was sent
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]


def test_a_release_downloads_whole_and_diffs_as_unchanged(tmp_path: Path) -> None:
    gens, ann = make_raw(tmp_path / "raw", n=12)
    folder = build_dataset(gens, ann, tmp_path / "build" / "fifty_shades_of_bias", record=False).out
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".fsb-seal.json"}
    with FakeHub(None) as hub:
        hub.add_repo(REPO)
        hub.repo(REPO).tags["v1.0.0"] = hub.push(REPO, files, title="Release v1.0.0")
        proc = _diff(hub, tmp_path, f"{REPO}@v1.0.0", str(folder), "--json")
        assert proc.returncode == 0, proc.stderr
        d = json.loads(proc.stdout)  # the downloaded release is the same build: same fingerprint, every sentence in common
        assert d["same_build"] is True and d["sentences"]["common"] == 12 and d["sentences"]["n_added"] == 0
        hub.push(REPO, {"NOTES.md": b"not a build\n"}, delete=tuple(files), title="someone else's")
        refused = _diff(hub, tmp_path, f"{REPO}@main", str(folder))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip() == f"fsb diff: error: {REPO} at main is not an fsb build (no card and stats.json written by `fsb build`)"
