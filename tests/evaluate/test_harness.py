"""The rating tasks of the harness/ task folder (its YAML, utils.py and task.py, which are not package modules)
end to end through lm-eval, with models whose answers are known: the metrics lm-eval reports recomputed from
the logged samples, the harness's bins against the build's, --num_fewshot, and upstream's answer framing.
The package modules under them have their own tests (test_fewshot, test_metrics, test_runner)."""

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


def test_harness_bins_agree_with_the_build(release_dataset: Path) -> None:
    """The harness bins float scores (fifty_shades_of_bias.bin_codes); the build bins exactly from integer
    counts (exact_bin_codes). On the release (62 sentences sit exactly on 0.25, 0.5 or 0.75) they must agree."""
    import json

    rows = spec.load(source=str(release_dataset))[spec.SPLIT]
    stats = json.loads((release_dataset / "stats.json").read_text())
    assert np.bincount(bwsprompt.fewshot_bin(np.asarray(rows["score"])), minlength=4).tolist() == stats["fewshot_bins"]["counts"]
    assert [bwsprompt.fewshot_bin(np.array([x]))[0] for x in (0.2499, 0.25, 0.5, 0.75, 1.0)] == [0, 1, 2, 3, 3]
    assert all(bwsprompt.fewshot_bin(np.array([x]))[0] == spec.equispaced_bin(x) for x in np.linspace(0, 1, 401))


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


# --- the bins API, few-shot counts through lm-eval, the upstream framing ----------------------------------


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
