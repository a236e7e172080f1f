"""The main job's measured-figures page (fsb.evaluate.mainjob: page_text, write_page), with fake timings (no model run): what it
says, that the README can quote its one marked line, and that it is written as fsb's own file: a hand edit is
refused unless --force, the docs generator's placeholder is replaced, nothing is written outside a checkout."""

from __future__ import annotations

import datetime as dt
import importlib.util
import subprocess
from pathlib import Path

import pytest

from fsb.core.errors import FsbError
from fsb.core.readers import InputError
from fsb.evaluate import mainjob
from fsb.evaluate.mainjob import MAIN_JOB_MARK, Machine, Step, page_text, write_page

ROOT = Path(__file__).resolve().parents[2]
STEPS = [
    Step("1/4 build", 12.4, 10.0, 3.6),
    Step("2/4 load", 3.0, 2.5, 3.7),
    Step("3/4 analyses", 20.2, 19.0, None),
    Step("4/4 evaluate", 3600.0 + 1260.0, 9000.0, 5.99),
]
TASKS = [
    {"task": "fsb_ll", "requests": 660, "rows": 120, "rows_counted": 120, "estimate": 100.0, "wall": 130.0, "cpu": 240.0}
    | {"load": (1.0, 2.5)},
    {"task": "fsb", "requests": 60, "rows": 60, "rows_counted": 60, "estimate": None, "wall": 70.0, "cpu": 131.0} | {"load": (None, None)},
]
START = Machine(2, (3.5, 2.25, 1.0), "3.12.3", "2.5.1")
END = Machine(2, (6.0, 5.0, 4.0), "3.12.3", "2.5.1")
BEGAN = dt.datetime(2026, 12, 1, 17, 2, tzinfo=dt.UTC)


def _page() -> str:
    return page_text(BEGAN, START, END, STEPS, sum(s.wall for s in STEPS))


def test_the_page_says_when_on_what_and_how_long() -> None:
    text = _page()
    assert "started 2026-12-01 17:02 UTC" in text
    assert "2 cores (os.cpu_count), Python 3.12.3, torch 2.5.1" in text
    assert "3.50 / 2.25 / 1.00 at the start, 6.00 / 5.00 / 4.00 at the end" in text
    assert "| 1/4 build | 12 s | 10 s | 3.60 |" in text and "| 3/4 analyses | 20 s | 19 s | n/a |" in text
    assert "| 4/4 evaluate | 81 min (4860 s) | 2 h 30 min (9000 s) | 5.99 |" in text
    assert "| total | 82 min (4896 s) | 2 h 31 min (9032 s) | 6.00 |" in text, "the totals are the sums of the steps here"
    assert "Each model task" not in text, "no task rows, no task table"
    marked = [ln for ln in text.splitlines() if ln.startswith(MAIN_JOB_MARK)]
    assert marked == [
        f"{MAIN_JOB_MARK} **Total time of `make main`:** 82 min on 2026-12-01 (2 cores, load 3.50 at the start; CPU time, the "
        "load and each task's estimate beside it in docs/figures/main-job.md). The first run adds its setup: installing .venv "
        "(about 3 min with a warm pip cache) and converting SmolLM2 once (about 1 min)."
    ]
    assert mainjob.marked_line(text) == marked[0].removeprefix(MAIN_JOB_MARK).strip()
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    (at,) = [i for i, ln in enumerate(readme) if ln.startswith("<!-- fsb-main-job-total")]
    assert readme[at + 1] == mainjob.marked_line((ROOT / "docs" / "figures" / "main-job.md").read_text(encoding="utf-8"))
    assert "not available" in page_text(BEGAN, Machine(1, None, "3.12", "x"), END, STEPS[:1], 5.0)
    assert "| total | 1 h 40 min (6000 s) | 7 s |" in page_text(BEGAN, START, END, STEPS[:1], 6000.0, cpu=7.0)


def test_each_task_s_estimate_stands_beside_its_actual_time() -> None:
    text = page_text(BEGAN, START, END, STEPS, 4896.0, tasks=TASKS)
    assert "| fsb_ll | 660 | 120 / 120 | 2 min (100 s) | 2 min (130 s) | 1.30x | 4 min (240 s) | 1.00 / 2.50 |" in text
    assert "| fsb | 60 | 60 / 60 | none | 70 s | n/a | 2 min (131 s) | n/a / n/a |" in text, "no estimate: said, no ratio"
    assert text.index("### Each model task") < text.index(MAIN_JOB_MARK)


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


