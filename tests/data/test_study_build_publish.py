"""A non-FSB study (string ids, control rows, contact-like annotator ids) built by `build_study`, published with
`fsb publish` to the fake Hub (tests/_fake_hub.py, the real huggingface_hub client over HTTP) and loaded back with
`datasets.load_dataset` at its tag; and a failing Hub reported in one line, not after 11 retry warnings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fsb.data.study_build import build_study
from tests._fake_hub import FakeHub
from tests.data.study_fixture import EMAIL, make_study
from tests.data.test_publish import TOKEN, error_line, fsb_publish, hub_env

pytestmark = [pytest.mark.server]

REPO = "fsb-org/offensiveness-sim"

LOAD = r"""
import json, sys
import datasets
ds = datasets.load_dataset(sys.argv[1], revision=sys.argv[2])["test"]
ann = datasets.load_dataset(sys.argv[1], "annotations", revision=sys.argv[2])["test"]
features = {k: getattr(v, "dtype", str(v)) for k, v in ds.features.items()}
print(json.dumps({"ids": list(ds["id"]), "columns": ds.column_names, "low": list(ds["score_ci_low"]), "features": features,
                  "n_ann": ann.num_rows, "annotators": sorted(set(ann["annotator"]))}))
"""


@pytest.fixture
def hub() -> Any:
    with FakeHub(TOKEN) as h:
        yield h


def test_a_study_is_published_and_loads_back_at_its_tag(hub: FakeHub, tmp_path: Path) -> None:
    paths = make_study(tmp_path / "raw", n=24)
    out = build_study(
        paths["judgments"], tmp_path / "offensiveness", items=paths["items"], study=paths["study"], invalid="count", hub_id=REPO
    ).out
    proc = fsb_publish(hub, tmp_path, str(out), "--repo-id", REPO, "--version", "1.0.0")
    assert proc.returncode == 0, proc.stderr
    assert "tag v1.0.0" in proc.stdout and "warning" not in proc.stderr, "the card names the Hub id: no warning"
    repo = hub.repo(REPO)
    assert "v1.0.0" in repo.tags
    # the commit and the tag are named after the study, not after FSB
    assert any(c.description.startswith("Offensiveness of comments (simulated) v1.0.0, published by fsb") for c in repo.commits.values())
    load = subprocess.run(
        [sys.executable, "-c", LOAD, REPO, "v1.0.0"],
        env=hub_env(hub, tmp_path, token=None),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert load.returncode == 0, load.stderr[-2000:]
    got = json.loads(load.stdout.strip().splitlines()[-1])
    items = pd.read_csv(paths["items"], dtype=str)
    assert sorted(got["ids"]) == sorted(items["id"]) and got["features"]["id"] == "string"
    assert {"text", "subreddit", "score_ci_low", "score_maxdiff_ci_high"} <= set(got["columns"])
    assert all(v is not None for v in got["low"])
    assert got["n_ann"] == len(pd.read_csv(paths["judgments"]))
    assert len(got["annotators"]) == 5 and all(a.startswith("anon-") for a in got["annotators"])
    published = b"".join(hub.files(REPO, "v1.0.0").values())
    assert EMAIL.encode() not in published
    card = hub.files(REPO, "v1.0.0")["README.md"].decode()
    assert f'load_dataset("{REPO}")' in card and "pretty_name: Offensiveness of comments (simulated)" in card


@pytest.mark.slow
def test_a_failing_hub_is_reported_in_one_line_not_after_retry_warnings(hub: FakeHub, tmp_path: Path) -> None:
    """Before: huggingface_hub's 5 retries printed 11 warning lines, then fsb's error. Now the error is the only line."""
    paths = make_study(tmp_path / "raw", n=16, control_rows=False)
    out = build_study(paths["judgments"], tmp_path / "b", items=paths["items"], hub_id="tester/x").out
    hub.inject("tree", status=503, times=20)
    proc = fsb_publish(hub, tmp_path, str(out), "--repo-id", "tester/x", "--version", "1.0.0")
    assert proc.returncode != 0
    assert "Retrying in" not in proc.stderr and "thrown while requesting" not in proc.stderr
    line = error_line(proc)
    assert proc.stderr.strip() == line, proc.stderr
    assert "503" in line and "was deleted again" in line
