"""Which dataset is read: one order (explicit, $FSB_DATASET, ./fifty_shades_of_bias, the last build) for
`fifty_shades_of_bias.locate()`/`load()`, `datasets.load_dataset("fifty_shades_of_bias")` and the lm-eval
task, so one name never means two datasets; and each reader can say which one (path and fingerprint)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import datasets
import pytest

import fifty_shades_of_bias as spec
from fsb.data.dataset import build_dataset
from fsb.evaluate import fewshot
from tests._support import make_raw


@pytest.fixture
def two_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """./fifty_shades_of_bias in the working folder (200 sentences) and a last build elsewhere (24)."""
    g, a = make_raw(tmp_path / "raw-a", n=200, seed=5)
    here = tmp_path / "work" / spec.NAME
    build_dataset(g, a, here, record=False)
    g, a = make_raw(tmp_path / "raw-b", n=24, seed=2)
    elsewhere = tmp_path / "elsewhere" / "build"
    build_dataset(g, a, elsewhere)  # recorded as the last build
    monkeypatch.chdir(here.parent)
    return here, elsewhere


def test_the_local_folder_comes_before_the_last_build_everywhere(two_builds: tuple[Path, Path]) -> None:
    here, elsewhere = two_builds
    assert spec.last_build() == elsewhere.resolve()
    assert spec.locate() == str(here.resolve())
    assert spec.load()[spec.SPLIT].num_rows == 200
    assert datasets.load_dataset(spec.NAME)[spec.SPLIT].num_rows == 200, "datasets itself reads the same folder"
    task = fewshot.load()
    assert task.fsb_source["path"] == str(here.resolve())
    assert task.fsb_source["fingerprint"] == json.loads((here / "stats.json").read_text())["fingerprint"]


def test_explicit_then_environment_first_and_the_last_build_last(two_builds: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    here, elsewhere = two_builds
    assert spec.locate(str(elsewhere)) == str(elsewhere.resolve())
    monkeypatch.setenv("FSB_DATASET", str(elsewhere))
    assert spec.locate() == str(elsewhere.resolve())
    assert spec.locate(str(here)) == str(here.resolve()), "an explicit source beats $FSB_DATASET"
    monkeypatch.delenv("FSB_DATASET")
    monkeypatch.chdir(here.parent.parent)  # no ./fifty_shades_of_bias here
    assert spec.locate() == str(elsewhere.resolve())


def test_provenance_names_the_folder_and_its_content(two_builds: tuple[Path, Path]) -> None:
    here, _ = two_builds
    info = spec.provenance(spec.locate())
    recorded = json.loads((here / "stats.json").read_text())["fingerprint"]
    assert info == {"path": str(here.resolve()), "fingerprint": recorded, "fingerprint_from": "data files"}
    assert spec.describe(info) == f"{here.resolve()} (fingerprint {recorded[:16]})"
    (parquet,) = (here / "data" / "default").glob("*.parquet")
    parquet.write_bytes(parquet.read_bytes() + b"\0")  # changed after the build: the fingerprint says so
    assert spec.provenance(str(here))["fingerprint"] != recorded


# --- issue 20: `fetch-release --url` never echoes the URL's credentials ------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://me:UrlSecret0987654@{host}/{{commit}}/{{path}}", "http://***@{host}/"),
        ("http://{host}/{{commit}}/{{path}}?token=UrlSecret0987654&x=1", "?token=***&x=1"),
        ("http://UrlSecret0987654@{host}/{{commit}}/{{path}}", "http://***@{host}/"),
        ("http://{host}/x;access_token=UrlSecret0987654/{{commit}}/{{path}}", "/x;access_token=***/"),  # a matrix parameter
        ("http://{host}/{{commit}}/{{path}}#UrlSecret0987654", "#***"),  # a fragment is never printed
    ],
)
def test_fetch_release_never_echoes_url_credentials(url: str, shown: str, tmp_path: Path) -> None:
    """Main printed `http://me:UrlSecret0987654@127.0.0.1:1/...: download failed` (and could not use the user info at all)."""
    from tests._echo_server import EchoServer
    from tests.generate.test_generate import fsb
    from tests.generate.test_generations_secrets import assert_nowhere

    with EchoServer(other_status=404) as server:
        host = server.url.removeprefix("http://")
        proc = fsb("fetch-release", "--dest", tmp_path / "release", "--url", url.format(host=host))
        sent = [auth for _, _, auth in server.requests]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("fsb fetch-release: error: http://") and "download failed: HTTP Error 404" in proc.stderr
    assert shown.format(host=host) in proc.stderr
    assert_nowhere("UrlSecret0987654", proc.stdout + proc.stderr)
    assert len(sent) == 1
    if "@" not in url:
        assert sent[0] == ""
    else:  # the user info travels as Basic auth, as curl and browsers send it
        user = "me:UrlSecret0987654" if "me:" in url else "UrlSecret0987654:"
        assert sent[0] == "Basic " + base64.b64encode(user.encode()).decode()
    assert not (tmp_path / "release" / "FSB").exists()


def test_fetch_release_refuses_a_bad_url_template_in_one_line(tmp_path: Path) -> None:
    from tests.generate.test_generate import fsb

    proc = fsb("fetch-release", "--dest", tmp_path / "r", "--url", "http://127.0.0.1:9/{nope}?key=UrlSecret0987654")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "not a URL template with {commit} and {path}" in proc.stderr and "key=***" in proc.stderr
    assert "UrlSecret0987654" not in proc.stderr


def test_fetch_release_prints_an_unparseable_url_as_its_scheme_only(tmp_path: Path) -> None:
    """Main printed `http://[::1:UrlSecret0987654/{path}` in full after 'Invalid IPv6 URL'."""
    from tests.generate.test_generate import fsb
    from tests.generate.test_generations_secrets import assert_nowhere

    proc = fsb("fetch-release", "--dest", tmp_path / "r", "--url", "http://[::1:UrlSecret0987654/{commit}/{path}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("fsb fetch-release: error: http://***") and len(proc.stderr.splitlines()) == 1
    assert_nowhere("UrlSecret0987654", proc.stdout + proc.stderr)
    assert not (tmp_path / "r").exists()
