"""The lm-eval tasks end to end (harness/ YAML and task.py over fsb.evaluate.fewshot, metrics and
fsb.annotate.bwsprompt), with models whose answers are known."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM

import fifty_shades_of_bias as spec
from fsb.annotate import bwsprompt
from fsb.core.errors import FsbError
from fsb.evaluate import fewshot, metrics
from fsb.evaluate.agreement import summarize
from fsb.evaluate.results import load_run
from fsb.evaluate.runner import run_eval


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (" 0.45", 0.45),
        ("0.45\n\nSentence: x", 0.45),
        ("\n 0.7 \n", 0.7),
        (".5", 0.5),
        ("1", 1.0),
        ("1.0", 1.0),
        ("0", 0.0),
        ("1. The most negatively biased sentence", None),
        ("The score is 0.4", None),
        ("0.4 because", None),
        ("1.2", None),
        ("-0.1", None),
        ("", None),
        ("   ", None),
        ("0,5", None),
        ("1.\nThe most negatively biased sentence", None),
        ("0.", None),
        ("\u0660.\u0665", None),
    ],
)
def test_parse_score_is_strict(text: str, value: float | None) -> None:
    assert metrics.parse_score(text) == value


def test_fewshot_sets_two_per_bin_disjoint_deterministic() -> None:
    rng = np.random.default_rng(0)
    scores = np.r_[rng.random(200), [1.0, 1.0]]
    sets = fewshot.fewshot_sets(scores)
    assert len(sets) == 5
    for s in sets:
        assert len(s) == 8
        assert np.bincount(bwsprompt.fewshot_bin(scores[s]), minlength=4).tolist() == [2, 2, 2, 2]
    flat = np.concatenate(sets)
    assert len(set(flat.tolist())) == 40, "the 5 sets are disjoint"
    assert all(np.array_equal(a, b) for a, b in zip(sets, fewshot.fewshot_sets(scores)))
    assert not all(np.array_equal(a, b) for a, b in zip(sets, fewshot.fewshot_sets(scores, seed=7)))
    assert bwsprompt.fewshot_bin(np.array([1.0]))[0] == 3, "1.0 belongs to the top bin"
    # With few items in the top bin, those at exactly 1.0 must be eligible (the upstream `< end` test excluded them).
    few = np.r_[np.linspace(0.0, 0.74, 100), np.full(10, 1.0)]
    top = np.concatenate(fewshot.fewshot_sets(few))
    assert (few[top] == 1.0).sum() == 10


def test_fewshot_sets_refuse_a_thin_bin() -> None:
    with pytest.raises(ValueError, match="bin 3 holds 3"):
        fewshot.fewshot_sets(np.r_[np.linspace(0, 0.7, 100), [0.8, 0.9, 1.0]])


def test_load_gives_the_same_test_sentences_to_every_variant(release_dataset: Path) -> None:
    loads = [fewshot.load(fewshot_set=k, fsb_dataset=str(release_dataset)) for k in range(5)]
    zero = fewshot.load(fewshot_set=None, fsb_dataset=str(release_dataset))
    test_ids = loads[0]["test"]["id"]
    assert len(test_ids) == 960
    assert all(d["test"]["id"] == test_ids for d in loads) and zero["test"]["id"] == test_ids
    assert "fewshot" not in zero
    shots = [set(d["fewshot"]["id"]) for d in loads]
    assert all(len(s) == 8 for s in shots)
    assert not set().union(*shots) & set(test_ids), "no sentence is scored with itself among its examples"
    sample = fewshot.load(fewshot_set=0, fsb_dataset=str(release_dataset), fsb_per_bin=6)
    assert len(sample["test"]) == 24
    assert np.bincount(bwsprompt.fewshot_bin(np.asarray(sample["test"]["score"])), minlength=4).tolist() == [6, 6, 6, 6]
    assert fewshot.load(fewshot_set=3, fsb_dataset=str(release_dataset), fsb_per_bin=6)["test"]["id"] == sample["test"]["id"]
    # extra keyword arguments (lm-eval passes model args and the task's metadata) are accepted
    assert len(fewshot.load(fewshot_set=1, fsb_dataset=str(release_dataset), pretrained="x", version=1.0)["fewshot"]) == 8


def test_load_without_any_dataset_says_how_to_get_one() -> None:
    with pytest.raises(spec.DatasetNotFound, match=r"fsb build.*FSB_DATASET"):
        fewshot.load(fewshot_set=0)


def test_aggregations_leave_out_unparsed_answers() -> None:
    # Known data with a closed form: x = (1, 2, 3, 4)/10, y = (1, 3, 2, 4)/10 have deviations
    # (-1.5, -.5, .5, 1.5) and (-1.5, .5, -.5, 1.5) (/10): r = (2.25 - .25 - .25 + 2.25) / 5 = 0.8 exactly,
    # and the ranks are the values themselves, so rho = 0.8 too; mse = (0 + .01 + .01 + 0) / 4 = 0.005.
    items = [(0.1, 0.1), (None, 0.9), (0.2, 0.3), (0.3, 0.2), (None, 0.1), (0.4, 0.4)]
    assert metrics.pearson(items) == pytest.approx(0.8, abs=1e-12)
    assert metrics.spearman(items) == pytest.approx(0.8, abs=1e-12)
    assert metrics.mse(items) == pytest.approx(0.005, abs=1e-15)
    assert metrics.pearson([(0.1, 0.9), (0.5, 0.5), (0.9, 0.1)]) == pytest.approx(-1.0, abs=1e-12), "a reversed order is -1"
    assert math.isnan(metrics.pearson([(0.5, 0.1), (0.5, 0.9)])), "a constant answer has no correlation, not 0"
    assert math.isnan(metrics.pearson([(None, 0.1), (None, 0.9)])) and math.isnan(metrics.mse([(None, 0.1)]))


@pytest.mark.parametrize(
    ("score", "choice"),
    [(0.0, "0.0"), (0.04, "0.0"), (0.05, "0.1"), (0.25, "0.3"), (0.35, "0.4"), (0.45, "0.5"), (7 / 20, "0.4"), (1.0, "1.0")],
)
def test_nearest_tenth_rounds_halves_up(score: float, choice: str) -> None:
    assert fewshot.CHOICES[fewshot.nearest_tenth({"score": score})] == choice


def test_harness_bins_agree_with_the_build(release_dataset: Path) -> None:
    """The harness bins float scores (fifty_shades_of_bias.bin_codes); the build bins exactly from integer
    counts (exact_bin_codes). On the release (62 sentences sit exactly on 0.25, 0.5 or 0.75) they must agree."""
    import json

    rows = spec.load(source=str(release_dataset))[spec.SPLIT]
    stats = json.loads((release_dataset / "stats.json").read_text())
    assert np.bincount(bwsprompt.fewshot_bin(np.asarray(rows["score"])), minlength=4).tolist() == stats["fewshot_bins"]["counts"]
    assert [bwsprompt.fewshot_bin(np.array([x]))[0] for x in (0.2499, 0.25, 0.5, 0.75, 1.0)] == [0, 1, 2, 3, 3]
    assert all(bwsprompt.fewshot_bin(np.array([x]))[0] == spec.equispaced_bin(x) for x in np.linspace(0, 1, 401))


def test_expected_score() -> None:
    ll = np.full(11, -50.0)
    ll[7] = 0.0
    assert metrics.expected_score(ll) == pytest.approx(0.7)
    assert metrics.expected_score(np.zeros(11)) == pytest.approx(0.5)
    assert metrics.expected_score([-1e4] * 10 + [0.0]) == pytest.approx(1.0)


# --- metric plumbing end to end, with lm-eval models whose answers are known ---------------------


class OracleLM(LM):
    """Answers each sentence's human score (read from the dataset by its text); every `garble`-th
    sentence gets an unparseable answer. For log-likelihoods, peaks sharply at the nearest tenth."""

    def __init__(self, dataset: Path, garble: int = 0) -> None:
        super().__init__()
        rows = spec.load(source=str(dataset))[spec.SPLIT]
        self.score = dict(zip(rows["text"], rows["score"]))
        self.garble = garble
        self.seen = 0

    def _gold(self, context: str) -> float:
        text = re.findall(r"Sentence: (.*)\nScore:", context)[-1]
        return self.score[text]

    def generate_until(self, requests: list[Instance]) -> list[str]:
        out = []
        for req in requests:
            self.seen += 1
            gold = self._gold(req.args[0])
            out.append("1. The most biased" if self.garble and self.seen % self.garble == 0 else f" {gold:.6f}")
        return out

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        out = []
        for req in requests:
            context, continuation = req.args
            gold = self._gold(context)
            out.append((-1000.0 * (float(continuation) - gold) ** 2, False))
        return out

    def loglikelihood_rolling(self, requests: list[Instance]) -> list[float]:
        raise NotImplementedError


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r from its definition, sum(dx dy) / sqrt(sum dx^2 sum dy^2) (not the scipy call utils makes)."""
    dx, dy = x - x.mean(), y - y.mean()
    return float((dx * dy).sum() / math.sqrt((dx * dx).sum() * (dy * dy).sum()))


