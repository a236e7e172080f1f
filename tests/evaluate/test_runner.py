"""fsb.evaluate.runner: `fsb eval`'s refusals before lm-eval starts (issue 20's cases, each one line and exit 2
through the console entry point, with nothing written), lm-eval's noise quieted with its real warnings kept,
and the main job's tasks each on its own sample."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsb.analyse.analysis import ANALYSIS_SEAL
from fsb.cli.app import main
from fsb.core.seals import write_seal
from fsb.evaluate import runner
from fsb.evaluate.reportout import REPORT_SEAL

FSB = str(Path(sys.executable).parent / "fsb")


def _eval(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["eval", "--model", "dummy", "--tasks", "fsb_0shot", *args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("limit", ["-1", "0", "2.5", "nan", "inf"])
def test_eval_refuses_a_limit_lm_eval_would_misread(limit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _eval([f"--limit={limit}", "--output-path", str(tmp_path / "out")], capsys)
    assert code == 2 and "give a whole number of items (1, 2, ...) or a fraction between 0 and 1" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_eval_never_writes_into_a_dataset_build(release_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.relative_to(release_dataset).as_posix() for p in release_dataset.rglob("*"))
    for target in (release_dataset, release_dataset / "results"):
        code, err = _eval(["--limit", "2", "--dataset", str(release_dataset), "--output-path", str(target)], capsys)
        assert code == 2 and "a dataset build, from `fsb build` (its .fsb-seal.json says so)" in err and err.count("\n") == 1
        assert "an evaluation never writes into another command's output" in err
    assert sorted(p.relative_to(release_dataset).as_posix() for p in release_dataset.rglob("*")) == before


def test_eval_on_a_folder_that_is_not_a_dataset_does_not_suggest_building_into_it(tmp_path: Path) -> None:
    mine = tmp_path / "my-notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    env = {**os.environ, "FSB_HOME": str(tmp_path / "home")}
    cmd = [FSB, "eval", "--model", "dummy", "--tasks", "fsb_0shot", "--dataset", str(mine), "--output-path", str(tmp_path / "out")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "is not a Fifty Shades of Bias dataset" in proc.stderr and f"--out {mine}" not in proc.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    ("kind", "plain"),
    [(ANALYSIS_SEAL, "an analysis folder"), (REPORT_SEAL, "a report folder"), ("fsb future", "the output of another command")],
)
def test_eval_refuses_a_folder_another_command_sealed(kind: str, plain: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 20: `--output-path` on an analyse or report folder (any seal but eval's, which has none) is one
    line naming the folder's kind, exit 2, the folder unchanged, whether it is the folder or a parent."""
    sealed = tmp_path / "sealed"
    sealed.mkdir()
    (sealed / "report.md").write_text("# mine\n", encoding="utf-8")
    write_seal(sealed, kind)
    before = {p.name: p.read_bytes() for p in sealed.iterdir()}
    for target in (sealed, sealed / "eval"):
        code, err = _eval(["--limit", "2", "--output-path", str(target)], capsys)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"--output-path {target}: " in err and f"{plain}, from `{kind}` (its .fsb-seal.json says so)" in err
    assert {p.name: p.read_bytes() for p in sealed.iterdir()} == before and not (sealed / "eval").exists()


