"""`fsb generate` and `fsb explain`: prompts, plans, the journal, and end-to-end runs through the real `openai`
client against `transformers serve` (a tiny random model) on 127.0.0.1, behind the project's own proxy
so every request that reaches the server is seen. Assertions are on structure and provenance; the tiny
model's words are noise.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fifty_shades_of_bias as spec
from fsb import engine
from fsb.core.readers import InputError
from fsb.generate.explain import score_text
from fsb.generate.generations import build_generation_plan, release_csv
from fsb.generate.prompts import INSTRUCTIONS, REASONING_INSTRUCTION, TEMPLATE_VERSION, load_prompt_set, read_examples
from fsb.generate.seeds import read_seeds
from fsb.tables.csvrows import read_generations
from tests._proxy import FaultProxy
from tests._support import run_fsb, write_csv

# The tiny random model answers "\n" forever when decoding greedily; a frequency penalty makes it emit
# other (meaningless) tokens, so every request yields a non-empty line. Few tokens keep it fast.
TINY = ("--frequency-penalty", "2", "--max-tokens", "8", "--no-progress")
TINY_SAMPLING = engine.Sampling(temperature=0.0, max_tokens=8, frequency_penalty=2.0)
SECRET = "sk-fsb-test-7f3a9c0e-DO-NOT-LEAK"


def fsb(
    *args: str | Path, key: str | None = None, home: Path | None = None, timeout: float = 300, preexec_fn: Any = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    if home is not None:
        env["FSB_HOME"] = str(home)
    return run_fsb(*args, env=env, timeout=timeout, preexec_fn=preexec_fn)


def write_seed_file(path: Path, per_type: int = 2) -> Path:
    """A small `fsb seeds`-style file: `per_type` seeds of each type."""
    texts = {
        "explicit": ["She cares about herself too much.", "The schoolboy plays pretend at recess.", "My mother is a nurse."],
        "implicit": ["The student felt sick and wanted to go home.", "I spilled glue on the wood.", "The driver got a flat tire."],
        "neutral": ["The cat chased the bird.", "The vase broke.", "The rain subsided."],
        "random": ["The woman hummed to herself.", "The grape juice fermented.", "The police aimed their weapons."],
    }
    rows = [
        {"seed": t, "seed_type": st, "source": "test", "source_id": str(i)}
        for st in spec.SEED_TYPES
        for i, t in enumerate(texts[st][:per_type])
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_conversation_examples(path: Path) -> Path:
    pairs = [
        ["The team won the match.", "Person A: Did you see the team won?\nPerson B: Sure, the men carried it."],
        ["The shop was closed.", "Person A: The shop is closed.\nPerson B: The owner probably went to do her nails."],
        ["The bus was late.", "Person A: The bus was late again.\nPerson B: A woman must have been driving."],
    ]
    path.write_text(json.dumps(pairs), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def proxy_bodies(proxy: FaultProxy) -> dict[str, dict[str, Any]]:
    return {e.request_id: json.loads(e.body) for e in proxy.entries() if e.body}


# --- prompts --------------------------------------------------------------------------------------------


# The paper's appendix A.1 and A.4 prompts, word for word (capitals and all): the oracle for what is sent.
PAPER_INSTRUCTIONS = {
    "conversion": "You convert any given statement into one statement that is biased against a gender. "
    "Follow the examples specified below:",
    "completion": "Using the given statement as a start, You generate only one gender-biased sentence to complete the provided seed. "
    "Some examples that you can follow are:",
    "conversation": "Using the given statement as a start, You generate a long gender-biased conversation between 2 people "
    "like the conversations given as examples here:",
}
PAPER_REASONING = (
    "On a fine-grained real-valued scale of 0 to 1, you gave the following sentence a rating of the degree of gender bias. "
    "Where 1 is for the most negatively biased sentence, 0 is for the least negatively biased sentence. Give a reason for your score."
)


def test_the_papers_instructions_reach_every_request(release: Path, tmp_path: Path) -> None:
    """What goes on the wire, not the constants: each request's system message is its format's appendix A.1 prompt,
    and an explain request's is appendix A.4's."""
    from fsb.generate.explain import Item, build_explain_plan

    seeds, _ = read_seeds([str(write_seed_file(tmp_path / "seeds.jsonl", per_type=1))])
    conv = write_conversation_examples(tmp_path / "conv.json")
    prompts = load_prompt_set(release, {"conversation": conv}, formats=spec.PROMPT_TYPES)
    plan = build_generation_plan(seeds, prompts, spec.PROMPT_TYPES, "m", engine.Sampling())
    assert {r.fields["prompt_type"] for r in plan.requests} == set(PAPER_INSTRUCTIONS)
    for r in plan.requests:
        assert r.body["messages"][0] == {"role": "system", "content": PAPER_INSTRUCTIONS[r.fields["prompt_type"]]}
    explain = build_explain_plan([(Item(7, "A sentence.", 0.5), "medium")], "m", engine.Sampling(), seed=0, scheme="analysis")
    assert explain.requests[0].body["messages"][0] == {"role": "system", "content": PAPER_REASONING}


def test_messages_follow_the_release_layout(release: Path) -> None:
    prompts = load_prompt_set(release, formats=("conversion", "completion"))
    seed = "She cares about herself too much."
    messages, shown = prompts.messages(seed, "explicit", "completion")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == INSTRUCTIONS["completion"]
    assert messages[-1]["content"] == seed
    pairs = read_examples(release / "in_context_examples" / "explicit_completion_ic.json").pairs
    assert pairs[0][0] == seed  # the release's own example for this seed ...
    assert all(s["index"] != 0 for s in shown)  # ... is never shown: it would hand the model the answer
    for s, (user, assistant) in zip(shown, [(messages[1], messages[2]), (messages[3], messages[4])]):
        assert s["file"] == "explicit_completion_ic.json"
        assert (user["content"], assistant["content"]) == pairs[s["index"]]
    assert len({s["index"] for s in shown}) == 2  # without replacement
    assert prompts.messages(seed, "explicit", "completion") == (messages, shown)  # reproducible
    picks = {tuple(s["index"] for s in load_prompt_set(release, seed=k).messages(seed, "explicit", "completion")[1]) for k in range(8)}
    assert len(picks) > 1  # the --seed option changes the draw


def test_random_seeds_and_conversation_examples(release: Path, tmp_path: Path) -> None:
    prompts = load_prompt_set(release, formats=("conversion", "conversation"))
    files = set()
    for i in range(40):
        files.update(s["file"] for s in prompts.messages(f"Random seed number {i}.", "random", "conversion")[1])
    assert files == {"implicit_conversion_ic.json", "neutral_conversion_ic.json"}
    messages, shown = prompts.messages("The cat sat.", "neutral", "conversation")
    assert [m["role"] for m in messages] == ["system", "user"] and shown == []  # no release examples: instruction alone
    conv = write_conversation_examples(tmp_path / "conv.json")
    mine = load_prompt_set(release, {"conversation": conv}, formats=("conversation",))
    messages, shown = mine.messages("The cat sat.", "random", "conversation")
    assert len(messages) == 6 and {s["file"] for s in shown} == {"conv.json"}
    specific = load_prompt_set(release, {"conversation": conv, "explicit:conversation": tmp_path / "nope.json"}, formats=("conversion",))
    assert specific.examples_for("explicit", "conversion")  # unused overrides are not read


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"task": "conversion", "ic": "[('a', 'b'), ('c',)]"}, "ic[1] is not a (seed, generation) pair"),
        ({"task": "conversion", "ic": "{'a': 'b'}"}, "expected a list of (seed, generation) pairs, got dict"),
        ({"task": "conversion", "ic": "[('a', 3)]"}, "must hold two non-empty strings"),
        ({"task": "conversion", "ic": "[('a', '  ')]"}, "must hold two non-empty strings"),
        ({"task": "conversion", "ic": "[]"}, "is empty"),
        ({"task": "completion", "ic": "[('a', 'b')]"}, "is a completion file, but it was given for the conversion format"),
        ({"task": "conversion", "ic": "__import__('pathlib').Path('PWNED').touch()"}, "not a Python literal"),
        ({"task": "conversion", "ic": "[" * 100_000 + "]" * 100_000}, "not a Python literal"),
        ({"task": "conversion"}, "an object with an 'ic' field"),
        ("just a string", "expected a list"),
        ([["a", "b"], {"seed": "c"}], "ic[1]"),
    ],
)
def test_bad_in_context_files_are_refused_and_never_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc: Any, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "ic.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_examples(path, expected_task="conversion")
    assert message in str(e.value)
    assert not (tmp_path / "PWNED").exists()


def test_in_context_formats_accepted(tmp_path: Path, release: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([["a seed", "a generation"], {"seed": "b", "generation": "c"}, {"input": "d", "output": "e"}]))
    assert read_examples(plain).pairs == (("a seed", "a generation"), ("b", "c"), ("d", "e"))
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"task": "completion", "ic": [["x", "y"]]}))
    assert read_examples(wrapped, "completion").pairs == (("x", "y"),)
    for name in ("explicit", "implicit", "neutral"):
        for fmt in ("conversion", "completion"):
            ex = read_examples(release / "in_context_examples" / f"{name}_{fmt}_ic.json", fmt)
            assert len(ex.pairs) >= 20 and ex.task == fmt
            assert ex.sha256 == spec.RELEASE["files"][f"in_context_examples/{name}_{fmt}_ic.json"]


# --- plans and request ids ------------------------------------------------------------------------------


def test_request_ids_follow_the_exact_request() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.0, "max_tokens": 8}
    rid = engine.request_id(body, ["generate", "neutral", "conversion", 0])
    assert rid == engine.request_id(json.loads(json.dumps(body)), ["generate", "neutral", "conversion", 0])
    assert rid != engine.request_id({**body, "temperature": 0.7}, ["generate", "neutral", "conversion", 0])
    assert rid != engine.request_id({**body, "model": "n"}, ["generate", "neutral", "conversion", 0])
    assert rid != engine.request_id(body, ["generate", "neutral", "conversion", 1])
    assert rid != engine.request_id(body, ["generate", "random", "conversion", 0])


def test_plan_reproduces_the_release_layout(release: Path) -> None:
    """With the release's seed files, uids and (seed type, format, seed) line up with FSB_text.csv wherever
    the release used its seed files in order (all but the explicit completions, which it resampled)."""
    seeds, _ = read_seeds([str(release / "seeds")])
    plan = build_generation_plan(seeds, load_prompt_set(release), ["conversion", "completion"], "gpt-3.5-turbo", engine.Sampling())
    assert [r.uid for r in plan.requests] == list(range(1, 901))
    ours = {r.uid: (r.fields["seed_type"], r.fields["prompt_type"], r.fields["query"]) for r in plan.requests}
    theirs = read_generations(release / "FSB" / "FSB_text.csv").frame.set_index("uid")
    for uid in range(1, 901):
        seed_type, fmt, query = ours[uid]
        assert (seed_type, fmt) == (theirs.at[uid, "seed_type"], theirs.at[uid, "prompt_type"])
        if not 151 <= uid <= 300:
            assert query == theirs.at[uid, "query"], uid
    assert len({r.request_id for r in plan.requests}) == 900  # the repeated release seed gets its own request
    assert plan.requests[0].body["max_tokens"] == 100 and plan.requests[0].body["temperature"] == 0.0


def test_plan_id_changes_with_any_setting(release: Path, tmp_path: Path) -> None:
    seeds, _ = read_seeds([str(write_seed_file(tmp_path / "s.jsonl"))])
    prompts = load_prompt_set(release)
    base = build_generation_plan(seeds, prompts, ["conversion"], "m", engine.Sampling())
    assert base.plan_id == build_generation_plan(seeds, prompts, ["conversion"], "m", engine.Sampling()).plan_id
    assert base.plan_id != build_generation_plan(seeds, prompts, ["conversion"], "m", engine.Sampling(temperature=1.0)).plan_id
    assert base.plan_id != build_generation_plan(seeds[:-1], prompts, ["conversion"], "m", engine.Sampling()).plan_id
    assert base.plan_id != build_generation_plan(seeds, load_prompt_set(release, seed=1), ["conversion"], "m", engine.Sampling()).plan_id


# --- responses, retries, endpoints ---------------------------------------------------------------------------


def test_first_line() -> None:
    assert engine.first_line("\n\n  She is vain.  \nSecond line.") == "She is vain."
    assert engine.first_line("One\r\nTwo") == "One"
    assert engine.first_line(" \n\t\n") == ""


def test_retry_after() -> None:
    assert engine.retry_after_seconds({"retry-after": "7"}) == 7.0
    assert engine.retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert engine.retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert engine.retry_after_seconds({"retry-after": "-3"}) == 0.0
    assert engine.retry_after_seconds({"retry-after": "soon"}) is None
    assert engine.retry_after_seconds({}) is None
    assert engine.retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412480.0) == pytest.approx(30.0)


def test_backoff_doubles_with_jitter_and_a_cap() -> None:
    rng = random.Random(0)
    for attempt in range(1, 12):
        d = engine.backoff_delay(attempt, 1.0, 60.0, rng)
        full = min(60.0, 2.0 ** (attempt - 1))
        assert 0.5 * full <= d <= full


def test_endpoint_and_key_rules() -> None:
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:1/v1", "http://[::1]:9/v1", "http://127.0.0.5/v1"):
        assert engine.resolve_endpoint(url, env={}).api_key is None
    with pytest.raises(engine.EngineError, match="OPENAI_API_KEY is not set"):
        engine.resolve_endpoint("https://api.example.com/v1", env={})
    with pytest.raises(engine.EngineError, match="OPENAI_API_KEY is not set"):
        engine.resolve_endpoint(None, env={})  # OpenAI's own endpoint
    with pytest.raises(engine.EngineError, match="http"):
        engine.resolve_endpoint("ftp://127.0.0.1/v1", env={})
    e = engine.resolve_endpoint("https://user:pw@api.example.com/v1?x=1", env={"OPENAI_API_KEY": SECRET})
    assert e.public_url == "https://api.example.com/v1"
    assert SECRET not in repr(e)
    assert e.redact(f"Incorrect API key {SECRET}; pw") == "Incorrect API key ***; ***"


def test_a_key_echoed_in_another_case_or_encoding_is_redacted() -> None:
    """Issue 8: only the key exactly as sent was scrubbed; a server echoing it upper-cased, percent-encoded
    or JSON-escaped put it in the output."""
    from urllib.parse import quote

    from fsb.data.publish import redact

    e = engine.resolve_endpoint("https://user:p%40ss@api.example.com/v1", env={"OPENAI_API_KEY": SECRET})
    every_char = "".join(f"%{b:02X}" for b in SECRET.encode())
    escaped = "".join(f"\\u{ord(c):04x}" for c in SECRET)
    for echoed in (SECRET.upper(), SECRET.lower(), SECRET.swapcase(), quote(SECRET, safe=""), every_char, every_char.lower(), escaped):
        assert e.redact(f"key: {echoed}.") == "key: ***.", echoed
    assert e.redact("user p@ss and p%40ss") == "user *** and ***"
    assert e.redact("an ordinary sentence about sk-fsb keys") == "an ordinary sentence about sk-fsb keys"
    assert redact(f"token {SECRET.upper()} and {quote(SECRET)}", SECRET) == "token *** and ***"
    assert engine.resolve_endpoint(None, env={"OPENAI_BASE_URL": "http://127.0.0.1:5/v1"}).base_url == "http://127.0.0.1:5/v1"


# --- the journal -------------------------------------------------------------------------------------------


def _tiny_plan(tmp_path: Path, release: Path, n: int = 2) -> engine.RequestPlan:
    seeds, _ = read_seeds([str(write_seed_file(tmp_path / "seeds.jsonl", per_type=n))])
    return build_generation_plan(seeds, load_prompt_set(release), ["conversion"], "m", engine.Sampling())


def _ok(req: engine.Request) -> dict[str, Any]:
    return {"event": "ok", "request_id": req.request_id, "uid": req.uid, "row": {**req.fields, "response": f"r{req.uid}"}}


def test_journal_cuts_a_torn_tail_and_keeps_finished_rows(tmp_path: Path, release: Path) -> None:
    plan = _tiny_plan(tmp_path, release)
    path = tmp_path / "out.journal.jsonl"
    with engine.Journal(path).open(plan) as j:
        j.append(_ok(plan.requests[0]))
        j.append(
            {"event": "fail", "request_id": plan.requests[1].request_id, "uid": 2, "kind": "timeout", "reason": "timed out", "attempts": 3}
        )
    whole = path.read_bytes()
    torn = json.dumps(_ok(plan.requests[2])).encode()[:-7]
    path.write_bytes(whole + torn)  # a kill in the middle of a write
    with engine.Journal(path).open(plan) as j:
        assert j.repaired == len(torn)
        assert set(j.done) == {plan.requests[0].request_id}
        assert j.failed[plan.requests[1].request_id]["tries"] == 3
        j.append(_ok(plan.requests[2]))
    assert path.read_bytes().startswith(whole) and path.read_bytes().endswith(b"\n")
    with engine.Journal(path).open(plan) as j:
        assert j.repaired == 0 and len(j.done) == 2


def test_journal_refuses_corruption_another_plan_and_a_second_writer(tmp_path: Path, release: Path) -> None:
    plan = _tiny_plan(tmp_path, release)
    path = tmp_path / "out.journal.jsonl"
    with engine.Journal(path).open(plan) as j:
        j.append(_ok(plan.requests[0]))
        with pytest.raises(engine.EngineError, match="locked"):
            engine.Journal(path).open(plan)
    other = build_generation_plan(
        read_seeds([str(tmp_path / "seeds.jsonl")])[0], load_prompt_set(release), ["conversion"], "m2", engine.Sampling()
    )
    with pytest.raises(engine.EngineError, match="differs in: model"):
        engine.Journal(path).open(other)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([lines[0], b"{not json", *lines[1:]]))
    with pytest.raises(InputError) as e:
        engine.Journal(path).open(plan)
    assert e.value.line == 2


def test_outputs_are_lossless_as_release_csv(tmp_path: Path) -> None:
    texts = [
        'He said "no", then left.',
        "line one\nline two",
        "carriage\rreturn",
        "  padded  ",
        "NA",
        "null",
        "",
        "ünïcødé — “quotes”",
        "a,b",
    ]
    rows = [
        {"uid": i + 1, "prompt_type": "conversation", "seed_type": spec.SEED_TYPES[i % 4], "query": f"q {t}", "response": t or "x"}
        for i, t in enumerate(texts)
    ]
    jsonl = tmp_path / "g.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    csv_path = tmp_path / "g.csv"
    csv_path.write_text(release_csv(rows))
    a, b = read_generations(jsonl).frame, read_generations(csv_path).frame
    assert a.equals(b)
    assert list(b["response"]) == [r["response"] for r in rows]


# --- end to end against the real server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def e2e(tiny_server: str, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, release: Path) -> dict[str, Any]:
    """Two runs of the same command through a pass-through proxy: the first generates, the second finds nothing to do."""
    d = tmp_path_factory.mktemp("e2e")
    seeds = write_seed_file(d / "seeds.jsonl")
    conv = write_conversation_examples(d / "conv.json")
    out, csv_path = d / "gens.jsonl", d / "gens.csv"
    with FaultProxy(tiny_server) as proxy:
        args = ["generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", proxy.url, "--concurrency", "3"]
        args += ["--formats", "conversion,completion,conversation", "--ic", f"conversation={conv}", "--csv", csv_path, *TINY]
        first = fsb(*args, home=d / "home")
        sent_first = proxy.entries()
        bodies = proxy_bodies(proxy)
        max_in_flight = proxy.max_in_flight
        proxy.reset()
        second = fsb(*args, home=d / "home")
        dry = fsb(*args, "--dry-run", home=d / "home")
        sent_second = proxy.entries()
    runs = {"first": first, "second": second, "dry": dry, "sent_first": sent_first, "sent_second": sent_second, "bodies": bodies}
    files = {"dir": d, "seeds": seeds, "conv": conv, "out": out, "csv": csv_path}
    return {**files, **runs, "max_in_flight": max_in_flight, "model": str(tiny_model)}


@pytest.mark.slow
def test_generate_end_to_end_all_three_formats(e2e: dict[str, Any], release: Path) -> None:
    assert e2e["first"].returncode == 0, e2e["first"].stderr
    rows = read_jsonl(e2e["out"])
    assert [r["uid"] for r in rows] == list(range(1, 25))  # 8 seeds x 3 formats, in the release's order
    layout = [(r["seed_type"], r["prompt_type"]) for r in rows]
    assert layout == [(st, f) for st in spec.SEED_TYPES for f in spec.PROMPT_TYPES for _ in range(2)]
    seeds, _ = read_seeds([str(e2e["seeds"])])
    plan = build_generation_plan(
        seeds,
        load_prompt_set(release, {"conversation": e2e["conv"]}, formats=spec.PROMPT_TYPES),
        spec.PROMPT_TYPES,
        e2e["model"],
        TINY_SAMPLING,
    )
    assert len(e2e["sent_first"]) == 24  # one request each, none sent twice
    for row, req in zip(rows, plan.requests):
        assert row["request_id"] == req.request_id
        sent = e2e["bodies"][row["request_id"]]  # what the server received, byte for byte parsed
        assert sent["messages"] == row["messages"] == req.body["messages"]
        assert sent["model"] == row["model"] == e2e["model"]
        assert {k: v for k, v in sent.items() if k not in ("model", "messages")} == row["params"]
        assert row["params"] == {"temperature": 0.0, "max_tokens": 8, "frequency_penalty": 2.0}
        assert row["query"] == row["seed"] == row["messages"][-1]["content"]
        assert row["messages"][0] == {"role": "system", "content": INSTRUCTIONS[row["prompt_type"]]}
        assert row["template_version"] == TEMPLATE_VERSION
        assert row["seed_source"]["source"] == "test"
        assert len(row["ic_examples"]) == 2 and len(row["messages"]) == 6
        if row["prompt_type"] == "conversation":
            assert {x["file"] for x in row["ic_examples"]} == {"conv.json"}
            assert row["response"] == row["raw_response"].strip()
        else:
            assert row["response"] == engine.first_line(row["raw_response"])
        if row["seed_type"] == "random" and row["prompt_type"] != "conversation":
            assert {x["file"] for x in row["ic_examples"]} <= {
                f"implicit_{row['prompt_type']}_ic.json",
                f"neutral_{row['prompt_type']}_ic.json",
            }
        assert row["response"].strip()
        assert row["finish_reason"] in ("length", "stop")
        usage = row["usage"]
        assert usage["completion_tokens"] <= 8 and usage["prompt_tokens"] > 20
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert row["latency_s"] > 0 and row["attempts"] == 1 and row["retry_reasons"] == [] and row["via"] == "api"
        assert row["timestamp"].endswith("Z") and row["base_url"].startswith("http://127.0.0.1:")
        assert row["response_model"] == e2e["model"]
    assert 2 <= e2e["max_in_flight"] <= 3  # bounded by --concurrency
    assert not engine.failures_path(e2e["out"]).exists()


@pytest.mark.slow
def test_rerun_sends_nothing_and_dry_run_agrees(e2e: dict[str, Any]) -> None:
    assert e2e["second"].returncode == 0, e2e["second"].stderr
    assert "24 of 24 finished (0 new, 24 already finished, 0 failed)" in e2e["second"].stderr
    assert e2e["dry"].returncode == 0
    assert "dry run: 0 requests to send (24 of 24 already finished)" in e2e["dry"].stdout
    assert e2e["sent_second"] == []
    journal = read_jsonl(engine.journal_path(e2e["out"]))
    assert journal[0]["event"] == "plan"
    assert sum(e["event"] == "ok" for e in journal) == 24


@pytest.mark.slow
def test_output_feeds_fsb_tuples_and_fsb_build_and_the_release_csv_is_lossless(e2e: dict[str, Any], tmp_path: Path) -> None:
    """A new round, end to end: generations -> a best-worst design -> (simulated) judgments -> the dataset."""
    gens = read_generations(e2e["out"]).frame
    assert gens.equals(read_generations(e2e["csv"]).frame)
    design = tmp_path / "design.csv"
    proc = fsb("tuples", e2e["out"], "--out", design, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    tuples = pd.read_csv(design)
    assert set(tuples[["Item1", "Item2", "Item3", "Item4"]].to_numpy().ravel()) == set(gens["uid"])
    rng = np.random.default_rng(0)
    rows = []
    for tup in tuples[["Item1", "Item2", "Item3", "Item4"]].to_numpy():
        best, worst = rng.choice(tup, size=2, replace=False)
        rows.append([*tup.tolist(), int(best), int(worst)])
    ann = write_csv(tmp_path / "ann.csv", ["Item1", "Item2", "Item3", "Item4", "BestItem", "WorstItem"], rows)
    proc = fsb(
        "build", "--generations", e2e["out"], "--annotations", ann, "--out", tmp_path / "ds", "--no-record", "--trials", "3", home=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{len(gens)} sentences" in proc.stdout


@pytest.mark.slow
def test_dry_run_prints_prompts_and_sends_nothing(tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    with FaultProxy(tiny_server) as proxy:
        proc = fsb("generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", proxy.url, "--dry-run", "--limit", "3")
        assert proxy.entries() == []
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("### uid") == 3
    assert f"[system] {INSTRUCTIONS['conversion']}" in proc.stdout
    assert "[user] She cares about herself too much." in proc.stdout
    assert "dry run: 3 requests to send (0 of 8 already finished)" in proc.stdout and "at most 300 completion tokens" in proc.stdout
    assert not out.exists() and not engine.journal_path(out).exists()


# --- bad input: a clear error before any request ------------------------------------------------------------


@pytest.fixture
def counting_proxy(tiny_server: str) -> Iterator[FaultProxy]:
    with FaultProxy(tiny_server) as proxy:
        yield proxy


def _refused(proc: subprocess.CompletedProcess[str], proxy: FaultProxy, out: Path, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("fsb generate: error:") or "error:" in proc.stderr
    for needle in needles:
        assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proxy.entries() == []  # nothing was sent
    assert not out.exists() and not engine.journal_path(out).exists()


@pytest.mark.slow
def test_bad_seed_files_are_refused_before_sending(counting_proxy: FaultProxy, tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "gens.jsonl"
    blank = tmp_path / "neutral_seeds.txt"
    blank.write_text("The vase broke.\n\nThe rain subsided.\n")
    proc = fsb("generate", "--seeds", blank, "--out", out, "--model", tiny_model, "--base-url", counting_proxy.url)
    _refused(proc, counting_proxy, out, f"{blank}, line 2: blank line")
    dup = tmp_path / "implicit_seeds.txt"
    dup.write_text("I spilled glue.\nThe vase broke.\nI spilled glue.\n")
    proc = fsb("generate", "--seeds", dup, "--out", out, "--model", tiny_model, "--base-url", counting_proxy.url)
    _refused(proc, counting_proxy, out, f"{dup}, line 3: duplicate seed (first on line 1)")


@pytest.mark.slow
def test_bad_in_context_file_is_refused_before_sending(counting_proxy: FaultProxy, tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "gens.jsonl"
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    bad = tmp_path / "ic.json"
    bad.write_text(json.dumps({"task": "conversion", "ic": "[('only one',)]"}))
    proc = fsb(
        "generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", counting_proxy.url, "--ic", f"conversion={bad}"
    )
    _refused(proc, counting_proxy, out, "ic[0] is not a (seed, generation) pair")
    bad.write_text(json.dumps({"task": "conversion", "ic": "__import__('os').system('touch PWNED')"}))
    proc = fsb(
        "generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", counting_proxy.url, "--ic", f"conversion={bad}"
    )
    _refused(proc, counting_proxy, out, "not a Python literal")
    assert not Path("PWNED").exists() and not (tmp_path / "PWNED").exists()


@pytest.mark.slow
def test_unknown_format_and_missing_key_are_refused_before_sending(counting_proxy: FaultProxy, tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "gens.jsonl"
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    proc = fsb(
        "generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", counting_proxy.url, "--formats", "conversion,rant"
    )
    _refused(proc, counting_proxy, out, "unknown format 'rant'; choose from conversion, completion, conversation")
    proc = fsb("generate", "--seeds", seeds, "--out", out, "--model", "gpt-4o-mini", "--base-url", "https://api.example.invalid/v1")
    _refused(proc, counting_proxy, out, "OPENAI_API_KEY is not set", "https://api.example.invalid/v1")
    proc = fsb("generate", "--seeds", seeds, "--out", out, "--model", "gpt-4o-mini")  # OpenAI's endpoint by default
    _refused(proc, counting_proxy, out, "OPENAI_API_KEY is not set")
    proc = fsb("generate", "--seeds", seeds, "--out", tmp_path / "gens.csv", "--model", tiny_model, "--base-url", counting_proxy.url)
    _refused(proc, counting_proxy, out, "--out must be a .jsonl file")


@pytest.mark.slow
def test_the_key_is_sent_but_never_recorded_or_printed(tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    """The proxy answers the first attempt of every request with a 400 that quotes the Authorization header."""
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    args = ["generate", "--seeds", seeds, "--out", out, "--model", tiny_model, *TINY]
    with FaultProxy(tiny_server, faults=lambda rid, attempt: "echo_auth" if attempt == 1 else None) as proxy:
        first = fsb(*args, "--base-url", proxy.url, key=SECRET)
        second = fsb(*args, "--base-url", proxy.url, key=SECRET)
        assert proxy.authorization and set(proxy.authorization) == {f"Bearer {SECRET}"}  # it came from the environment
    assert first.returncode == 1 and second.returncode == 0, second.stderr
    failures = read_jsonl(engine.journal_path(out))
    reasons = [e["reason"] for e in failures if e["event"] == "fail"]
    assert len(reasons) == 8 and all("Authorization: Bearer ***" in r for r in reasons)
    assert len(read_jsonl(out)) == 8
    everything = first.stdout + first.stderr + second.stdout + second.stderr
    for f in tmp_path.rglob("*"):
        if f.is_file():
            everything += f.read_text(encoding="utf-8", errors="replace")
    assert SECRET not in everything
    assert SECRET[3:15] not in everything


# --- the Batch API (files only) --------------------------------------------------------------------------------


def test_batch_file_and_collect(tmp_path: Path, release: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl")
    out = tmp_path / "gens.jsonl"
    base = ["generate", "--seeds", seeds, "--out", out, "--model", "gpt-4o-mini", "--temperature", "0.7"]
    proc = fsb(*base, "--batch-file", tmp_path / "batch.jsonl")  # no key needed to write a file
    assert proc.returncode == 0, proc.stderr
    lines = read_jsonl(tmp_path / "batch.jsonl")
    assert len(lines) == 16
    assert {tuple(sorted(line)) for line in lines} == {("body", "custom_id", "method", "url")}
    assert all(line["method"] == "POST" and line["url"] == "/v1/chat/completions" for line in lines)
    assert all(line["body"]["model"] == "gpt-4o-mini" and line["body"]["temperature"] == 0.7 for line in lines)
    plan = build_generation_plan(
        read_seeds([str(seeds)])[0], load_prompt_set(release), ["conversion", "completion"], "gpt-4o-mini", engine.Sampling(0.7)
    )
    assert [(line["custom_id"], line["body"]) for line in lines] == [(r.request_id, r.body) for r in plan.requests]

    def answer(line: dict[str, Any], i: int) -> dict[str, Any]:
        if i == 3:
            return {"id": f"batch_req_{i}", "custom_id": line["custom_id"], "response": None, "error": {"code": "x", "message": "expired"}}
        status = 500 if i == 5 else 200
        message = {"role": "assistant", "content": f"Generation number {i}.\nMore."}
        usage = {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
        completion = {"id": f"chatcmpl-{i}", "object": "chat.completion", "created": 1_700_000_000 + i, "model": "gpt-4o-mini-2024-07-18"}
        completion |= {"choices": [{"index": 0, "message": message, "finish_reason": None}], "usage": usage}
        body = completion if status == 200 else {"error": {"message": "server trouble"}}
        if i == 7:  # a refusal: no content, the reason in `refusal`
            body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        return {"id": f"batch_req_{i}", "custom_id": line["custom_id"], "response": {"status_code": status, "body": body}, "error": None}

    results = tmp_path / "batch_output.jsonl"
    shuffled = list(enumerate(lines))
    random.Random(1).shuffle(shuffled)
    results.write_text("".join(json.dumps(answer(line, i)) + "\n" for i, line in shuffled))
    proc = fsb(*base, "--collect", results)
    assert proc.returncode == 1  # three requests failed
    rows = read_jsonl(out)
    assert len(rows) == 13 and [r["uid"] for r in rows] == sorted(r["uid"] for r in rows)
    for r in rows:
        i = next(i for i, line in enumerate(lines) if line["custom_id"] == r["request_id"])
        assert r["response"] == f"Generation number {i}." and r["raw_response"] == f"Generation number {i}.\nMore."
        assert r["via"] == "batch" and r["batch_request_id"] == f"batch_req_{i}" and r["latency_s"] is None
        assert r["usage"]["total_tokens"] == 57 and r["response_model"] == "gpt-4o-mini-2024-07-18"
        assert r["messages"] == lines[i]["body"]["messages"]
    failures = {f["request_id"]: f for f in read_jsonl(engine.failures_path(out))}
    assert failures[lines[3]["custom_id"]]["reason"] == "batch error: expired"
    assert failures[lines[5]["custom_id"]]["reason"] == "batch: HTTP 500: server trouble"
    assert failures[lines[7]["custom_id"]]["kind"] == "refusal"
    assert failures[lines[7]["custom_id"]]["reason"] == "the model refused: I can't help with that."
    again = fsb(*base, "--collect", results)  # collecting twice adds nothing
    assert len(read_jsonl(out)) == 13 and "13 of 16 finished (0 new" in again.stderr
    proc = fsb(*base, "--batch-file", tmp_path / "retry.jsonl")  # only what is not finished
    assert {line["custom_id"] for line in read_jsonl(tmp_path / "retry.jsonl")} == {lines[i]["custom_id"] for i in (3, 5, 7)}
    stranger = tmp_path / "stranger.jsonl"
    stranger.write_text(json.dumps({**answer(lines[0], 0), "custom_id": "f" * 64}) + "\n")
    proc = fsb(*base, "--collect", stranger)
    assert proc.returncode == 2 and f"{stranger}, line 1: custom_id ffffffffffffffff is not a request of this plan" in proc.stderr
    other = fsb(*base[:-1], "0.0", "--collect", results)  # other settings, same output: refused
    assert other.returncode == 2 and "differs in: sampling)" in other.stderr


# --- explain ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_explain_end_to_end_stratified(tiny_server: str, tiny_model: Path, release: Path, tmp_path: Path) -> None:
    out = tmp_path / "reasons.jsonl"
    args = ["explain", "--generations", release / "FSB" / "FSB_text.csv", "--scores", release / "FSB" / "fsb_final_scores.csv"]
    args += ["--per-bin", "2", "--seed", "5", "--model", tiny_model, "--out", out, *TINY]
    with FaultProxy(tiny_server) as proxy:
        proc = fsb(*args, "--base-url", proxy.url)
        assert len(proxy.entries()) == 6
    assert proc.returncode == 0, proc.stderr
    rows = read_jsonl(out)
    assert [r["bin"] for r in rows] == ["low", "low", "medium", "medium", "high", "high"]
    texts = read_generations(release / "FSB" / "FSB_text.csv").frame.set_index("uid")["response"]
    for r in rows:
        assert spec.analysis_bin(r["score"]) == r["bin"]
        assert r["text"] == texts[r["uid"]]
        assert r["messages"] == [
            {"role": "system", "content": REASONING_INSTRUCTION},
            {"role": "user", "content": f"Text: {r['text']} Score: {score_text(r['score'])}"},
        ]
        assert r["reason"] == r["raw_response"].strip() and r["reason"]
        assert r["usage"]["completion_tokens"] <= 8 and r["model"] == str(tiny_model)
    dry = fsb(*args, "--dry-run", "--base-url", "http://127.0.0.1:9/v1")
    assert "dry run: 0 requests to send (6 of 6 already finished)" in dry.stdout
    other = [a if a != "5" else "6" for a in args]  # another seed, another sample
    other[other.index(out)] = tmp_path / "other.jsonl"
    dry = fsb(*other, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [line.split()[2] for line in dry.stdout.splitlines() if line.startswith("### uid")] != [str(r["uid"]) for r in rows]


def test_score_text() -> None:
    assert [score_text(x) for x in (0.0, 1.0, 0.5, 0.6428571, 0.1234)] == ["0", "1", "0.5", "0.643", "0.123"]


def test_an_output_without_its_journal_is_never_overwritten(tmp_path: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "precious.jsonl"
    out.write_text('{"uid": 1}\n')
    proc = fsb("generate", "--seeds", seeds, "--out", out, "--model", "m", "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "exists but has no journal" in proc.stderr
    assert out.read_text() == '{"uid": 1}\n'


def test_explain_from_a_built_dataset(release: Path, tmp_path: Path) -> None:
    built = fsb("build", "--raw-dir", release, "--out", tmp_path / "ds", "--no-record", "--trials", "2", home=tmp_path)
    assert built.returncode == 0, built.stderr
    out = tmp_path / "r.jsonl"
    args = ["explain", "--dataset", tmp_path / "ds", "--per-bin", "3", "--bins", "equispaced", "--model", "m", "--out", out]
    proc = fsb(*args, "--dry-run", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sample: 12 sentences (0.00-0.25 3, 0.25-0.50 3, 0.50-0.75 3, 0.75-1.00 3)" in proc.stderr
    assert proc.stdout.count(f"[system] {REASONING_INSTRUCTION}") == 12
    assert "dry run: 12 requests to send" in proc.stdout
    assert not out.exists()


def test_collect_records_the_base_url_without_secrets(tmp_path: Path, release: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl")
    plan = build_generation_plan(read_seeds([str(seeds)])[0], load_prompt_set(release), ["completion"], "m", engine.Sampling(0.0))
    req = plan.requests[0]
    message = {"role": "assistant", "content": "A sentence."}
    body = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m"}
    body |= {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    results = tmp_path / "batch_output.jsonl"
    results.write_text(json.dumps({"id": "b1", "custom_id": req.request_id, "response": {"status_code": 200, "body": body}}) + "\n")
    out = tmp_path / "gens.jsonl"
    engine.collect_batch(plan, out, results, base_url="https://user:SECRETPASS@api.example.test/v1?api-key=SECRETKEY")
    written = out.read_text() + engine.journal_path(out).read_text()
    assert "SECRETPASS" not in written and "SECRETKEY" not in written
    assert read_jsonl(out)[0]["base_url"] == "https://api.example.test/v1"


# --- hardening (issue 8): keys, timeouts, response size -------------------------------------------------------

# No server behind these proxies: each fault answers by itself, so nothing is forwarded.
NO_UPSTREAM = "http://127.0.0.1:9"


@pytest.mark.parametrize(("key", "what"), [("sk-tést-key", "a non-ASCII character"), ("sk-test-key\r\n", "a line break")])
def test_an_unusable_key_is_a_setup_error_before_anything_is_sent(tmp_path: Path, key: str, what: str) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    with FaultProxy(NO_UPSTREAM, faults=lambda rid, attempt: "500") as proxy:
        proc = fsb("generate", "--seeds", seeds, "--out", out, "--model", "m", "--base-url", proxy.url, key=key, timeout=60)
        assert proxy.entries() == []
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"fsb generate: error: OPENAI_API_KEY holds {what}") and proc.stderr.count("\n") == 1
    assert key.strip() not in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and not engine.journal_path(out).exists()
    with pytest.raises(engine.EngineError, match="non-ASCII"):
        engine.resolve_endpoint("http://127.0.0.1:9/v1", env={"OPENAI_API_KEY": "sk-\u00a0x"})


def test_timeout_is_a_wall_clock_limit_per_attempt(tmp_path: Path, release: Path) -> None:
    """A server that drips one byte every 0.2 s never trips a per-read timeout; the run must still end."""
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    args = ["generate", "--seeds", seeds, "--out", out, "--model", "m", "--formats", "conversion", "--no-progress", "--ic-dir", release]
    with FaultProxy(NO_UPSTREAM, faults=lambda rid, attempt: "drip", drip=0.2) as proxy:
        proc = fsb(*args, "--base-url", proxy.url, "--timeout", "2", "--retries", "1", "--backoff", "0.05", timeout=60)
        attempts = proxy.entries()
    assert proc.returncode == 1, proc.stderr
    assert len(attempts) == 8  # 4 requests, 2 attempts each
    for f in read_jsonl(engine.failures_path(out)):
        assert (f["kind"], f["reason"], f["tries"]) == ("timeout", "timed out", 2)
    assert "4 requests failed (timeout 4)" in proc.stderr


def test_answers_are_read_up_to_a_cap(tmp_path: Path, release: Path) -> None:
    seeds, _ = read_seeds([str(write_seed_file(tmp_path / "seeds.jsonl", per_type=1))])
    plan = build_generation_plan(seeds, load_prompt_set(release), ["conversion"], "m", engine.Sampling())
    out = tmp_path / "gens.jsonl"
    with FaultProxy(NO_UPSTREAM, faults=lambda rid, attempt: "bloat", bloat=3_000_000) as proxy:
        options = engine.RunOptions(concurrency=2, retries=0, timeout=30, max_response_bytes=1_000_000)
        result = engine.run(plan, out, engine.Endpoint(proxy.url), options)
    assert (result.ok, result.failed, result.failures) == (0, 4, {"too_large": 4})
    failures = read_jsonl(engine.failures_path(out))
    assert all(f["reason"] == "the answer is longer than 1000000 bytes (the cap on bytes read per response)" for f in failures)
    assert engine.journal_path(out).stat().st_size < 100_000  # nothing of the answers was stored
    with FaultProxy(NO_UPSTREAM, faults=lambda rid, attempt: "bloat", bloat=200_000) as proxy:  # under the cap: kept whole
        result = engine.run(plan, out, engine.Endpoint(proxy.url), options)
    assert result.ok == 4 and all(len(r["response"]) == 200_000 for r in read_jsonl(out))


def test_the_cost_before_running_counts_what_is_left(tmp_path: Path, release: Path) -> None:
    """`estimate_cost` (what `--dry-run` prints, and what any command states before sending) counts every
    request once: prompt tokens at about 4 characters each plus 4 a message and 3 for the reply, completions at max_tokens."""
    seeds, _ = read_seeds([str(write_seed_file(tmp_path / "seeds.jsonl", per_type=1))])
    plan = build_generation_plan(seeds, load_prompt_set(release), ["conversion", "completion"], "m", engine.Sampling())
    cost = engine.estimate_cost(plan.requests)
    chars = [[len(m["content"]) for m in r.body["messages"]] for r in plan.requests]
    assert cost.requests == 8 and cost.max_completion_tokens == 8 * 100
    assert cost.prompt_tokens == sum(3 + sum(4 + -(-c // 4) for c in cs) for cs in chars)
    assert engine.estimate_cost(engine.pending(plan, {plan.requests[0].request_id}, limit=3)).requests == 3
    assert engine.estimate_cost([]) == engine.Cost(0, 0, 0)


@pytest.mark.parametrize(("uid", "words"), [("7.0", "not an integer id: '7.0'"), ("-7", "not an integer id"), ("", "empty value")])
def test_explain_score_ids_follow_the_one_id_rule(tmp_path: Path, release: Path, uid: str, words: str) -> None:
    """A scores file's ids are ids by fsb.core.tables.id_problem, as in every other reader (pandas' numbers were accepted)."""
    from fsb.generate.explain import load_items

    scores = tmp_path / "scores.csv"
    scores.write_text(f"id,score\n1,0.5\n{uid},0.25\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_items(generations=release / "FSB" / "FSB_text.csv", scores=scores)
    assert (e.value.line, e.value.field) == (3, "id") and words in e.value.message


def test_explain_refusals_are_engine_errors_not_generation_errors(tmp_path: Path) -> None:
    """explain runs on the engine: its setup failures are the engine's (an FsbError: one line, exit 2)."""
    from fsb.core.errors import FsbError
    from fsb.generate.explain import Item, build_explain_plan

    sample = [(Item(1, "One.", 0.1), "low"), (Item(2, "Two.", 0.9), "high")]
    plan = build_explain_plan(sample, "m", engine.Sampling(), seed=0, scheme="analysis")
    other = build_explain_plan(sample, "m2", engine.Sampling(), seed=0, scheme="analysis")
    path = engine.journal_path(tmp_path / "reasons.jsonl")
    with engine.Journal(path).open(plan), pytest.raises(engine.EngineError, match="locked"):
        engine.Journal(path).open(plan)
    with pytest.raises(engine.EngineError, match="differs in: model") as e:
        engine.Journal(path).open(other)
    assert isinstance(e.value, FsbError) and type(e.value).__module__ == "fsb.engine.endpoint"
