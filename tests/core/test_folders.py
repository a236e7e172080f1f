"""The write primitives every stage relies on: a folder is replaced whole or not at all."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fsb.core.atomic import atomic_write
from fsb.core.folders import atomic_dir, exchange
from fsb.core.readers import InputError, read_utf8


def _ours(folder: Path) -> bool:
    return (folder / "a.txt").is_file()


def test_atomic_dir_replaces_whole_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with atomic_dir(target, owned=_ours, kind="a test output") as stage:
        (stage / "a.txt").write_text("one")
        (stage / "old-only.txt").write_text("x")
    with atomic_dir(target, owned=_ours, kind="a test output") as stage:
        (stage / "a.txt").write_text("two")
    assert sorted(p.name for p in target.iterdir()) == ["a.txt"]
    assert (target / "a.txt").read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "no staging or old folder left behind"


def test_atomic_dir_keeps_the_old_folder_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with atomic_dir(target, owned=_ours, kind="a test output") as stage:
        (stage / "a.txt").write_text("good")
    with pytest.raises(RuntimeError), atomic_dir(target, owned=_ours, kind="a test output") as stage:
        (stage / "a.txt").write_text("half")
        raise RuntimeError("killed midway")
    assert (target / "a.txt").read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_dir_refuses_to_replace_a_file(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("not a folder")
    with pytest.raises(InputError, match="not a folder"), atomic_dir(tmp_path / "out", owned=_ours, kind="a test output"):
        pass
    assert (tmp_path / "out").read_text() == "not a folder"


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is Linux-only")
def test_exchange_swaps_two_folders_atomically(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "which").write_text("a")
    (b / "which").write_text("b")
    assert exchange(a, b)
    assert (a / "which").read_text() == "b" and (b / "which").read_text() == "a"


def test_atomic_write_and_strict_reading(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "f.txt"
    atomic_write(p, "héllo\n")
    assert read_utf8(p) == "héllo\n"
    assert [x.name for x in p.parent.iterdir()] == ["f.txt"]
    with pytest.raises(InputError, match="file not found"):
        read_utf8(tmp_path / "missing.csv")
    (tmp_path / "bad.csv").write_bytes(b"a,b\n1,2\n\xff\n")
    with pytest.raises(InputError) as err:
        read_utf8(tmp_path / "bad.csv")
    assert err.value.line == 3 and "not valid UTF-8" in err.value.message


def test_outputs_get_ordinary_permissions(tmp_path: Path) -> None:
    import os

    mask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "f.txt", "x")
        with atomic_dir(tmp_path / "d", owned=_ours, kind="a test output") as stage:
            (stage / "a").write_text("x")
    finally:
        os.umask(mask)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755


def test_jsonl_lines_split_on_newlines_only(tmp_path: Path) -> None:
    import json

    from fsb.tables.csvrows import read_generations

    row = {"uid": 1, "prompt_type": "completion", "seed_type": "neutral", "query": "q", "response": "a\u2028b\x0cc"}
    (tmp_path / "g.jsonl").write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    frame = read_generations(tmp_path / "g.jsonl").frame
    assert frame["response"].tolist() == ["a\u2028b\x0cc"]
