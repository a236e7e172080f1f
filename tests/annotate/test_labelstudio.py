"""A real annotation-tool round trip: a Label Studio server (its own virtual environment, SQLite, 127.0.0.1)
gets the project `fsb annotate export --format label-studio` writes; three annotators sign up through its
web form and submit their choices through its REST API with their own tokens; its JSON export goes
through `fsb annotate import`, `fsb build` and `datasets.load_dataset`.

Label Studio's pins clash with this project's, so it lives in .venv-labelstudio (`make .venv-labelstudio/bin/.installed`,
which `make test` runs first; the fixture runs the same target when the venv is missing).
$FSB_LABEL_STUDIO may name another `label-studio` executable.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.cookiejar
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fsb.data.annotators import annotator_key, pseudonym
from tests._support import make_raw, run_fsb, write_csv
from tests._tiny_model import cached_folder

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LS_VENV = REPO / ".venv-labelstudio"
ADMIN_TOKEN = "fsb-test-admin-token-0123456789"


def _label_studio() -> Path:
    exe = os.environ.get("FSB_LABEL_STUDIO")
    if exe:
        return Path(exe)
    target = LS_VENV / "bin" / ".installed"
    if not target.exists():
        if not shutil.which("make"):
            pytest.fail("Label Studio's venv is missing and `make` is not there to create it: run `make .venv-labelstudio/bin/.installed`")
        subprocess.run(["make", "-C", str(REPO), ".venv-labelstudio/bin/.installed"], check=True, timeout=1800)
    return LS_VENV / "bin" / "label-studio"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    """A tiny JSON client for Label Studio's REST API (token auth), with a cookie jar for the web forms."""

    def __init__(self, base: str, token: str | None = None) -> None:
        self.base = base
        self.token = token
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def call(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with self.opener.open(req, timeout=120) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def sign_up(self, email: str, password: str) -> str:
        """Sign up through the web form (as a new annotator would), then fetch the account's API token."""
        self.opener.open(self.base + "/user/signup/", timeout=60).read()
        csrf = next(c.value for c in self.jar if c.name == "csrftoken")
        form = urllib.parse.urlencode({"csrfmiddlewaretoken": csrf, "email": email, "password": password}).encode()
        req = urllib.request.Request(self.base + "/user/signup/", data=form, headers={"Referer": self.base + "/user/signup/"})
        self.opener.open(req, timeout=60).read()
        self.token = self.call("GET", "/api/current-user/token")["token"]
        return self.token


ENV = {
    "DJANGO_DB": "sqlite",
    "LABEL_STUDIO_USERNAME": "admin@fsb.test",
    "LABEL_STUDIO_PASSWORD": "fsb-admin-password-1",
    "LABEL_STUDIO_USER_TOKEN": ADMIN_TOKEN,
    "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
    "LATEST_VERSION_CHECK": "false",
    "COLLECT_ANALYTICS": "false",
    "SENTRY_DSN": "",
}


@contextlib.contextmanager
def _server(exe: Path, data: Path) -> Iterator[str]:
    """`label-studio start` on 127.0.0.1 with its data in `data`; yields its URL once the admin's token answers."""
    port = _free_port()
    env = {**os.environ, **ENV, "LABEL_STUDIO_BASE_DATA_DIR": str(data)}
    log = open(data / "server.log", "a")  # noqa: SIM115 - closed below, after the server
    cmd = [str(exe), "start", "--no-browser", "--internal-host", "127.0.0.1", "--port", str(port), "--enable-legacy-api-token"]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=data)
    base = f"http://127.0.0.1:{port}"
    admin = Client(base, ADMIN_TOKEN)
    deadline = time.monotonic() + 600
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"label-studio exited with {proc.returncode}: {(data / 'server.log').read_text()[-3000:]}")
            try:
                admin.call("GET", "/api/current-user/whoami")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"label-studio did not answer within 600 s: {(data / 'server.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _initialised(exe: Path) -> Path:
    """A Label Studio data folder with its database created and the admin in it, made once per Label Studio
    version and settings and kept in the test cache (tests/_tiny_model.py, `cached_folder`): creating the
    database runs every Django migration (1-3 minutes), starting on a copy of it takes seconds. Every run
    starts the server on a fresh copy, so no state passes from one run to the next."""
    # the installed distribution's name and version (`label-studio --version` asks PyPI for the latest: it hangs offline)
    dists = sorted(p.name for p in exe.resolve().parent.parent.glob("lib/python*/site-packages/label_studio-*.dist-info"))
    version = " ".join(dists) or f"{exe.resolve()} {exe.resolve().stat().st_mtime_ns}"
    key = hashlib.sha256(json.dumps([version, ENV], sort_keys=True).encode()).hexdigest()[:24]

    def build(folder: Path) -> None:
        folder.mkdir()
        with _server(exe, folder):
            pass
        (folder / "server.log").unlink()

    return cached_folder(f"labelstudio-{key}", build)


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Label Studio server on 127.0.0.1 (SQLite in a temporary folder, no network calls), started on a copy
    of the cached initialised data folder; yields its URL and its log file."""
    exe = _label_studio()
    data = tmp_path_factory.mktemp("label-studio") / "data"
    shutil.copytree(_initialised(exe), data)
    with _server(exe, data) as base:
        yield base, data / "server.log"


def fsb(*args: str) -> subprocess.CompletedProcess[str]:
    return run_fsb(*args, timeout=600)


def test_label_studio_round_trip(label_studio: tuple[str, Path], tmp_path: Path) -> None:
    base, server_log = label_studio
    # A study: 12 sentences; the items for annotators come as a plain `id,text` list.
    gens, _ = make_raw(tmp_path / "raw", n=12)
    texts = pd.read_csv(gens)
    items = write_csv(tmp_path / "items.csv", ["id", "text"], texts[["uid", "response"]].values.tolist())
    design = tmp_path / "design.csv"
    proc = fsb("tuples", str(items), "--out", str(design), "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    project_dir = tmp_path / "ls"
    proc = fsb("annotate", "export", str(design), "--items", str(items), "--format", "label-studio", "--out", str(project_dir))
    assert proc.returncode == 0, proc.stderr
    config = (project_dir / "labeling_config.xml").read_text()
    tasks = json.loads((project_dir / "tasks.json").read_text())
    assert len(tasks) == 24

    admin = Client(base, ADMIN_TOKEN)
    project = admin.call("POST", "/api/projects", {"title": "fsb round trip", "label_config": config})
    assert project["label_config"] == config.strip(), "Label Studio accepted the exported config as it is"
    imported = admin.call("POST", f"/api/projects/{project['id']}/import", tasks)
    assert imported["task_count"] == 24
    listed = admin.call("GET", f"/api/tasks?project={project['id']}&page_size=100")["tasks"]
    assert sorted(t["data"]["tuple_id"] for t in listed) == list(range(24))

    # Three annotators sign up and judge as themselves: a consistent one (the higher id is more biased),
    # a noisy one, and one who skips (cancels) the first task and judges the rest consistently.
    rng = np.random.default_rng(0)
    users = {}
    for name in ("ann1", "ann2", "ann3"):
        client = Client(base)
        client.sign_up(f"{name}@fsb.test", f"{name}-password-123")
        users[name] = (client, client.call("GET", "/api/current-user/whoami")["id"])
    expected = []
    for task in sorted(listed, key=lambda t: t["id"]):
        shown = [task["data"][f"item{j}"] for j in range(1, 5)]
        for name, (client, uid) in users.items():
            if name == "ann3" and task["data"]["tuple_id"] == listed[0]["data"]["tuple_id"]:
                client.call("POST", f"/api/tasks/{task['id']}/annotations/", {"result": [], "was_cancelled": True})
                continue
            key = np.asarray(shown, dtype=float) + (rng.normal(0, 4, 4) if name == "ann2" else 0)
            best, worst = int(np.argmax(key)) + 1, int(np.argmin(key)) + 1
            result = [
                {"from_name": field, "to_name": "text1", "type": "choices", "value": {"choices": [str(pos)]}}
                for field, pos in (("best", best), ("worst", worst))
            ]
            made = client.call("POST", f"/api/tasks/{task['id']}/annotations/", {"result": result, "lead_time": 4.2})
            assert made["completed_by"] == uid
            expected.append((task["data"]["tuple_id"], str(uid), shown[best - 1], shown[worst - 1], made["created_at"]))

    export = tmp_path / "export.json"
    export.write_text(json.dumps(admin.call("GET", f"/api/projects/{project['id']}/export?exportType=JSON")))
    judgments = tmp_path / "judgments.csv"
    proc = fsb("annotate", "import", str(export), "--format", "label-studio", "--tuples", str(design), "--out", str(judgments))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["judgments"] == 71 and summary["cancelled_left_out"] == 1 and summary["annotators"] == 3

    got = pd.read_csv(judgments, dtype=str)
    assert list(got.columns) == ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem", "Annotator", "Timestamp"]
    assert sorted(zip(got["Annotator"], got["BestItem"].astype(int), got["WorstItem"].astype(int), got["Timestamp"])) == sorted(
        (who, best, worst, when) for _, who, best, worst, when in expected
    )
    assert all(datetime.fromisoformat(t.replace("Z", "+00:00")).tzinfo is not None for t in got["Timestamp"])
    shown_by_tuple = {t["data"]["tuple_id"]: [t["data"][f"item{j}"] for j in range(1, 5)] for t in tasks}
    first = got.iloc[0][["Item1", "Item2", "Item3", "Item4"]].astype(int).tolist()
    assert first in shown_by_tuple.values(), "items are kept in the order annotators saw them"

    # The snapshot export with completed_by expanded ({id, email, ...}): the same judgments, ids not emails.
    options = {"serialization_options": {"annotations__completed_by": {"only_id": False}}}
    snap = admin.call("POST", f"/api/projects/{project['id']}/exports/", options)
    for _ in range(120):
        if admin.call("GET", f"/api/projects/{project['id']}/exports/{snap['id']}")["status"] == "completed":
            break
        time.sleep(0.5)
    expanded = admin.call("GET", f"/api/projects/{project['id']}/exports/{snap['id']}/download?exportType=JSON")
    assert {type(a["completed_by"]) for t in expanded for a in t["annotations"]} == {dict}
    (tmp_path / "expanded.json").write_text(json.dumps(expanded))
    proc = fsb("annotate", "import", str(tmp_path / "expanded.json"), "--format", "label-studio", "--out", str(tmp_path / "j2.csv"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(pd.read_csv(tmp_path / "j2.csv", dtype=str).values.tolist()) == sorted(got.values.tolist())
    assert "@fsb.test" not in (tmp_path / "j2.csv").read_text()

    out = tmp_path / "fifty_shades_of_bias"
    proc = fsb("build", "--generations", str(gens), "--annotations", str(judgments), "--out", str(out), "--no-record", "--trials", "10")
    assert proc.returncode == 0, proc.stderr

    import datasets

    ann = datasets.load_dataset(str(out), "annotations", split="test")
    assert len(ann) == 71
    key = annotator_key()  # the same $FSB_HOME as the subprocess: issue 19's keyed-hash pseudonyms by default
    assert set(ann["annotator"]) == {pseudonym(str(uid), key) for _, uid in users.values()}
    assert sorted(ann["timestamp"]) == sorted(got["Timestamp"]), "each judgment's created_at reaches the dataset"
    scores = datasets.load_dataset(str(out), split="test")
    top = scores.filter(lambda r: r["id"] == 12)[0]
    # ann1 and ann3 always pick the highest id; ann2 is noisy: item 12 is best at least 2 of 3 times.
    assert top["n_judgments"] >= 15 and top["n_best"] >= 2 * top["n_judgments"] / 3 - 1
    assert top["score"] > 0.8
    log = server_log.read_text()
    assert "pypi.org" not in log and "Can't get latest version" not in log, "the server made no calls outside 127.0.0.1"
