"""Long-run behaviour of `fsb generate` against the real server behind the project's fault-injecting proxy:
429 with Retry-After, 500, hangs past the timeout, dropped connections and malformed JSON end with one
stored generation per request and none twice; failures are recorded and retried on the next run; a
refused key stops the run; and a run killed with SIGKILL (or interrupted) resumes to the same final set.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fsb import engine
from fsb.engine.journal import parse_journal
from fsb.generate.generations import build_generation_plan
from fsb.generate.prompts import load_prompt_set
from fsb.generate.seeds import read_seeds
from tests._proxy import FaultProxy, first_attempts
from tests.generate.test_generate import SECRET, TINY, TINY_SAMPLING, fsb, read_jsonl, write_seed_file

pytestmark = pytest.mark.slow  # every test here runs the real server

KIND = {"429": "rate_limit", "500": "server_error", "hang": "timeout", "drop": "connection", "malformed": "malformed"}


def _plan(seeds: Path, release: Path, model: Path) -> engine.RequestPlan:
    return build_generation_plan(
        read_seeds([str(seeds)])[0], load_prompt_set(release), ["conversion", "completion"], str(model), TINY_SAMPLING
    )


def _journal_events(out: Path) -> list[dict[str, Any]]:
    path = engine.journal_path(out)
    events, _, _ = parse_journal(path, path.read_bytes())
    return events


def _ok_ids(out: Path) -> list[str]:
    return [e["request_id"] for e in _journal_events(out) if e["event"] == "ok"]


def test_every_fault_ends_with_one_stored_generation_each(tiny_server: str, tiny_model: Path, release: Path, tmp_path: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=3)
    out = tmp_path / "gens.jsonl"
    faults = first_attempts(["429", "500", "hang", "drop", "malformed"], twice=4)  # every request fails once, some twice
    # --timeout is a wall-clock limit per attempt: it must cover the wait in the one-at-a-time server's queue on a busy machine
    # (an answer that comes after it is a retry, which this test counts as a second delivery).
    with FaultProxy(tiny_server, faults=faults, hang=30, retry_after="1") as proxy:
        args = ["generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", proxy.url]
        proc = fsb(*args, "--concurrency", "4", "--timeout", "10", "--backoff", "0.05", "--retries", "4", *TINY)
        log = proxy.entries()
    assert proc.returncode == 0, proc.stderr
    plan = _plan(seeds, release, tiny_model)
    rows = read_jsonl(out)
    assert [(r["uid"], r["request_id"]) for r in rows] == [(r.uid, r.request_id) for r in plan.requests]  # all 24, each once
    ok = _ok_ids(out)
    assert sorted(ok) == sorted(r.request_id for r in plan.requests)  # one finished record per request, none twice
    assert not [e for e in _journal_events(out) if e["event"] == "fail"]
    applied = Counter(e.fault for e in log if e.fault)
    assert set(applied) == set(KIND) and min(applied.values()) >= 4
    for row in rows:
        mine = sorted((e for e in log if e.request_id == row["request_id"]), key=lambda e: e.t)
        delivered = [e for e in mine if e.fault is None and e.status == 200]
        assert len(delivered) == 1 and mine[-1] is delivered[0]  # one answer got through, and nothing was asked after it
        assert row["attempts"] == len(mine) >= 2
        assert [reason.split(":")[0] for reason in row["retry_reasons"]] == [KIND[e.fault] for e in mine if e.fault]
        for before, after in itertools.pairwise(mine):
            if before.fault == "429":  # Retry-After: 1 was honoured (a lower bound: a busy machine only makes it later)
                assert after.t - before.t >= 0.98
    assert not engine.failures_path(out).exists()


def test_failures_are_recorded_with_reasons_and_retried_next_run(tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=3)
    out = tmp_path / "gens.jsonl"
    order: dict[str, int] = {}

    def every_third_always_500(request_id: str, attempt: int) -> str | None:
        return "500" if order.setdefault(request_id, len(order)) % 3 == 0 else None

    args = ["generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--retries", "1", "--backoff", "0.05", "--concurrency", "4"]
    with FaultProxy(tiny_server, faults=every_third_always_500) as proxy:
        first = fsb(*args, "--base-url", proxy.url, *TINY[:-1])  # with the progress bar
        doomed = {rid for rid, n in order.items() if n % 3 == 0}
        failures = read_jsonl(engine.failures_path(out))
        finished_first = {r["request_id"] for r in read_jsonl(out)}
        proxy.faults = lambda request_id, attempt: None
        proxy.reset()
        second = fsb(*args, "--base-url", proxy.url, *TINY)
        resent = Counter(e.request_id for e in proxy.entries())
    assert first.returncode == 1
    assert len(doomed) == 8
    assert "failed=8" in first.stderr and "retries=" in first.stderr and "req/s" in first.stderr  # the progress bar
    assert f"8 requests failed (server_error 8); reasons in {engine.failures_path(out)}" in first.stderr
    assert {f["request_id"] for f in failures} == doomed and len(finished_first) == 16
    assert all(f["reason"] == "HTTP 500: injected server error" and f["tries"] == 2 and f["kind"] == "server_error" for f in failures)
    events = _journal_events(out)
    failed = [e for e in events if e["event"] == "fail"]
    assert {e["request_id"] for e in failed} == doomed
    assert all(e["reason"] == "HTTP 500: injected server error" and e["attempts"] == 2 and e["status"] == 500 for e in failed)
    assert second.returncode == 0, second.stderr
    assert resent == Counter(doomed)  # only the failed ones were sent again, once each
    rows = read_jsonl(out)
    assert len(rows) == 24 and len({r["request_id"] for r in rows}) == 24
    assert not engine.failures_path(out).exists()


def test_failures_file_lists_what_is_left(tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    with FaultProxy(tiny_server, faults=lambda rid, attempt: "500" if attempt <= 2 else None) as proxy:
        args = ["generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", proxy.url, "--retries", "0", *TINY]
        for run, tries in ((1, 1), (2, 2)):  # the count of tries adds up across runs
            proc = fsb(*args)
            assert proc.returncode == 1, run
            failures = read_jsonl(engine.failures_path(out))
            assert [f["uid"] for f in failures] == list(range(1, 9))
            assert all(f["kind"] == "server_error" and f["tries"] == tries and f["query"] and f["last_try"] for f in failures)
            assert not out.exists()  # nothing finished, nothing to feed `fsb build`
        proc = fsb(*args)
    assert proc.returncode == 0
    assert len(read_jsonl(out)) == 8 and not engine.failures_path(out).exists()


def test_a_refused_key_stops_the_run(tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=3)
    out = tmp_path / "gens.jsonl"
    with FaultProxy(tiny_server, faults=lambda rid, attempt: "401") as proxy:
        proc = fsb("generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", proxy.url, "--concurrency", "2", *TINY)
        sent = len(proxy.entries())
    assert proc.returncode == 1
    assert "stopped: HTTP 401: injected: invalid API key (check OPENAI_API_KEY)" in proc.stderr
    assert 1 <= sent <= 2  # the requests already in flight, not the other 22


def _wait_for(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_killed_midway_resumes_to_the_same_final_set(tiny_server: str, tiny_model: Path, release: Path, tmp_path: Path, how: str) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=3)
    out = tmp_path / "gens.jsonl"
    plan = _plan(seeds, release, tiny_model)
    with FaultProxy(tiny_server, latency=0.3) as proxy:
        proxy.hold_after(6)  # exactly 6 requests can finish; later ones wait, unanswered, until the kill
        args = ["generate", "--seeds", seeds, "--out", out, "--model", tiny_model, "--base-url", proxy.url, "--concurrency", "2", *TINY]
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        # A shell starts background jobs with SIGINT ignored, and a child inherits that (Python then never
        # raises KeyboardInterrupt): give the run the default disposition, as a terminal would.
        run = subprocess.Popen(
            [sys.executable, "-m", "fsb", *map(str, args)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        journal = engine.journal_path(out)
        _wait_for(lambda: journal.exists() and journal.read_bytes().count(b'"event":"ok"') >= 6)
        run.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGINT)
        _, stderr = run.communicate(timeout=60)
        finished_before = set(_ok_ids(out))
        assert len(finished_before) == 6
        if how == "SIGKILL":
            assert run.returncode == -signal.SIGKILL
            assert not out.exists()  # the output is written when a run ends; the journal has everything
            with journal.open("ab") as f:  # and a kill in the middle of a write leaves half a line
                f.write(b'{"event":"ok","request_id":"' + plan.requests[-1].request_id.encode() + b'","uid":24,"row":{"uid":24,"resp')
            # a file that only looks like fsb's temporary (fsb registers its own in .fsb-scratch.json): a user's,
            # so it is kept as it is
            stale = out.with_name(f".{out.name}.k1ll3d.tmp")
            stale.write_text('{"uid": 1, "resp')
        else:
            assert run.returncode == 130 and "interrupted" in stderr
            assert {r["request_id"] for r in read_jsonl(out)} == finished_before  # Ctrl-C still writes what is finished
        proxy.release()
        proxy.reset()
        again = fsb(*args)
        resent = Counter(e.request_id for e in proxy.entries())
    assert again.returncode == 0, again.stderr
    if how == "SIGKILL":
        assert "cut off a torn last line" in again.stderr
        assert stale.read_text() == '{"uid": 1, "resp', "a look-alike of fsb's temporary is never swept"
    assert not set(resent) & finished_before  # nothing finished was sent again
    assert set(resent.values()) == {1} and len(resent) == 24 - len(finished_before)
    rows = read_jsonl(out)
    assert [(r["uid"], r["request_id"]) for r in rows] == [(r.uid, r.request_id) for r in plan.requests]  # the same final set
    assert sorted(_ok_ids(out)) == sorted(r.request_id for r in plan.requests)  # one record each in the journal too
    assert json.loads(engine.journal_path(out).read_text().splitlines()[0])["event"] == "plan"


# --- hardening (issue 8): lost journals, echoed keys, a full disk ------------------------------------------------


def _counting_run(proxy: FaultProxy, seeds: Path, out: Path, model: Path, *extra: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    args = ["generate", "--seeds", seeds, "--out", out, "--model", model, "--base-url", proxy.url, "--concurrency", "2"]
    return fsb(*args, *TINY, *extra, **kw)


@pytest.mark.parametrize("cut", ["empty", "half"])
def test_a_truncated_journal_never_costs_finished_rows(tiny_server: str, tiny_model: Path, release: Path, tmp_path: Path, cut: str) -> None:
    """Issue 8: the journal truncated beside a finished output, then a rerun with --limit 1, lost every other row.
    Now the output gives its rows back to the journal: nothing lost, nothing sent twice, over the whole sequence."""
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=2)
    out = tmp_path / "gens.jsonl"
    plan = _plan(seeds, release, tiny_model)
    journal = _journal_file(out)
    with FaultProxy(tiny_server) as proxy:
        first = _counting_run(proxy, seeds, out, tiny_model, "--limit", "10")
        assert first.returncode == 0, first.stderr
        before = read_jsonl(out)
        assert len(before) == 10
        data = journal.read_bytes()
        journal.write_bytes(b"" if cut == "empty" else data[: len(data) // 2])
        second = _counting_run(proxy, seeds, out, tiny_model, "--limit", "1")
        assert second.returncode == 0, second.stderr
        after = read_jsonl(out)
        third = _counting_run(proxy, seeds, out, tiny_model)
        sent = Counter(e.request_id for e in proxy.entries())
    assert "finished rows; took them back from" in second.stderr
    assert len(after) == 11 and [r for r in after if r["request_id"] in {b["request_id"] for b in before}] == before  # kept as they were
    assert third.returncode == 0, third.stderr
    rows = read_jsonl(out)
    assert [(r["uid"], r["request_id"]) for r in rows] == [(r.uid, r.request_id) for r in plan.requests]  # 0 lost
    assert set(sent.values()) == {1} and len(sent) == 16  # 0 sent twice
    assert sorted(_ok_ids(out)) == sorted(r.request_id for r in plan.requests)  # the journal whole again, each once


def test_an_output_of_another_plan_beside_an_empty_journal_is_refused(tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out = tmp_path / "gens.jsonl"
    with FaultProxy(tiny_server) as proxy:
        assert _counting_run(proxy, seeds, out, tiny_model, "--limit", "2").returncode == 0
        _journal_file(out).write_bytes(b"")
        kept = out.read_bytes()
        proc = _counting_run(proxy, seeds, out, tiny_model, "--temperature", "0.5")  # other settings: other request ids
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{out}, line 1: a row that is not a request of this run's plan" in proc.stderr
    assert out.read_bytes() == kept


def test_a_key_echoed_in_a_completion_is_written_nowhere(tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    """Issue 8: a 200 whose completion quoted the key stored it in the output, the journal and the CSV."""
    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out, csv_path = tmp_path / "gens.jsonl", tmp_path / "gens.csv"
    faults = first_attempts(["echo_key_ok", "echo_auth"])  # half echo it in a 200, half in a 400 (then a retry)
    with FaultProxy(tiny_server, faults=faults) as proxy:
        args = ["--csv", csv_path, "--formats", "conversion,conversation", "--retries", "0"]
        first = _counting_run(proxy, seeds, out, tiny_model, *args, key=SECRET)
        second = _counting_run(proxy, seeds, out, tiny_model, *args, key=SECRET)
    assert first.returncode == 1 and second.returncode == 0, second.stderr
    rows = read_jsonl(out)
    echoed = [r for r in rows if r["raw_response"].startswith("Your key is")]
    assert len(echoed) == 4 and all(r["raw_response"] == "Your key is ***, keep it.\nAgain: ***" for r in echoed)
    assert all(r["response_id"] == "chatcmpl-***" for r in echoed)
    everything = first.stdout + first.stderr + second.stdout + second.stderr
    for f in tmp_path.rglob("*"):
        if f.is_file():
            everything += f.read_text(encoding="utf-8", errors="replace")
    assert "Your key is ***" in everything and "Authorization: Bearer ***" in everything
    assert SECRET not in everything and SECRET[3:15] not in everything


def test_a_key_echoed_in_another_case_or_encoding_is_written_nowhere(tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    """Issue 8: a server echoing the key upper-cased, lower-cased, percent-encoded or \\u-escaped slipped past
    the exact-match scrub into the output, the journal and the CSV."""
    from urllib.parse import unquote

    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=1)
    out, csv_path = tmp_path / "gens.jsonl", tmp_path / "gens.csv"
    with FaultProxy(tiny_server, faults=lambda rid, attempt: "echo_key_disguised") as proxy:
        args = ["--csv", csv_path, "--formats", "conversion", "--retries", "0"]
        proc = _counting_run(proxy, seeds, out, tiny_model, *args, key=SECRET)
    assert proc.returncode == 0, proc.stderr
    rows = read_jsonl(out)
    assert rows and all(r["raw_response"] == "KEY *** url *** json *** lower ***" for r in rows)
    everything = proc.stdout + proc.stderr
    for f in tmp_path.rglob("*"):
        if f.is_file():
            everything += f.read_text(encoding="utf-8", errors="replace")
    decoded = unquote(everything).encode().decode("unicode_escape", errors="replace").lower()
    assert SECRET.lower() not in decoded and SECRET[3:15].lower() not in decoded


def test_a_full_disk_is_one_line_and_the_journal_stays_whole(tiny_server: str, tiny_model: Path, release: Path, tmp_path: Path) -> None:
    """A file-size limit (EFBIG, as a full disk's ENOSPC) stops the journal mid-run: one line, exit 2, and the
    rerun finishes with every row once."""
    import resource

    seeds = write_seed_file(tmp_path / "seeds.jsonl", per_type=2)
    out = tmp_path / "gens.jsonl"
    plan = _plan(seeds, release, tiny_model)
    journal = _journal_file(out)
    with FaultProxy(tiny_server) as proxy:
        assert _counting_run(proxy, seeds, out, tiny_model, "--limit", "2").returncode == 0
        limit = journal.stat().st_size + 4000  # room for the run record and about one row, not three

        def small_disk() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        full = _counting_run(proxy, seeds, out, tiny_model, preexec_fn=small_disk)
        left = journal.read_bytes()
        again = _counting_run(proxy, seeds, out, tiny_model)
    assert full.returncode == 2, full.stderr
    assert "Traceback" not in full.stderr
    errors = [line for line in full.stderr.splitlines() if "error" in line]
    assert errors == [f"fsb generate: error: {journal}: File too large"], full.stderr
    assert len(left) <= limit
    events, good, torn = parse_journal(journal, left)  # whole lines only: nothing torn, nothing corrupt
    assert torn == 0 and good == len(left) and events[0]["event"] == "plan"
    assert again.returncode == 0, again.stderr
    assert "torn" not in again.stderr
    rows = read_jsonl(out)
    assert [(r["uid"], r["request_id"]) for r in rows] == [(r.uid, r.request_id) for r in plan.requests]
    assert sorted(_ok_ids(out)) == sorted(r.request_id for r in plan.requests)


def _journal_file(out: Path) -> Path:
    return engine.journal_path(out)