def test_eval_refuses_a_folder_with_an_unreadable_seal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sealed = tmp_path / "sealed"
    sealed.mkdir()
    (sealed / ".fsb-seal.json").write_text("{not json", encoding="utf-8")
    code, err = _eval(["--limit", "2", "--output-path", str(sealed)], capsys)
    assert code == 2 and err.count("\n") == 1 and "a folder fsb sealed (.fsb-seal.json)" in err


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"sample": 12}, {"fsb": (12, None), "fsb_ll": (12, None), "fsb_bws_ll": (runner.MAIN_JOB_TUPLES, None)}),
        ({"per_bin": 2}, {"fsb": (None, 2), "fsb_ll": (None, 2), "fsb_bws_ll": (None, 2)}),
    ],
)
def test_main_job_runs_each_task_on_its_own_sample_and_times_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], kwargs: dict, expected: dict
) -> None:
    """The rating tasks take the sentence sample, the best-worst task its tuple sample (or both the per-bin
    draw), each into results/<task> on the CPU, and each task's time is printed and recorded."""
    from fsb.evaluate import models, report, results

    calls: dict[str, tuple] = {}

    lm = object()

    def fake_run(model: object, args: str, tasks: list[str], **kw: object) -> None:
        calls[tasks[0]] = (model, args, kw["output_path"], kw["sample"], kw["per_bin"], kw["device"], kw["dataset"])

    monkeypatch.setattr(models, "smollm2_model", lambda: tmp_path / "model")
    monkeypatch.setattr(runner, "run_eval", fake_run)
    monkeypatch.setattr(runner, "main_job_baselines", lambda *a, **k: [])
    monkeypatch.setattr(results, "load_runs", lambda paths: [])
    monkeypatch.setattr(report, "render_runs", lambda runs, **kw: "R")
    assert runner.main_job_eval(tmp_path / "ds", tmp_path / "results", model=lambda d: lm, **kwargs) == 0
    out = capsys.readouterr().out
    assert list(calls) == ["fsb", "fsb_ll", "fsb_bws_ll"]
    for task, (sample, per_bin) in expected.items():
        model, args, output, got_sample, got_per_bin, device, dataset = calls[task]
        assert (model, args, output, device, dataset) == (
            lm,
            f"pretrained={tmp_path / 'model'},dtype=float32",
            tmp_path / "results" / task,
            "cpu",
            str(tmp_path / "ds"),
        )
        assert (got_sample, got_per_bin) == (sample, per_bin)
        assert f"{task} took " in out
    assert set(json.loads((tmp_path / "results" / "timings.json").read_text())) == set(expected)


def test_fsb_eval_refuses_bad_models_and_tasks_in_one_line(release_dataset: Path) -> None:
    env = {**os.environ, "FSB_DATASET": str(release_dataset)}
    cases = [
        (["--model-args", "pretrained=/nonexistent"], "fsb eval: error: --model-args pretrained=/nonexistent: no such model folder"),
        (["--model", "dummy", "--tasks", "fsbx"], "fsb eval: error: --tasks fsbx: no such task; this project's tasks are fsb, fsb_0shot"),
        (["--model", "nosuch"], "fsb eval: error: --model nosuch: not an lm-eval model type"),
    ]
    for extra, line in cases:
        proc = subprocess.run([FSB, "eval", *extra], env=env, capture_output=True, text=True, check=False, timeout=300)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(line) and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert proc.stdout.startswith(f"dataset: {release_dataset.resolve()} (fingerprint "), "it names the dataset it read"


def test_fsb_eval_outside_a_git_checkout_prints_no_git_error(release_dataset: Path, tmp_path: Path) -> None:
    """lm-eval runs `git describe` for its results file; outside a checkout git's "fatal: not a git
    repository" reached the terminal. The hash is still recorded where there is one (None here)."""
    env = {**os.environ, "FSB_DATASET": str(release_dataset), "FSB_HOME": str(tmp_path / "home"), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    cmd = [FSB, "eval", "--model", "dummy", "--tasks", "fsb_0shot", "--limit", "2", "--output-path", str(tmp_path / "out")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "not a git repository" not in proc.stderr and "fatal:" not in proc.stderr
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    assert "git_hash" in results and results["git_hash"] is None


def test_lm_eval_noise_is_quieted_and_warnings_kept(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    with caplog.at_level(logging.WARNING), runner.quiet_lm_eval():
        logging.getLogger("lm_eval.api.task").warning("fsb_set0: Custom kwargs can be passed to `--metadata` in console")
        logging.getLogger("lm_eval.evaluator").warning("pretrained=pretrained=/m/SmolLM2-Instruct appears to be an instruct variant")
        logging.getLogger("lm_eval.api.task").warning("a real warning")
    kept = [r.getMessage() for r in caplog.records]
    assert kept == ["pretrained=/m/SmolLM2-Instruct appears to be an instruct variant", "a real warning"]
