"""tests/_support.run_fsb, the one way tests run `fsb`: in process it must answer as the real command does
(return code, stdout, stderr) and leave nothing behind (environment, working folder, logging, caches)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import fsb.cli
from tests._support import _changes_import_time_env, run_fsb, write_csv


def _bad_annotations(folder: Path) -> Path:
    return write_csv(folder / "ann.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"], [["a", "b", "c", "d", "a", "z"]])


@pytest.mark.parametrize(
    "args",
    [
        ("score", "missing.csv"),  # an expected failure: one line, exit 2
        ("score",),  # argparse's usage error: SystemExit(2)
        ("score", "ann.csv"),  # bad input in a real file: the line names file, row and field
        ("--help",),  # SystemExit(0) with the help on stdout
    ],
)
def test_in_process_answers_as_the_real_command(args: tuple[str, ...], tmp_path: Path) -> None:
    _bad_annotations(tmp_path)
    inside = run_fsb(*args, cwd=tmp_path)
    real = run_fsb(*args, cwd=tmp_path, in_process=False)
    assert (inside.returncode, inside.stdout, inside.stderr) == (real.returncode, real.stdout, real.stderr)
    assert inside.args == real.args and inside.args[-len(args) :] == list(args)


def test_state_is_restored_after_a_run(tmp_path: Path) -> None:
    before_env, before_cwd = dict(os.environ), os.getcwd()
    handlers = {name: list(lg.handlers) for name, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    proc = run_fsb("score", "missing.csv", cwd=tmp_path, env={**os.environ, "FSB_TEST_ONLY_VARIABLE": "1"})
    assert proc.returncode == 2 and "missing.csv" in proc.stderr
    assert dict(os.environ) == before_env and os.getcwd() == before_cwd
    after = {name: list(lg.handlers) for name, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    assert {k: v for k, v in after.items() if k in handlers} == handlers
    assert all(not v for k, v in after.items() if k not in handlers), "a logger made during the run keeps no handler"


def test_the_environment_given_is_the_whole_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As with subprocess.run: a variable missing from `env` is unset for the command (here FSB_HOME, so the
    state folder falls back to the default), and the caller's environment is back afterwards."""
    seen = {}

    def spy(argv: list[str]) -> int:
        seen.update(home=os.environ.get("FSB_HOME"), cwd=os.getcwd(), argv=argv)
        print("out")
        return 3

    monkeypatch.setattr(fsb.cli, "main", spy)
    env = {k: v for k, v in os.environ.items() if k != "FSB_HOME"}
    proc = run_fsb("x", 1, cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout) == (3, "out\n")
    assert seen == {"home": None, "cwd": str(tmp_path), "argv": ["x", "1"]}
    assert os.environ.get("FSB_HOME") is not None


def test_a_bug_is_a_traceback_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(argv: list[str]) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(fsb.cli, "main", boom)
    proc = run_fsb("score", "x.csv")
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "ZeroDivisionError: a bug" in proc.stderr


def test_variables_read_at_import_force_a_subprocess() -> None:
    assert not _changes_import_time_env(dict(os.environ))
    assert not _changes_import_time_env({**os.environ, "FSB_HOME": "/elsewhere", "OPENAI_API_KEY": "k"})
    assert _changes_import_time_env({**os.environ, "HF_ENDPOINT": "http://127.0.0.1:1"})
    assert _changes_import_time_env({k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"})


def test_the_test_cache_rebuilds_what_is_damaged_or_half_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adversarial review: a cached folder with its record but a file gone was reused forever, a folder left
    without its record (a run killed while renaming) failed every later run, and killed builds' temporaries stayed."""
    from tests._tiny_model import cached_folder

    monkeypatch.setenv("FSB_TEST_CACHE", str(tmp_path))
    builds: list[Path] = []

    def build(folder: Path) -> None:
        builds.append(folder)
        (folder / "sub").mkdir(parents=True)
        (folder / "weights.bin").write_bytes(b"w" * 100)
        (folder / "sub" / "config.json").write_text("{}", encoding="utf-8")

    first = cached_folder("thing-abc", build)
    assert cached_folder("thing-abc", build) == first and len(builds) == 1, "a complete folder is reused"
    (first / "weights.bin").unlink()
    assert cached_folder("thing-abc", build) == first and len(builds) == 2 and (first / "weights.bin").stat().st_size == 100
    (first / "sub" / "config.json").write_text("{} ", encoding="utf-8")  # a size that is not the recorded one
    cached_folder("thing-abc", build)
    assert len(builds) == 3
    (first / ".complete").unlink()
    (tmp_path / ".thing-building-x1").mkdir()
    assert cached_folder("thing-abc", build) == first and len(builds) == 4, "a folder without its record is rebuilt"
    assert not list(tmp_path.glob(".thing-building-*")), "a killed build's temporary is swept"