def _average_ranks(v: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they span."""
    return np.array([(v < x).sum() + ((v == x).sum() + 1) / 2 for x in v])


def _samples_check(run: Any) -> None:
    """Every leaf task's pearson, spearman and mse equal the values recomputed here from the logged samples,
    by the textbook formulas (Spearman's rho = Pearson's r of the average ranks)."""
    for name, s in run.tasks.items():
        got = run.results["results"][name]
        ok = s.parsed
        if ok.sum() >= 2 and np.ptp(s.preds[ok]) > 0:
            x, y = s.preds[ok], s.golds[ok]
            assert got["pearson,none"] == pytest.approx(_pearson(x, y), abs=1e-12)
            assert got["spearman,none"] == pytest.approx(_pearson(_average_ranks(x), _average_ranks(y)), abs=1e-12)
        else:
            assert math.isnan(got["pearson,none"])
        if ok.any():
            assert got["mse,none"] == pytest.approx(float(np.mean((s.preds[ok] - s.golds[ok]) ** 2)), abs=1e-12)


def test_an_oracle_scores_perfectly(release_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    results = run_eval(OracleLM(release_dataset), tasks=["fsb", "fsb_ll"], per_bin=3, dataset=str(release_dataset), output_path=out)
    for group in ("fsb", "fsb_ll"):
        assert results["results"][group]["pearson,none"] > 0.99
    assert results["results"]["fsb"]["pearson,none"] == pytest.approx(1.0, abs=1e-9)
    assert results["results"]["fsb"]["spearman,none"] == pytest.approx(1.0, abs=1e-9)
    assert results["results"]["fsb"]["mse,none"] == pytest.approx(0.0, abs=1e-11)
    assert results["results"]["fsb"]["parse_rate,none"] == 1.0
    # fsb_ll: the expected score is the nearest tenth, so the error is at most 0.05 per sentence
    assert results["results"]["fsb_ll"]["mse,none"] < 0.05**2
    run = load_run(out)
    _samples_check(run)
    summary = summarize(run, n_boot=50)
    assert summary["fsb"]["values"]["pearson"] == pytest.approx(results["results"]["fsb"]["pearson,none"])
    assert summary["fsb"]["sentences"] == 12 and summary["fsb"]["variants"] == 5


def test_unparseable_answers_count_against_parse_rate_only(release_dataset: Path, tmp_path: Path) -> None:
    results = run_eval(
        OracleLM(release_dataset, garble=3), tasks=["fsb_set2"], per_bin=6, dataset=str(release_dataset), output_path=tmp_path
    )
    r = results["results"]["fsb_set2"]
    assert r["parse_rate,none"] == pytest.approx(16 / 24)
    assert r["pearson,none"] == pytest.approx(1.0, abs=1e-9) and r["mse,none"] == pytest.approx(0.0, abs=1e-11)
    run = load_run(tmp_path)
    assert run.tasks["fsb_set2"].parsed.sum() == 16
    _samples_check(run)


# --- the bins API, few-shot counts, samples, the upstream framing ----------------------------------


def test_one_bins_api_float_and_exact_agree_on_every_possible_score() -> None:
    """Every score the build can produce is (n + best - worst) / 2n for n <= 48 judgments: the float
    binning (harness, analyses) and the exact integer binning (build) put each in the same bin."""
    nums, dens = zip(*[(k, 2 * n) for n in range(1, 49) for k in range(0, 2 * n + 1)])
    num, den = np.array(nums), np.array(dens)
    for edges in (spec.FEWSHOT_BIN_EDGES, spec.ANALYSIS_BIN_EDGES, spec.HISTOGRAM_BIN_EDGES):
        np.testing.assert_array_equal(spec.bin_codes(num / den, edges), spec.exact_bin_codes(num, den, edges))
    assert spec.bin_codes([0.29999999999999993, 0.3], spec.HISTOGRAM_BIN_EDGES).tolist() == [3, 3], "an edge opens its bin"
    assert spec.FEWSHOT_BIN_LABELS == ("0.00-0.25", "0.25-0.50", "0.50-0.75", "0.75-1.00")
    assert bwsprompt.fewshot_bin([0.0, 0.2499, 0.25, 0.75, 1.0]).tolist() == [0, 0, 1, 3, 3]
    assert not any(hasattr(m, "FEWSHOT_BIN_EDGES") for m in (bwsprompt, fewshot, metrics)), "edges come from the spec"


@pytest.mark.parametrize(("k", "counts"), [(0, [0, 0, 0, 0]), (1, [1, 0, 0, 0]), (4, [1, 1, 1, 1]), (6, [2, 2, 1, 1]), (8, [2, 2, 2, 2])])
def test_fewer_fewshot_examples_stay_balanced_over_the_bins(k: int, counts: list[int]) -> None:
    bins = [2, 0, 3, 2, 1, 0, 3, 1]  # a shuffled set: bins take turns in the order 2, 0, 3, 1
    picked = fewshot.balanced_subset(bins, k)
    assert picked == sorted(picked), "the examples keep their order"
    assert np.bincount([bins[i] for i in picked], minlength=4)[[2, 0, 3, 1]].tolist() == counts
    assert fewshot.balanced_subset(bins, 8) == list(range(8)), "k = 8 is the whole set, unchanged"


def test_more_fewshot_examples_than_a_set_holds_is_a_clear_error() -> None:
    with pytest.raises(bwsprompt.ProtocolError, match=r"--num_fewshot 9: .* holds 8 examples \(2 per score bin\); use 0 to 8"):
        fewshot.balanced_subset([0, 1, 2, 3, 0, 1, 2, 3], 9)
    assert issubclass(bwsprompt.ProtocolError, FsbError), "the CLI prints it as one line"


def test_num_fewshot_through_lm_eval(release_dataset: Path) -> None:
    """lm-eval's own num_fewshot override: 4 gives one example from each bin, 9 the clear error."""
    import lm_eval

    from fsb.evaluate.runner import task_manager

    meta = {"fsb_dataset": str(release_dataset), "fsb_sample": 3}
    common = {"tasks": ["fsb_set2"], "task_manager": task_manager(meta), "metadata": meta, "log_samples": True}
    out = lm_eval.simple_evaluate(model=OracleLM(release_dataset), num_fewshot=4, **common)
    rows = spec.load(source=str(release_dataset))[spec.SPLIT]
    score = dict(zip(rows["text"], rows["score"]))
    for sample in out["samples"]["fsb_set2"]:
        shots = re.findall(r"Sentence: (.*?)\nScore: \d\.\d\d\n\n", sample["arguments"][0][0])
        assert sorted(bwsprompt.fewshot_bin([score[t] for t in shots]).tolist()) == [0, 1, 2, 3]
    assert out["results"]["fsb_set2"]["pearson,none"] == pytest.approx(1.0)
    with pytest.raises(FsbError, match=r"--num_fewshot 9: .* use 0 to 8"):  # lm-eval loads its own copy of utils
        lm_eval.simple_evaluate(model=OracleLM(release_dataset), num_fewshot=9, **common)


def test_random_sample_and_the_source_it_records(release_dataset: Path) -> None:
    import json

    loads = [fewshot.load(fewshot_set=k, fsb_dataset=str(release_dataset), fsb_sample=40, fsb_sample_seed=3) for k in range(5)]
    ids = loads[0]["test"]["id"]
    assert len(ids) == 40 and ids == sorted(ids) and all(d["test"]["id"] == ids for d in loads)
    full = set(fewshot.load(fsb_dataset=str(release_dataset))["test"]["id"])
    assert set(ids) <= full
    assert fewshot.load(fsb_dataset=str(release_dataset), fsb_sample=40, fsb_sample_seed=4)["test"]["id"] != ids, "the seed matters"
    stats = json.loads((release_dataset / "stats.json").read_text())
    source = loads[0].fsb_source
    assert source["path"] == str(release_dataset.resolve())
    assert source["fingerprint"] == stats["fingerprint"], "computed from the data files, equal to what the build recorded"
    assert source["sample"] == "simple random sample of 40 (seed 3)"
    assert "inflates correlations" in fewshot.load(fsb_dataset=str(release_dataset), fsb_per_bin=2).fsb_source["sample"]
    with pytest.raises(bwsprompt.ProtocolError, match="not both"):
        fewshot.load(fsb_dataset=str(release_dataset), fsb_sample=4, fsb_per_bin=2)


def test_upstream_examples_run_bin_by_bin_at_the_release_files_precision(release_dataset: Path, release: Path) -> None:
    import pandas as pd

    released = pd.read_csv(release / "FSB" / "fsb_final_scores.csv")
    as_released = dict(zip(released["id"], released["score_normalized"].astype(str)))
    unsorted_bins = 0
    for k in range(5):
        ours = fewshot.load(fewshot_set=k, fsb_dataset=str(release_dataset))["fewshot"]
        upstream = fewshot.load(fewshot_set=k, fsb_dataset=str(release_dataset), fsb_protocol="upstream")["fewshot"]
        assert sorted(upstream["id"]) == sorted(ours["id"]), "the same 8 examples"
        bins = bwsprompt.fewshot_bin(np.asarray(upstream["score"])).tolist()
        assert bins == [0, 0, 1, 1, 2, 2, 3, 3], "bin by bin from low to high, as upstream's per-bin draws"
        # inside a bin the order is the draw's, not a sort by score (upstream: random.sample per bin)
        drawn = [i for b in range(4) for i, c in zip(ours["id"], bwsprompt.fewshot_bin(np.asarray(ours["score"]))) if c == b]
        assert upstream["id"] == drawn
        unsorted_bins += sum(upstream["score"][j] > upstream["score"][j + 1] for j in range(0, 8, 2))
        assert [fewshot.upstream_score_text(d) for d in upstream] == [as_released[i] for i in upstream["id"]]
    assert unsorted_bins > 0, "some bin shows its higher example first: not a full sort"


def test_fsb_eval_refuses_bad_models_and_tasks_in_one_line(release_dataset: Path) -> None:
    import os
    import subprocess
    import sys

    fsb = str(Path(sys.executable).parent / "fsb")
    env = {**os.environ, "FSB_DATASET": str(release_dataset)}
    cases = [
        (["--model-args", "pretrained=/nonexistent"], "fsb eval: error: --model-args pretrained=/nonexistent: no such model folder"),
        (["--model", "dummy", "--tasks", "fsbx"], "fsb eval: error: --tasks fsbx: no such task; this project's tasks are fsb, fsb_0shot"),
        (["--model", "nosuch"], "fsb eval: error: --model nosuch: not an lm-eval model type"),
    ]
    for extra, line in cases:
        proc = subprocess.run([fsb, "eval", *extra], env=env, capture_output=True, text=True, check=False, timeout=300)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(line) and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert proc.stdout.startswith(f"dataset: {release_dataset.resolve()} (fingerprint "), "it names the dataset it read"


def test_fsb_eval_outside_a_git_checkout_prints_no_git_error(release_dataset: Path, tmp_path: Path) -> None:
    """lm-eval runs `git describe` for its results file; outside a checkout git's "fatal: not a git
    repository" reached the terminal. The hash is still recorded where there is one (None here)."""
    import json
    import os
    import subprocess
    import sys

    fsb = str(Path(sys.executable).parent / "fsb")
    env = {**os.environ, "FSB_DATASET": str(release_dataset), "FSB_HOME": str(tmp_path / "home"), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    cmd = [fsb, "eval", "--model", "dummy", "--tasks", "fsb_0shot", "--limit", "2", "--output-path", str(tmp_path / "out")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "not a git repository" not in proc.stderr and "fatal:" not in proc.stderr
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    assert "git_hash" in results and results["git_hash"] is None


def test_lm_eval_noise_is_quieted_and_warnings_kept(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from fsb.evaluate.runner import _quiet_lm_eval

    with caplog.at_level(logging.WARNING), _quiet_lm_eval():
        logging.getLogger("lm_eval.api.task").warning("fsb_set0: Custom kwargs can be passed to `--metadata` in console")
        logging.getLogger("lm_eval.evaluator").warning("pretrained=pretrained=/m/SmolLM2-Instruct appears to be an instruct variant")
        logging.getLogger("lm_eval.api.task").warning("a real warning")
    kept = [r.getMessage() for r in caplog.records]
    assert kept == ["pretrained=/m/SmolLM2-Instruct appears to be an instruct variant", "a real warning"]


class UpstreamChatLM(LM):
    """A chat model that answers the human score after a blank line ("\\n\\n0.45\\n\\nBecause ..."), cutting
    its answer at the request's stop sequences as real backends do; it records the prompts it was sent."""

    def __init__(self, dataset: Path) -> None:
        super().__init__()
        rows = spec.load(source=str(dataset))[spec.SPLIT]
        self.score = dict(zip(rows["text"], rows["score"]))
        self.chats: list[list[dict[str, str]]] = []

    @property
    def tokenizer_name(self) -> str:
        return "upstream-chat-test"

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        import json

        return json.dumps(chat_history)

    def generate_until(self, requests: list[Instance]) -> list[str]:
        import json

        out = []
        for req in requests:
            chat = json.loads(req.args[0])
            self.chats.append(chat)
            answer = f"\n\n{self.score[chat[-1]['content']]:.4f}\n\nBecause the sentence says so."
            for stop in req.args[1].get("until", []):
                answer = answer.split(stop)[0]
            out.append(answer)
        return out

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        raise NotImplementedError

    def loglikelihood_rolling(self, requests: list[Instance]) -> list[float]:
        raise NotImplementedError


def test_upstream_reads_an_answer_that_begins_with_a_blank_line(release_dataset: Path, tmp_path: Path) -> None:
    """Upstream kept `content.strip().split("\\n")[0]`: an answer after a blank line is read, not lost to a
    blank-line stop; the examples run bin by bin from low to high as chat turns with bare scores."""
    lm = UpstreamChatLM(release_dataset)
    results = run_eval(
        lm,
        tasks=["fsb_upstream_set1"],
        per_bin=2,
        dataset=str(release_dataset),
        output_path=tmp_path,
        apply_chat_template=True,
        fewshot_as_multiturn=True,
        echo=None,
    )
    r = results["results"]["fsb_upstream_set1"]
    assert r["parse_rate,none"] == 1.0 and r["pearson,none"] == pytest.approx(1.0, abs=1e-6)
    chat = lm.chats[0]
    assert [m["role"] for m in chat] == ["system", *["user", "assistant"] * 8, "user"]
    shown = [float(m["content"]) for m in chat[2:-1:2]]
    assert bwsprompt.fewshot_bin(shown).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert metrics.parse_score("\n\n0.45\n\nBecause") == 0.45 and metrics.parse_score("\n\nThe score is 0.4") is None