def test_only_the_default_job_writes_a_page_under_its_results(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert mainjob.planned_page(default_job=False, results=tmp_path) is None, "--skip-eval, --sample, --per-bin: no page"
    assert mainjob.planned_page(default_job=True, results=tmp_path / "r") == tmp_path / "r" / "main-job.md", "by default: RESULTS"
    monkeypatch.setattr(mainjob.resources, "repo_root", lambda: None)
    with pytest.raises(FsbError, match="source checkout"):
        mainjob.planned_page(default_job=True, record=True)
    monkeypatch.setattr(mainjob.resources, "repo_root", lambda: tmp_path)
    (tmp_path / "README.md").write_text("# x\n<!-- fsb-main-job-total: quotes -->\nold line\n", encoding="utf-8")
    with pytest.raises(FsbError, match="default job only"):
        mainjob.planned_page(default_job=False, record=True)
    assert mainjob.planned_page(default_job=True, record=True) == tmp_path / "docs" / "figures" / "main-job.md"
    (tmp_path / "docs" / "figures").mkdir(parents=True)
    (tmp_path / "docs" / "figures" / "main-job.md").write_text("hand written\n", encoding="utf-8")
    with pytest.raises(InputError):
        mainjob.planned_page(default_job=True, record=True)
    assert mainjob.planned_page(default_job=True, record=True, force=True) is not None
    (tmp_path / "README.md").write_text("# no marker\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"README\.md.*fsb-main-job-total"):
        mainjob.planned_page(default_job=True, record=True, force=True)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def _fake_job(monkeypatch: pytest.MonkeyPatch, root: Path, *extra: str) -> int:
    """`fsb main` in a git checkout at `root` (a copy of README.md and the page), with every step faked but the
    page's planning and writing: the build, load, analyses and evaluation are stubs."""
    import types

    from fsb.cli.app import main
    from fsb.evaluate import runner

    monkeypatch.setattr(mainjob.resources, "repo_root", lambda: root)
    monkeypatch.chdir(root)
    built = types.SimpleNamespace(out=root / "ds", stats={"fingerprint": "0" * 64, "shr": {}, "release": {"is_release": True}})
    built.stats["bins"] = {"counts": dict.fromkeys(mainjob.spec.BIN_NAMES, 1)}
    monkeypatch.setattr(mainjob, "release_dir", lambda raw: root)
    monkeypatch.setattr(mainjob, "build_dataset", lambda *a: built)
    rows = types.SimpleNamespace(num_rows=1, features=["text"])
    monkeypatch.setattr(mainjob.spec, "load", lambda *a, **k: {mainjob.spec.SPLIT: rows})
    import fsb.analyse.analysis as analysis
    import fsb.data.reference as reference

    monkeypatch.setattr(reference, "placed_split_half", lambda *a, **k: [])
    monkeypatch.setattr(analysis, "read_sentences", lambda *a: None)
    words = {"unigrams": {b: [] for b in mainjob.spec.BIN_NAMES}}
    monkeypatch.setattr(analysis, "write_analysis", lambda *a: {"histogram": {"counts": [1]}, "distinctive": words})
    monkeypatch.setattr(analysis, "marking_line", lambda b, w: b)
    monkeypatch.setattr(runner, "check_main_job_files", lambda *a, **k: None)
    monkeypatch.setattr(runner, "main_job_eval", lambda *a, **k: 0)
    return main(["main", "--results", str(root / "results"), *extra])


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout holding this repository's README.md, .gitignore and docs/figures/main-job.md, all committed."""
    root = tmp_path / "clone"
    (root / "docs" / "figures").mkdir(parents=True)
    for rel in ("README.md", ".gitignore", "docs/figures/main-job.md"):
        (root / rel).write_bytes((ROOT / rel).read_bytes())
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "clone")
    return root


def test_a_default_fsb_main_changes_no_tracked_file(monkeypatch: pytest.MonkeyPatch, checkout: Path) -> None:
    """J1: `make main` left docs/figures/main-job.md rewritten (and the README's quote stale, failing `make test`).
    Now the default job writes RESULTS/main-job.md (gitignored) and `git status` stays clean. Failed before: the
    page was written to docs/figures/main-job.md."""
    assert _fake_job(monkeypatch, checkout) == 0
    assert _git(checkout, "status", "--porcelain") == "", "no tracked file changed, no untracked file shown"
    page = (checkout / "results" / "main-job.md").read_text(encoding="utf-8")
    assert page.startswith("# The main job, measured\n") and page.count(MAIN_JOB_MARK) == 1


def test_fsb_main_record_writes_the_page_and_the_readme_line_together(monkeypatch: pytest.MonkeyPatch, checkout: Path) -> None:
    """J1: `fsb main --record` (maintainers) writes docs/figures/main-job.md and README.md's marked line, which then
    agree; the README changes at that one line only."""
    before = (checkout / "README.md").read_text(encoding="utf-8").splitlines()
    assert _fake_job(monkeypatch, checkout, "--record") == 0
    changed = _git(checkout, "status", "--porcelain").split()
    assert sorted(changed[1::2]) == ["README.md", "docs/figures/main-job.md"]
    page = (checkout / "docs" / "figures" / "main-job.md").read_text(encoding="utf-8")
    after = (checkout / "README.md").read_text(encoding="utf-8").splitlines()
    (at,) = [i for i, ln in enumerate(after) if ln.startswith("<!-- fsb-main-job-total")]
    assert after[at + 1] == mainjob.marked_line(page) != before[at + 1]
    assert [ln for i, ln in enumerate(after) if i != at + 1] == [ln for i, ln in enumerate(before) if i != at + 1]
    assert not (checkout / "results" / "main-job.md").exists()


def test_fsb_main_refuses_a_hand_edited_page_before_any_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fsb main` whose results page was edited by hand: one line, exit 2, before anything is built."""
    from fsb.cli.app import main

    page = tmp_path / "results" / "main-job.md"
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
