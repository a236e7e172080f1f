"""`fsb publish` against a fake Hub on 127.0.0.1 (tests/_fake_hub.py), with the real huggingface_hub client
and the real `datasets.load_dataset` in subprocesses: no library internals are patched, the client is only
pointed at the fake with HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE=0 (the test session itself is offline)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import fifty_shades_of_bias as spec
from fsb.core.readers import InputError
from fsb.data.dataset import build_dataset
from fsb.data.diff import diff_builds, format_diff
from fsb.data.publish import check_folder, parse_version
from tests._fake_hub import GITATTRIBUTES, STORAGE_KINDS, Commit, FakeHub, _file_entry, git_blob_oid
from tests._support import make_raw, run_fsb

TOKEN = "hf_fsbTEST_token_that_must_never_be_printed_0123456789"
REPO = "fsb-org/fifty_shades_of_bias"


# --- fixtures and helpers -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two small builds with different content: what v1.0.0 and v1.1.0 publish."""
    root = tmp_path_factory.mktemp("publish-builds")
    out = {}
    for name, n, seed in (("v1", 12, 0), ("v2", 16, 1)):
        g, a = make_raw(root / f"raw-{name}", n=n, seed=seed)
        hub_id = REPO if name == "v2" else None  # v1's card names the local folder: publish warns about it
        out[name] = build_dataset(g, a, root / name / "fifty_shades_of_bias", record=False, hub_id=hub_id).out
    return out


@pytest.fixture
def hub() -> Any:
    with FakeHub(TOKEN) as h:
        yield h


def folder_files(folder: Path) -> dict[str, bytes]:
    """What a publish uploads: every file of the build but its local seal (.fsb-seal.json)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".fsb-seal.json"
    }


def seed_release(hub: FakeHub, folder: Path, tag: str = "v1.0.0") -> str:
    """Put `folder` on the fake Hub as release `tag` directly (no client): the state a past publish left."""
    if ("dataset", REPO) not in hub.repos:
        hub.add_repo(REPO)
    repo = hub.repo(REPO)
    old = set(repo.commits[repo.branches["main"]].files) - {".gitattributes"}
    oid = hub.push(REPO, folder_files(folder), delete=tuple(old), title=f"Release {tag}")
    repo.tags[tag] = oid
    return oid


def snapshot(hub: FakeHub) -> dict[Any, Any]:
    return {key: (dict(r.branches), dict(r.tags), sorted(r.commits), r.private) for key, r in hub.repos.items()}


def hub_env(hub: FakeHub, home: Path, token: str | None = TOKEN, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        HF_ENDPOINT=hub.url,
        HF_HUB_OFFLINE="0",
        HF_DATASETS_OFFLINE="0",
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(home / "hf-home"),
    )
    env.update(extra)
    if token is not None:
        env["HF_TOKEN"] = token
    return env


def fsb_publish(hub: FakeHub, home: Path, *args: str, token: str | None = TOKEN, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run `fsb publish ...` in a subprocess against the fake Hub; the token must never be in its output."""
    proc = run_fsb("publish", *args, env=hub_env(hub, home, token, **extra), cwd=home, timeout=120)  # HF_* differ: a subprocess
    assert TOKEN not in proc.stdout and TOKEN not in proc.stderr, "the token leaked into the output"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("fsb publish: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


LOAD_SCRIPT = r"""
import json, sys
import datasets
out = {}
for revision in sys.argv[2:]:
    ds = datasets.load_dataset(sys.argv[1], revision=revision)["test"]
    cols = ds.to_dict()
    ann = datasets.load_dataset(sys.argv[1], "annotations", revision=revision)["test"]
    st = ds.features["seed_type"]
    out[revision] = {
        "id": cols["id"], "text": cols["text"], "score": cols["score"], "seed_type": [st.int2str(v) for v in cols["seed_type"]],
        "features": ds.features.to_dict(), "annotations_features": ann.features.to_dict(), "n_annotations": ann.num_rows,
    }
print(json.dumps(out))
"""


def load_revisions(hub: FakeHub, home: Path, *revisions: str) -> dict[str, Any]:
    """`datasets.load_dataset(REPO, revision=...)` for each revision, in one subprocess (a fresh HF_HOME)."""
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, REPO, *revisions],
        env=hub_env(hub, home, token=None),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_lfs_writes(hub: FakeHub, kinds: list[str], *, creates: bool, uploads: int) -> None:
    """The write requests of one publish through the LFS path: (create,) preupload, one batch, the PUTs
    and verifies (parallel, in any order), the commit, the tag."""
    head = ["create_repo"] if creates else []
    assert kinds[: len(head) + 2] == [*head, "preupload", "lfs_batch"], kinds
    assert sorted(kinds[len(head) + 2 : -2]) == ["lfs_upload"] * uploads + ["lfs_verify"] * uploads, kinds
    assert kinds[-2:] == ["commit", "create_tag"], kinds


