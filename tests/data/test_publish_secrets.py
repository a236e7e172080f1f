"""Issue 20 (secrets): `fsb publish` and `fsb diff` printed a Hub token that a server echoed base64-encoded in
its error, and huggingface_hub's retry warnings printed an `--endpoint` URL's credentials six times. Real
client, real subprocesses: the fake Hub (tests/_fake_hub.py) and a hostile server (tests/_echo_server.py)
on 127.0.0.1. Each test failed on main before issue 20's fix.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsb.data.dataset import build_dataset
from tests._echo_server import EchoServer
from tests._fake_hub import FakeHub
from tests._support import make_raw
from tests.data.test_publish import REPO, TOKEN, error_line, fsb_publish, hub_env, seed_release
from tests.generate.test_generations_secrets import assert_nowhere

B64_TOKEN = base64.b64encode(TOKEN.encode()).decode()


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two small builds (as tests/data/test_publish.py makes them)."""
    root = tmp_path_factory.mktemp("leak-builds")
    out = {}
    for name, n, seed in (("v1", 12, 0), ("v2", 16, 1)):
        g, a = make_raw(root / f"raw-{name}", n=n, seed=seed)
        out[name] = build_dataset(g, a, root / name / "fifty_shades_of_bias", record=False, hub_id=REPO).out
    return out


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub(TOKEN) as h:
        yield h


def fsb_diff(env: dict[str, str], home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "fsb", "diff", *args]
    return subprocess.run(cmd, env=env, cwd=home, capture_output=True, text=True, timeout=180, check=False)


def test_publish_never_prints_a_token_the_hub_echoes_base64_encoded(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    """Main printed `fsb publish: error: ... token aGZfZnNi...` (the token, base64-encoded)."""
    hub.inject("whoami", 400, f"token {B64_TOKEN} is not valid here; urlsafe {base64.urlsafe_b64encode(b'x' + TOKEN.encode()).decode()}")
    proc = fsb_publish(hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0")
    assert proc.returncode == 2
    line = error_line(proc)
    assert "checking the token (whoami) failed" in line and "token *** is not valid here; urlsafe ***" in line
    assert_nowhere(TOKEN, proc.stdout + proc.stderr)
    assert hub.writes() == []


def test_diff_never_prints_a_token_the_hub_echoes_base64_encoded(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    seed_release(hub, builds["v1"])
    hub.inject("tree", 400, f"no such revision for token {B64_TOKEN}")
    proc = fsb_diff(hub_env(hub, tmp_path), tmp_path, f"{REPO}@v1.0.0", str(builds["v2"]))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "no such revision for token ***" in proc.stderr
    assert_nowhere(TOKEN, proc.stdout + proc.stderr)


def test_endpoint_credentials_are_not_printed_by_the_clients_retry_warnings(builds: dict[str, Path], tmp_path: Path) -> None:
    """Main printed `HTTP Error 429 thrown while requesting GET http://mirror:EndpointSecret42xyz@...` six times
    (huggingface_hub's retry warnings), then once more in the error, and the echoed Basic header base64-encoded.
    Now the credentials are printed nowhere (and the retry warnings are held back behind the one error line)."""
    with EchoServer(other_status=429) as server:  # 429 with Retry-After: 0, so the client's five retries are quick
        endpoint = server.url.replace("http://", "http://mirror:EndpointSecret42xyz@")
        env = _offline_env(tmp_path)
        proc = fsb_diff(env, tmp_path, "org/name@v1.0.0", str(builds["v2"]), "--endpoint", endpoint)
        basic = [auth for _, _, auth in server.requests]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    # The client's retry warnings are held back now (the error comes first and alone); whatever is printed
    # of them names the endpoint without its credentials.
    retries = [line for line in proc.stderr.splitlines() if "thrown while requesting" in line]
    assert all("http://***@127.0.0.1" in line for line in retries)
    assert proc.stderr.count("EndpointSecret42xyz") == 0
    assert_nowhere("EndpointSecret42xyz", proc.stdout + proc.stderr)
    assert basic and all(a == "Basic " + base64.b64encode(b"mirror:EndpointSecret42xyz").decode() for a in basic)  # still sent


def _offline_env(home: Path) -> dict[str, str]:
    """The test session's environment without HF_* settings, online (the client must reach 127.0.0.1)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1", HF_HOME=str(home / "hf-home"))
    return env


def test_publish_prints_the_plan_and_result_without_endpoint_credentials() -> None:
    """The plan line `publish ... to {endpoint}/datasets/...` and the commit URL printed an --endpoint's user info."""
    from fsb.data.publish import LocalBuild, PublishPlan, PublishResult

    endpoint = "https://mirror:EndpointSecret42xyz@hub.example.com"
    build = LocalBuild(folder=Path("build"), files=(), fingerprint="f" * 64, configs={})
    plan = PublishPlan(
        repo_id=REPO, version="1.0.0", tag="v1.0.0", endpoint=endpoint, build=build, create_repo=True, private=False,
        parent_commit=None, add=(), unchanged=(), delete=(), latest_tag=None, has_token=True,
    )  # fmt: skip
    commit_url = f"{endpoint}/datasets/{REPO}/commit/abc?token=zzzzzz"
    result = PublishResult(plan, dry_run=False, commit_oid="abc", commit_url=commit_url, committed=True, created_repo=True)
    text = "\n".join([*plan.lines(), *result.lines()])
    assert f"to https://***@hub.example.com/datasets/{REPO} as v1.0.0" in text
    assert f"commit abc https://***@hub.example.com/datasets/{REPO}/commit/abc?token=***" in text
    assert_nowhere("EndpointSecret42xyz", text)


@pytest.mark.parametrize("endpoint", ["http://[::1:SECRETabc123/x", "ftp://u:SECRETabc123@h/", "http://h:0/"])
def test_an_endpoint_that_is_no_http_url_is_refused_before_the_client_reads_it(endpoint: str, tmp_path: Path) -> None:
    """`fsb diff --endpoint 'http://[::1:SECRET'` ended in huggingface_hub's traceback (exit 1); publish and diff
    now refuse such an endpoint in one line that names it without credentials."""
    from tests._support import run_fsb

    for args in (("diff", "org/a@v1", str(tmp_path)), ("publish", str(tmp_path), "--repo-id", "org/a", "--version", "1.0.0", "--dry-run")):
        proc = run_fsb(*args, "--endpoint", endpoint)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "not an http(s) URL" in proc.stderr and "SECRETabc123" not in proc.stderr
