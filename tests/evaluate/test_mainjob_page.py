"""The main job's measured-figures page (fsb.evaluate.mainjob: page_text, write_page), with fake timings (no model run): what it
says, that the README can quote its one marked line, and that it is written as fsb's own file: a hand edit is
refused unless --force, the docs generator's placeholder is replaced, nothing is written outside a checkout."""

from __future__ import annotations

import datetime as dt
import importlib.util
from pathlib import Path

import pytest

from fsb.core.readers import InputError
from fsb.evaluate import mainjob
from fsb.evaluate.mainjob import MAIN_JOB_MARK, Machine, page_text, write_page

ROOT = Path(__file__).resolve().parents[2]
STEPS = [("1/4 build", 12.4), ("2/4 load", 3.0), ("3/4 analyses", 20.2), ("4/4 evaluate", 3600.0 + 1260.0)]
START = Machine(2, (3.5, 2.25, 1.0), "3.12.3", "2.5.1")
END = Machine(2, (6.0, 5.0, 4.0), "3.12.3", "2.5.1")
BEGAN = dt.datetime(2026, 12, 1, 17, 2, tzinfo=dt.UTC)


def _page() -> str:
    return page_text(BEGAN, START, END, STEPS, sum(t for _, t in STEPS))


def test_the_page_says_when_on_what_and_how_long() -> None:
    text = _page()
    assert "started 2026-12-01 17:02 UTC" in text
    assert "2 cores (os.cpu_count), Python 3.12.3, torch 2.5.1" in text
    assert "3.50 / 2.25 / 1.00 at the start, 6.00 / 5.00 / 4.00 at the end" in text
    assert "| 1/4 build | 12 s |" in text and "| 4/4 evaluate | 81 min (4860 s) |" in text
    assert "| total | 82 min (4896 s) |" in text, "the total is the sum of the steps here"
    marked = [ln for ln in text.splitlines() if ln.startswith(MAIN_JOB_MARK)]
    assert marked == [
        f"{MAIN_JOB_MARK} **Total time of `make main`:** 82 min on 2026-12-01 (2 cores; the machine's load beside it in "
        "docs/figures/main-job.md)."
    ]
    assert mainjob.marked_line(text) == marked[0].removeprefix(MAIN_JOB_MARK).strip()
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    (at,) = [i for i, ln in enumerate(readme) if ln.startswith("<!-- fsb-main-job-total")]
    assert readme[at + 1] == mainjob.marked_line((ROOT / "docs" / "figures" / "main-job.md").read_text(encoding="utf-8"))
    assert "not available" in page_text(BEGAN, Machine(1, None, "3.12", "x"), END, STEPS[:1], 5.0)
    assert "| total | 1 h 40 min (6000 s) |" in page_text(BEGAN, START, END, STEPS[:1], 6000.0)


def test_the_placeholder_is_the_docs_generators() -> None:
    """The placeholder replaced without --force is exactly the one docs/gen_ref.py writes (no drift)."""
    spec = importlib.util.spec_from_file_location("gen_ref", ROOT / "docs" / "gen_ref.py")
    gen_ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_ref)
    assert gen_ref.PLACEHOLDERS["figures/main-job.md"] == mainjob.PLACEHOLDER
    assert mainjob.MAIN_JOB_MARK == gen_ref.MAIN_JOB_MARK


def test_written_as_fsbs_own_file_a_hand_edit_is_refused_unless_force(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "figures" / "main-job.md"
    page.parent.mkdir(parents=True)
    page.write_text(mainjob.PLACEHOLDER, encoding="utf-8")
    mainjob.check_page(page)  # the committed placeholder passes
    write_page(page, _page())
    assert page.read_text(encoding="utf-8") == _page()
    mainjob.check_page(page)  # unchanged since fsb wrote it: replaceable
    write_page(page, _page().replace("82 min", "83 min"))
    page.write_text(page.read_text(encoding="utf-8") + "my note\n", encoding="utf-8")
    edited = page.read_bytes()
    with pytest.raises(InputError, match=r"main-job\.md.*pass --force"):
        mainjob.check_page(page)
    with pytest.raises(InputError):
        write_page(page, _page())
    assert page.read_bytes() == edited, "a refused write changes nothing"
    write_page(page, _page(), force=True)
    assert page.read_text(encoding="utf-8") == _page()
    mine = tmp_path / "other.md"
    mine.write_text("my own page\n", encoding="utf-8")
    with pytest.raises(InputError):
        mainjob.check_page(mine)


def test_only_the_default_job_from_a_checkout_writes_a_page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert mainjob.planned_page(default_job=False) is None, "--skip-eval, --sample, --per-bin: no page"
    monkeypatch.setattr(mainjob.resources, "repo_root", lambda: None)
    assert mainjob.planned_page(default_job=True) is None, "never inside an installed package"
    monkeypatch.setattr(mainjob.resources, "repo_root", lambda: tmp_path)
    assert mainjob.planned_page(default_job=True) == tmp_path / "docs" / "figures" / "main-job.md"
    (tmp_path / "docs" / "figures").mkdir(parents=True)
    (tmp_path / "docs" / "figures" / "main-job.md").write_text("hand written\n", encoding="utf-8")
    with pytest.raises(InputError):
        mainjob.planned_page(default_job=True)
    assert mainjob.planned_page(default_job=True, force=True) is not None


def test_fsb_main_refuses_a_hand_edited_page_before_any_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fsb main` from a checkout whose page was edited by hand: one line, exit 2, before anything is built."""
    from fsb.cli.app import main

    monkeypatch.setattr(mainjob.resources, "repo_root", lambda: tmp_path)
    page = tmp_path / "docs" / "figures" / "main-job.md"
    page.parent.mkdir(parents=True)
    page.write_text("# my own figures\n", encoding="utf-8")
    code = main(["main", "--out", str(tmp_path / "ds"), "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "main-job.md" in err and "--force" in err, err
    assert page.read_text(encoding="utf-8") == "# my own figures\n" and not (tmp_path / "ds").exists()


def test_the_committed_page_of_a_fresh_clone_is_replaced_without_force(tmp_path: Path) -> None:
    """A fresh clone carries the measured page but no record of it (.fsb-files.json is never committed): the
    README's `make main` must replace it, not refuse; once fsb wrote and recorded it, a hand edit is refused."""
    committed = ROOT / "docs" / "figures" / "main-job.md"
    page = tmp_path / "main-job.md"
    page.write_bytes(committed.read_bytes())
    mainjob.check_page(page)  # no record, the page's shape: passes
    write_page(page, committed.read_text(encoding="utf-8").replace("20 min", "21 min"))
    page.write_text(page.read_text(encoding="utf-8") + "my note\n", encoding="utf-8")
    with pytest.raises(InputError):
        mainjob.check_page(page)
    other = tmp_path / "notes.md"
    other.write_text("# my own notes\n", encoding="utf-8")
    with pytest.raises(InputError):
        mainjob.check_page(other)