def local_rows(folder: Path) -> dict[str, list[Any]]:
    (path,) = sorted((folder / "data" / "default").glob("*.parquet"))
    table = pq.read_table(path)
    return {k: table.column(k).to_pylist() for k in ("id", "text", "score", "seed_type")}


# --- local checks (no network) ------------------------------------------------------------------


def test_check_folder_and_version(builds: dict[str, Path], tmp_path: Path) -> None:
    build = check_folder(builds["v1"])
    stats = json.loads((builds["v1"] / "stats.json").read_text())
    assert build.fingerprint == stats["fingerprint"]
    assert set(build.paths) == set(folder_files(builds["v1"]))
    assert build.paths[:2] == ("README.md", "stats.json")
    assert all(f.git_oid == git_blob_oid(f.data) for f in build.files)
    assert parse_version("1.10.0") == (1, 10, 0)
    # a trailing newline passed a `$`-anchored pattern; Unicode digits passed `\d` (int() reads them)
    for bad in ("1.2", "v1.2.0", "01.2.0", "1.2.0-rc1", "1.2.0 ", "", "1.0.0\n", "\n1.0.0", "1.\u0660.0", "\uff11.0.0"):
        with pytest.raises(InputError, match="semantic version"):
            parse_version(bad)
    with pytest.raises(InputError, match="not a folder"):
        check_folder(tmp_path / "missing")


# --- the whole flow -----------------------------------------------------------------------------


def test_publish_two_versions_and_load_each_revision(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    v1, v2 = builds["v1"], builds["v2"]

    dry = fsb_publish(hub, tmp_path, str(v1), "--repo-id", REPO, "--version", "1.0.0", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "create dataset repo" in dry.stdout and "dry run: nothing was written" in dry.stdout
    assert f"warning: the card's loading examples do not name {REPO}" in dry.stderr
    assert all(f"add     {p}" in dry.stdout for p in folder_files(v1))
    assert hub.writes() == [] and hub.repos == {}

    # HF_DEBUG=1 makes huggingface_hub log every request (as curl commands): the token is still never printed.
    first = fsb_publish(hub, tmp_path, str(v1), "--repo-id", REPO, "--version", "1.0.0", HF_DEBUG="1")
    assert first.returncode == 0, first.stderr
    assert "(authenticated: True)" in first.stderr  # the debug log of authenticated requests was on
    repo = hub.repo(REPO)
    c1 = repo.tags["v1.0.0"]
    assert c1 == repo.branches["main"] and f"commit {c1}" in first.stdout and "tag v1.0.0" in first.stdout
    assert hub.files(REPO, "v1.0.0") == {".gitattributes": GITATTRIBUTES, **folder_files(v1)}
    assert not repo.private
    # every write to the Hub carried the token from HF_TOKEN (the fake Hub records it; the output never shows
    # it), and none went to the storage origin the signed LFS URLs point to
    assert hub.writes() and all(r.token == TOKEN for r in hub.writes() if r.kind not in STORAGE_KINDS)
    assert all(r.token is None for r in hub.requests if r.kind in STORAGE_KINDS)
    assert_lfs_writes(hub, [r.kind for r in hub.writes()], creates=True, uploads=2)
    parquet_v1 = sorted(p for p in folder_files(v1) if p.endswith(".parquet"))
    # the Parquet files went through the LFS batch API and the commit references them by sha256 and size
    assert hub.lfs_paths(REPO, "v1.0.0") == frozenset(parquet_v1)
    assert repo.tag_messages["v1.0.0"].startswith("Fifty Shades of Bias v1.0.0") and "changes from" not in repo.tag_messages["v1.0.0"]

    dry2 = fsb_publish(hub, tmp_path, str(v2), "--repo-id", REPO, "--version", "1.1.0", "--dry-run")
    old_parquet = sorted(p for p in folder_files(v1) if p.endswith(".parquet"))
    assert all(f"delete  {p}" in dry2.stdout for p in old_parquet), dry2.stdout
    assert "latest release: v1.0.0" in dry2.stdout
    assert "warning" not in dry2.stderr, "v2 was built with --hub-id"
    # the plan shows the changes since the latest release (v1: 12 sentences, ids 1..12; v2: 16, ids 1..16)
    changes = "sentences: 12 -> 16 (+4 added, -0 removed, 12 in both)"
    assert "changes from v1.0.0" in dry2.stdout and changes in dry2.stdout, dry2.stdout

    n_writes = len(hub.writes())
    second = fsb_publish(hub, tmp_path, str(v2), "--repo-id", REPO, "--version", "1.1.0")
    assert second.returncode == 0, second.stderr
    c2 = repo.tags["v1.1.0"]
    assert_lfs_writes(hub, [r.kind for r in hub.writes()[n_writes:]], creates=False, uploads=2)
    # the release notes: the diff against v1.0.0 is in the commit's description and the tag's message
    assert changes in repo.commits[c2].description and "changes from v1.0.0" in repo.commits[c2].description
    assert changes in repo.tag_messages["v1.1.0"] and "split-half reliability" in repo.tag_messages["v1.1.0"]
    # one commit on top of v1.0.0 that adds the new files and deletes the old content-addressed ones
    assert repo.commits[c2].parent == c1
    assert hub.files(REPO, "v1.1.0") == {".gitattributes": GITATTRIBUTES, **folder_files(v2)}
    assert not set(old_parquet) & set(hub.files(REPO, "main"))
    assert hub.files(REPO, "v1.0.0") == {".gitattributes": GITATTRIBUTES, **folder_files(v1)}

    loaded = load_revisions(hub, tmp_path, "v1.0.0", "v1.1.0")
    for tag, folder in (("v1.0.0", v1), ("v1.1.0", v2)):
        rows = local_rows(folder)
        assert {k: loaded[tag][k] for k in rows} == rows
        assert loaded[tag]["features"] == spec.features("default").to_dict()
        assert loaded[tag]["annotations_features"] == spec.features("annotations").to_dict()
    assert len(loaded["v1.0.0"]["id"]) == 12 and len(loaded["v1.1.0"]["id"]) == 16
    assert "unknown" not in {r.kind for r in hub.requests}  # the fake served every request the clients made
    # datasets read the Parquet files through the LFS redirect to the storage origin
    assert any(r.kind == "lfs_download" and r.status in (200, 206) for r in hub.requests)

    # fsb diff between the two Hub revisions (downloaded through the same LFS path) = the diff of the folders
    n_requests, n_writes = len(hub.requests), len(hub.writes())
    a, b = f"{REPO}@v1.0.0", f"{REPO}@v1.1.0"
    proc = subprocess.run(
        [sys.executable, "-m", "fsb", "diff", a, b],
        env=hub_env(hub, tmp_path, token=None),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == format_diff(diff_builds(v1, v2, old_label=a, new_label=b))
    assert "lfs_download" in {r.kind for r in hub.requests[n_requests:]} and len(hub.writes()) == n_writes


# --- refusals: nothing written ------------------------------------------------------------------


def _missing_data_file(folder: Path) -> None:
    next((folder / "data" / "default").glob("*.parquet")).unlink()


def _stale_fingerprint(folder: Path) -> None:
    stats = json.loads((folder / "stats.json").read_text())
    stats["fingerprint"] = "0" * 64
    (folder / "stats.json").write_text(json.dumps(stats))


def _extra_file(folder: Path) -> None:
    (folder / "notes.txt").write_text("not part of the build")


def _broken_card(folder: Path) -> None:
    card = (folder / "README.md").read_text()
    (folder / "README.md").write_text(card.replace("configs:", "configs: [unclosed", 1))


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (_missing_data_file, "not in the folder"),
        (_stale_fingerprint, "fingerprint"),
        (_extra_file, "not part of the build: notes.txt"),
        (_broken_card, "does not parse"),
    ],
    ids=["missing-data-file", "stale-fingerprint", "extra-file", "broken-card"],
)
def test_bad_folder_is_refused_before_any_request(
    hub: FakeHub, builds: dict[str, Path], tmp_path: Path, damage: Any, expected: str
) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(builds["v1"], folder)
    damage(folder)
    proc = fsb_publish(hub, tmp_path, str(folder), "--repo-id", REPO, "--version", "1.0.0")
    assert proc.returncode == 2
    assert expected in error_line(proc)
    assert hub.requests == []


@pytest.mark.parametrize(
    ("args", "token", "expected"),
    [
        (["--version", "1.2"], TOKEN, "not a semantic version"),
        (["--version", "v1.2.0"], TOKEN, "not a semantic version"),
        (["--version", "1.0.0"], TOKEN, "already has v1.0.0"),
        (["--version", "0.9.0"], TOKEN, "not greater than the latest release v1.0.0"),
        (["--version", "1.1.0"], None, "no Hugging Face token"),
        (["--version", "1.1.0"], "hf_wrong_token_for_this_hub", "Invalid user token"),
        (["--version", "1.1.0", "--private"], TOKEN, "exists and is public"),
        (["--version", "1.1.0", "--repo-id", "not-my-org/fsb"], TOKEN, "cannot write to namespace 'not-my-org'"),
        (["--version", "1.1.0", "--repo-id", "fsb"], TOKEN, "must be ORG/NAME"),
        (["--version", "1.1.0\n"], TOKEN, "not a semantic version"),
    ],
    ids=[
        "short-version",
        "v-prefix",
        "existing-tag",
        "lower-version",
        "no-token",
        "wrong-token",
        "private-vs-public",
        "foreign-namespace",
        "no-namespace",
        "version-with-newline",
    ],
)
def test_refused_publish_sends_no_write(
    hub: FakeHub, builds: dict[str, Path], tmp_path: Path, args: list[str], token: str | None, expected: str
) -> None:
    seed_release(hub, builds["v1"], "v1.0.0")
    before = snapshot(hub)
    # a stored login in HF_HOME must never be used: the token comes from HF_TOKEN only
    (tmp_path / "hf-home").mkdir()
    (tmp_path / "hf-home" / "token").write_text(TOKEN)
    proc = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, *args, token=token)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in error_line(proc)
    assert hub.writes() == []
    assert snapshot(hub) == before
    assert "v1.1.0\n" not in hub.repo(REPO).tags
    if token is None or "semantic" in expected or "ORG/NAME" in expected:
        assert hub.requests == []  # refused before the first request


# --- failures after the first write -------------------------------------------------------------


def test_failed_commit_deletes_the_repo_it_created(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    hub.inject("commit", 500)
    proc = fsb_publish(hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0")
    assert proc.returncode == 2
    assert "injected failure" in error_line(proc) and "deleted again" in error_line(proc)
    assert hub.repos == {}
    kinds = [r.kind for r in hub.writes()]
    assert [k for k in kinds if not k.startswith("lfs_")] == ["create_repo", "preupload", "commit", "delete_repo"]
    assert "lfs_upload" in kinds  # the objects were uploaded; unreferenced, they are invisible (as on the Hub)

    again = fsb_publish(hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0", "--private")
    assert again.returncode == 0, again.stderr
    assert hub.repo(REPO).private and hub.repo(REPO).tags["v1.0.0"] == hub.head(REPO)


def test_lost_commit_answer_is_reported_and_a_rerun_only_tags(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    seed_release(hub, builds["v1"], "v1.0.0")
    hub.inject("commit", 502, message="bad gateway", applied=True)  # the commit lands, its answer is lost
    proc = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0")
    assert proc.returncode == 2  # one line, exit 2, like every failure; the line says the Hub changed
    head = hub.head(REPO)
    assert f"main is now at {head}" in error_line(proc) and "re-run" in error_line(proc)
    assert "v1.1.0" not in hub.repo(REPO).tags
    rerun = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0")
    assert rerun.returncode == 0, rerun.stderr
    assert hub.repo(REPO).tags["v1.1.0"] == head == hub.head(REPO)
    assert len([r for r in hub.requests if r.kind == "commit"]) == 1


def test_dry_run_without_token_reads_only(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    seed_release(hub, builds["v1"], "v1.0.0")
    proc = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0", "--dry-run", token=None)
    assert proc.returncode == 0, proc.stderr
    assert "a real publish would be refused" in proc.stdout and "latest release: v1.0.0" in proc.stdout
    assert hub.writes() == [] and all(r.token is None for r in hub.requests)


def test_failed_commit_leaves_the_remote_unchanged(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    seed_release(hub, builds["v1"], "v1.0.0")
    before = snapshot(hub)
    hub.inject("commit", 500)
    proc = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0")
    assert proc.returncode == 2
    assert "main is unchanged" in error_line(proc)
    assert snapshot(hub) == before
    assert "create_tag" not in [r.kind for r in hub.requests]


def test_concurrent_change_is_refused_not_clobbered(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    seed_release(hub, builds["v1"], "v1.0.0")
    pushed: list[str] = []
    # someone else pushes after our plan was made (just before our upload starts)
    hub.on("preupload", lambda: pushed.append(hub.push(REPO, {"NOTES.md": b"a maintainer's note\n"})))
    proc = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0")
    assert proc.returncode == 2
    assert "moved since the plan" in error_line(proc)
    assert hub.head(REPO) == pushed[0]
    assert hub.files(REPO)["NOTES.md"] == b"a maintainer's note\n"
    assert set(hub.repo(REPO).tags) == {"v1.0.0"}
    assert [r.status for r in hub.requests if r.kind == "commit"] == [412]


def test_tag_failure_after_commit_is_reported_and_a_rerun_only_tags(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    seed_release(hub, builds["v1"], "v1.0.0")
    hub.inject("create_tag", 500, times=3)  # every retry fails
    proc = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0")
    assert proc.returncode == 2  # one line, exit 2; the line says the commit landed
    head = hub.head(REPO)
    line = error_line(proc)
    assert f"commit {head}" in line and "could not be created" in line and "re-run" in line
    assert "v1.1.0" not in hub.repo(REPO).tags
    assert hub.files(REPO) == {".gitattributes": GITATTRIBUTES, **folder_files(builds["v2"])}

    rerun = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0")
    assert rerun.returncode == 0, rerun.stderr
    assert "only the tag is created" in rerun.stdout and "tag only" in rerun.stdout
    # the Parquet files are LFS files on the Hub: they were found unchanged by their LFS sha256 (publish._same)
    parquet = sorted(p for p in folder_files(builds["v2"]) if p.endswith(".parquet"))
    assert hub.lfs_paths(REPO) == frozenset(parquet)
    assert all(f"same    {p}" in rerun.stdout for p in [*parquet, "README.md", "stats.json"]), rerun.stdout
    assert hub.repo(REPO).tags["v1.1.0"] == head == hub.head(REPO)
    assert [r.status for r in hub.requests if r.kind == "commit"] == [200]


def test_transient_tag_failures_are_retried_and_endpoint_flag_wins(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    seed_release(hub, builds["v1"], "v1.0.0")
    hub.inject("create_tag", 503)  # refused outright
    hub.inject("create_tag", 500, applied=True)  # the tag is made, the answer lost: the retry sees 409 on our commit
    # HF_ENDPOINT points nowhere (port 9, nothing listens): --endpoint must be what the whole client uses
    proc = subprocess.run(
        [sys.executable, "-m", "fsb", "publish", str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0", "--endpoint", hub.url],
        # telemetry on: huggingface_hub then also fetches its agent registry, from HF_ENDPOINT's value at import
        env={**hub_env(hub, tmp_path), "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_DISABLE_TELEMETRY": "0"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    assert [r.status for r in hub.requests if r.kind == "create_tag"] == [503, 500, 409]
    assert hub.repo(REPO).tags["v1.1.0"] == hub.head(REPO)
    assert "agent_harnesses" in [r.kind for r in hub.requests]  # even the client's own side requests came here


PUBLISH_SCRIPT = r"""
import json, sys
from fsb.data.publish import publish
token = sys.stdin.read().strip()
r = publish(sys.argv[1], sys.argv[2], "1.0.0", token=token, endpoint=sys.argv[3], message="first release")
print(json.dumps({"oid": r.commit_oid, "url": r.commit_url, "tag": r.tag, "committed": r.committed, "created": r.created_repo}))
"""


def test_python_api_takes_the_token_argument_and_endpoint(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    env = hub_env(hub, tmp_path, token=None)
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens there: `endpoint=` must be what HfApi uses
    proc = subprocess.run(
        [sys.executable, "-c", PUBLISH_SCRIPT, str(builds["v1"]), REPO, hub.url],
        input=TOKEN,  # through stdin, so it is in neither the arguments nor the environment
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    repo = hub.repo(REPO)
    assert result == {
        "oid": repo.tags["v1.0.0"],
        "url": f"{hub.url}/datasets/{REPO}/commit/{repo.tags['v1.0.0']}",
        "tag": "v1.0.0",
        "committed": True,
        "created": True,
    }
    assert repo.commits[result["oid"]].title == "first release"
    assert all(r.token == TOKEN for r in hub.writes() if r.kind not in STORAGE_KINDS)
    assert hub.lfs_paths(REPO) == frozenset(p for p in folder_files(builds["v1"]) if p.endswith(".parquet"))


def test_release_tags_order_like_semantic_versions() -> None:
    from fsb.data.publish import version_of_tag

    assert version_of_tag("v2.0.0-rc1") < version_of_tag("v2.0.0") < version_of_tag("v2.0.1") < version_of_tag("v10.0.0")
    assert version_of_tag("v1.2") == (1, 2, 0, 1)
    assert version_of_tag("latest") is None and version_of_tag("v1.0.0+local") is None


# --- what a publish may delete (issue 8) --------------------------------------------------------


def test_repo_that_is_not_an_fsb_release_is_refused_with_the_files_it_would_delete(
    hub: FakeHub, builds: dict[str, Path], tmp_path: Path
) -> None:
    hub.add_repo(REPO)
    theirs = {"README.md": b"# my dataset\n", "analysis.ipynb": b"{}", "data/train.csv": b"a,b\n1,2\n"}
    hub.push(REPO, theirs, title="someone's own dataset")
    before = snapshot(hub)
    for extra in ([], ["--dry-run"]):
        proc = fsb_publish(hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0", *extra)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        line = error_line(proc)
        assert "is not an fsb release" in line and "would delete analysis.ipynb, data/train.csv and replace README.md" in line
        assert hub.writes() == [] and snapshot(hub) == before
    assert hub.files(REPO)["data/train.csv"] == b"a,b\n1,2\n"
    diff = subprocess.run(
        [sys.executable, "-m", "fsb", "diff", f"{REPO}@main", str(builds["v1"])],
        env=hub_env(hub, tmp_path, token=None),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert diff.returncode == 2 and "Traceback" not in diff.stderr
    assert diff.stderr.strip() == f"fsb diff: error: {REPO} at main is not an fsb build (no card and stats.json written by `fsb build`)"


def test_files_added_beside_an_fsb_release_are_never_deleted(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    seed_release(hub, builds["v1"], "v1.0.0")
    hub.push(REPO, {"NOTES.md": b"a maintainer's note\n"})
    before = snapshot(hub)
    proc = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0")
    assert proc.returncode == 2
    line = error_line(proc)
    assert "not part of its fsb release: publishing would delete NOTES.md;" in line
    assert "parquet" not in line  # the release's own data files may go: fsb wrote them
    assert hub.writes() == [] and snapshot(hub) == before


def test_repo_holding_only_what_creation_puts_there_counts_as_empty(hub: FakeHub, builds: dict[str, Path], tmp_path: Path) -> None:
    hub.add_repo(REPO)  # as the Hub creates a dataset repo: one commit with .gitattributes
    created = hub.head(REPO)
    proc = fsb_publish(hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0")
    assert proc.returncode == 0, proc.stderr
    repo = hub.repo(REPO)
    assert repo.commits[repo.tags["v1.0.0"]].parent == created
    assert hub.files(REPO, "v1.0.0") == {".gitattributes": GITATTRIBUTES, **folder_files(builds["v1"])}


# --- fine-grained tokens (issue 8) --------------------------------------------------------------

READ_ONLY = ["repo.content.read", "repo.access.read"]
WRITE = ["repo.content.read", "repo.write"]


@pytest.mark.parametrize(
    ("scoped", "existing", "expected"),
    [
        ([{"entity": {"type": "org", "name": "fsb-org"}, "permissions": WRITE}], False, None),
        ([{"entity": {"type": "dataset", "name": REPO}, "permissions": WRITE}], True, None),
        ([{"entity": {"type": "org", "name": "fsb-org"}, "permissions": READ_ONLY}], False, "no repo.write permission on 'fsb-org'"),
        ([{"entity": {"type": "user", "name": "tester"}, "permissions": WRITE}], False, "no repo.write permission on 'fsb-org'"),
        ([{"entity": {"type": "dataset", "name": "fsb-org/other"}, "permissions": WRITE}], True, "no repo.write permission"),
        ([{"entity": {"type": "dataset", "name": REPO}, "permissions": WRITE}], False, "can write to that repo only, not create it"),
    ],
    ids=["org-write", "repo-write-existing", "org-read-only", "other-namespace", "other-repo", "repo-write-missing"],
)
def test_fine_grained_token_is_checked_before_any_write(
    builds: dict[str, Path], tmp_path: Path, scoped: list[dict[str, Any]], existing: bool, expected: str | None
) -> None:
    with FakeHub(TOKEN, fine_grained=scoped) as hub:
        if existing:
            hub.add_repo(REPO)
        before = snapshot(hub)
        proc = fsb_publish(hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0")
        if expected is None:
            assert proc.returncode == 0, proc.stderr
            assert hub.repo(REPO).tags["v1.0.0"] == hub.head(REPO)
            assert all(r.status < 400 for r in hub.writes())  # the fake Hub enforces the same scopes
        else:
            assert proc.returncode == 2, proc.stdout + proc.stderr
            assert expected in error_line(proc)
            assert hub.writes() == [] and snapshot(hub) == before
            assert hub.requests[0].kind == "whoami"


def test_read_role_in_the_org_is_refused_before_any_write(builds: dict[str, Path], tmp_path: Path) -> None:
    with FakeHub(TOKEN, org_roles={"fsb-org": "read"}) as hub:
        proc = fsb_publish(hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0")
        assert proc.returncode == 2
        assert "has the read role in org 'fsb-org'" in error_line(proc)
        assert hub.writes() == [] and hub.repos == {}


# --- local checks without the network (issue 12) ------------------------------------------------


def test_offline_dry_run_runs_every_local_check_and_prints_the_warnings(builds: dict[str, Path], tmp_path: Path) -> None:
    with FakeHub(TOKEN) as hub:
        env = {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens there
        proc = fsb_publish(hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0", "--dry-run", **env)
        assert proc.returncode == 0, proc.stderr
        assert "local checks passed" in proc.stdout and "HF_HUB_OFFLINE is set" in proc.stdout
        assert build_fingerprint(builds["v1"]) in proc.stdout
        assert all(f"file    {p}" in proc.stdout for p in folder_files(builds["v1"]))
        assert f"warning: the card's loading examples do not name {REPO}" in proc.stderr
        # --local does the same with the network available, and a bad folder or version is still one line
        local = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0", "--local", token=None)
        assert local.returncode == 0 and "a real publish would be refused" in local.stdout and "warning" not in local.stderr
        bad = fsb_publish(hub, tmp_path, str(builds["v2"]), "--repo-id", REPO, "--version", "1.1.0\n", "--dry-run", **env)
        assert bad.returncode == 2 and "not a semantic version" in error_line(bad)
        (tmp_path / "copy").mkdir()
        shutil.copytree(builds["v1"], tmp_path / "copy" / "b")
        _extra_file(tmp_path / "copy" / "b")
        bad = fsb_publish(hub, tmp_path, str(tmp_path / "copy" / "b"), "--repo-id", REPO, "--version", "1.0.0", "--local")
        assert bad.returncode == 2 and "not part of the build: notes.txt" in error_line(bad)
        # a dry run that needs the network and cannot reach it says where the offline checks are
        cut = fsb_publish(
            hub, tmp_path, str(builds["v1"]), "--repo-id", REPO, "--version", "1.0.0", "--dry-run", HF_ENDPOINT="http://127.0.0.1:9"
        )
        assert cut.returncode == 2 and "nothing was changed (the local checks alone need no network: `fsb publish --local`" in error_line(
            cut
        )
        assert hub.requests == []


def build_fingerprint(folder: Path) -> str:
    return json.loads((folder / "stats.json").read_text())["fingerprint"]


def test_same_compares_lfs_files_by_sha256_and_regular_files_by_git_oid(builds: dict[str, Path]) -> None:
    """The tree entries the Hub lists (here the fake's, as JSON, parsed by the client's RepoFile): an LFS file's
    `oid` is its pointer's git id, so only the LFS sha256 can tell that the content is unchanged."""
    from huggingface_hub.hf_api import RepoFile

    from fsb.data.hub import same as _same

    build = check_folder(builds["v1"])
    commit = Commit("0" * 40, None, "t", {}, "2026-01-01T00:00:00.000Z")
    parquet = next(f for f in build.files if f.path.endswith(".parquet"))
    card = next(f for f in build.files if f.path == "README.md")
    lfs_entry = RepoFile(**_file_entry(parquet.path, parquet.data, commit, False, True))
    assert lfs_entry.lfs is not None and lfs_entry.blob_id != parquet.git_oid  # a blob-id comparison would say "changed"
    assert _same(parquet, lfs_entry)
    assert not _same(parquet, RepoFile(**_file_entry(parquet.path, parquet.data + b"x", commit, False, True)))
    assert _same(card, RepoFile(**_file_entry(card.path, card.data, commit, False)))
    assert not _same(card, RepoFile(**_file_entry(card.path, card.data + b"\n", commit, False)))
