"""Running a plan: bounded concurrency, retries, a wall-clock limit per attempt, a cap on bytes read per
answer, and every result journaled before it counts, so a run can be killed at any moment and rerun.

Each worker takes the next unfinished request; a failed attempt is retried as its `Failure` allows, with
exponential backoff and jitter (a 429's Retry-After pauses every worker until then); a fatal failure
(401, 403, 404) stops the run. Results go to the journal through one writer thread that groups the
fsyncs of workers finishing together. The run reports through a `Progress` the caller passes in; it
prints nothing itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import random
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fsb.engine.endpoint import Endpoint
from fsb.engine.journal import Journal, journal_path
from fsb.engine.outputs import SideOutput, check_out, check_side_outputs, pending, recover_rows, remove_stale_temporaries, write_outputs
from fsb.engine.plan import Request, RequestPlan
from fsb.engine.responses import Failure, NoText, TooLarge, backoff_delay, build_row, classify, extract, first_line, now_iso

__all__ = ["GroupCommit", "Progress", "RunOptions", "RunResult", "run"]


@dataclass(frozen=True)
class RunOptions:
    """How a run behaves: concurrency, retries, limits per attempt, and how much of the plan to send."""

    concurrency: int = 8
    retries: int = 5
    timeout: float = 60.0  # seconds of wall-clock time per attempt, from sending to the last byte of the answer
    max_response_bytes: int = 8_000_000  # a chat completion is kilobytes; more is a broken or hostile server
    backoff: float = 1.0
    max_backoff: float = 60.0
    max_retry_after: float = 600.0
    limit: int | None = None
    jitter_seed: int = 0


@dataclass
class RunResult:
    """What a run did; `exit_code` is 0 when every request it meant to send is finished."""

    planned: int = 0
    already: int = 0
    selected: int = 0
    ok: int = 0
    failed: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed: float = 0.0
    repaired_bytes: int = 0  # a torn last line of the journal, cut off
    recovered: int = 0  # finished rows the journal had lost and the output gave back
    fatal: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def remaining(self) -> int:
        """Requests this run meant to finish that are still not finished."""
        return self.selected - self.ok

    @property
    def exit_code(self) -> int:
        """0 when everything this run meant to send is finished, else 1 (rerun to retry the rest)."""
        return 0 if self.remaining == 0 and self.fatal is None else 1

    def summary_line(self) -> str:
        """One line: finished, new, failed, retries, tokens and time."""
        parts = [f"{self.ok} new", f"{self.already} already finished", f"{self.failed} failed"]
        rest = self.planned - self.already - self.ok
        if rest:
            parts.append(f"{rest} not finished")
        return (
            f"{self.already + self.ok} of {self.planned} finished ({', '.join(parts)}); {self.retries} retries; "
            f"{self.prompt_tokens} prompt + {self.completion_tokens} completion tokens in {self.elapsed:.1f} s"
        )

    def count_usage(self, usage: dict[str, Any] | None) -> None:
        """Add a finished request's token counts."""
        if usage:
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)

    def count_failure(self, kind: str) -> None:
        """Count a request that failed on its last try."""
        self.failed += 1
        self.failures[kind] = self.failures.get(kind, 0) + 1


class Progress(Protocol):
    """What a run tells its caller as it goes (the CLI draws a bar from it)."""

    def start(self, total: int, kind: str) -> None: ...
    def update(self, result: RunResult) -> None: ...
    def close(self) -> None: ...


class _Silent:
    def start(self, total: int, kind: str) -> None:
        pass

    def update(self, result: RunResult) -> None:
        pass

    def close(self) -> None:
        pass


def run(
    plan: RequestPlan,
    out: str | os.PathLike[str],
    endpoint: Endpoint,
    options: RunOptions | None = None,
    *,
    side_outputs: Sequence[SideOutput] = (),
    progress: Progress | None = None,
    force: bool = False,
) -> RunResult:
    """Send the plan's unfinished requests, journaling each result; then rewrite the output files.

    Safe to kill at any moment and to rerun with the same arguments: finished requests are never sent
    again, failed ones are retried. Raises KeyboardInterrupt after writing the outputs if interrupted.
    The key is scrubbed from everything written, even where a server echoes it in an answer. A side output
    that exists and is not fsb's unchanged is refused before anything is sent, unless `force`.
    """
    options = options or RunOptions()
    progress = progress or _Silent()
    out = check_out(out)
    check_side_outputs(side_outputs, force=force)
    result = RunResult(planned=len(plan.requests))
    started = time.monotonic()
    with Journal(journal_path(out), redact=endpoint.redact).open(plan) as journal:
        remove_stale_temporaries(out, side_outputs)
        result.repaired_bytes = journal.repaired
        result.recovered = recover_rows(plan, journal, out)
        todo = pending(plan, journal.done)
        result.already = len(plan.requests) - len(todo)
        todo = pending(plan, journal.done, options.limit)
        result.selected = len(todo)
        try:
            if todo:
                progress.start(len(todo), str(plan.summary.get("kind", "run")))
                started_event = {"event": "run", "started": now_iso(), "pending": len(todo), "base_url": endpoint.public_url}
                journal.append({**started_event, "concurrency": options.concurrency})
                asyncio.run(_Runner(todo, journal, endpoint, options, result, progress).run())
        finally:
            progress.close()
            result.elapsed = time.monotonic() - started
            result.outputs = write_outputs(plan, journal, out, side_outputs)
    return result


class GroupCommit:
    """One writer thread for the journal: events that arrive while an fsync runs share the next one.

    A worker awaits its event's future, so a request counts as finished only once it is on disk, but
    sixteen workers finishing together cost one or two fsyncs, not sixteen in a row. A worker cancelled
    while its event waits (Ctrl-C) does not lose the event: it is still written, and the thread goes on.

    Parameters
    ----------
    journal : Journal
        Where events go, through `journal.append_many(events)` (one fsync per call).
    """

    def __init__(self, journal: Journal):
        self.journal = journal
        self.pending: list[tuple[dict[str, Any], concurrent.futures.Future[None]]] = []
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._loop, name="fsb-journal", daemon=True)
        self.thread.start()

    def submit(self, event: dict[str, Any]) -> concurrent.futures.Future[None]:
        """Queue an event; the future is done once it is on disk."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self.cond:
            if self.closed:
                raise RuntimeError("the journal writer is closed")
            self.pending.append((event, future))
            self.cond.notify()
        return future

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.pending and not self.closed:
                    self.cond.wait()
                if not self.pending:
                    return
                batch, self.pending = self.pending, []
            # A worker cancelled while its result waited here (Ctrl-C, SIGTERM) no longer listens, but
            # its result is still written: it is a finished, paid-for request. Marking the futures
            # running first means none can be cancelled between the write and set_result.
            listening = [future for _, future in batch if future.set_running_or_notify_cancel()]
            try:
                self.journal.append_many([event for event, _ in batch])
            except BaseException as e:  # a full disk: every waiting worker hears of it
                for future in listening:
                    future.set_exception(e)
            else:
                for future in listening:
                    future.set_result(None)

    def close(self) -> None:
        """Write what is pending, then stop the thread."""
        with self.cond:
            self.closed = True
            self.cond.notify()
        self.thread.join()


class _Runner:
    """Sends requests with at most `concurrency` in flight, retrying each as its failure allows, journaling every result."""

    def __init__(
        self, requests: list[Request], journal: Journal, endpoint: Endpoint, options: RunOptions, result: RunResult, progress: Progress
    ):
        self.requests = requests
        self.journal = journal
        self.endpoint = endpoint
        self.options = options
        self.result = result
        self.progress = progress
        self.rng = random.Random(options.jitter_seed)
        self.pause_until = 0.0
        self.writer = GroupCommit(journal)

    async def _append(self, event: dict[str, Any]) -> None:
        await asyncio.wrap_future(self.writer.submit(event))

    async def run(self) -> None:
        """Send every request with at most `concurrency` in flight; return when all are finished or failed."""
        import openai

        client = openai.AsyncOpenAI(
            base_url=self.endpoint.base_url, api_key=self.endpoint.api_key or "no-key", max_retries=0, timeout=self.options.timeout
        )
        pending = iter(self.requests)
        try:
            async with client:
                workers = [asyncio.create_task(self._worker(client, pending)) for _ in range(max(1, self.options.concurrency))]
                try:
                    await asyncio.gather(*workers)
                finally:
                    for w in workers:
                        w.cancel()
                    await asyncio.gather(*workers, return_exceptions=True)
        finally:
            self.writer.close()

    async def _worker(self, client: Any, pending: Iterable[Request]) -> None:
        for req in pending:
            if self.result.fatal is not None:
                return
            await self._one(client, req)

    async def _wait_pause(self) -> None:
        while (delay := self.pause_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    async def _attempt(self, client: Any, req: Request) -> Any:
        """One attempt: send, read at most `max_response_bytes` of the answer, parse it as JSON."""
        cap = self.options.max_response_bytes
        headers = {"X-FSB-Request-Id": req.request_id}
        stream = client.chat.completions.with_streaming_response.create(**req.body, extra_headers=headers, timeout=self.options.timeout)
        async with stream as response:
            chunks, size = [], 0
            async for chunk in response.iter_bytes():
                size += len(chunk)
                if size > cap:
                    raise TooLarge(f"the answer is longer than {cap} bytes (the cap on bytes read per response)")
                chunks.append(chunk)
        return json.loads(b"".join(chunks))

    async def _one(self, client: Any, req: Request) -> None:
        errors: list[str] = []
        attempt = 0
        while True:
            attempt += 1
            await self._wait_pause()
            if self.result.fatal is not None:
                return
            t0 = time.monotonic()
            try:
                doc = await asyncio.wait_for(self._attempt(client, req), self.options.timeout)  # wall clock, not per read
                latency = time.monotonic() - t0
                content, finish_reason, usage, meta = extract(doc)
                text = first_line(content) if req.one_line else content.strip()
                if not text:
                    raise NoText(finish_reason, meta.get("refusal"))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = classify(exc, self.endpoint)
                if failure is None:
                    raise
                errors.append(f"{failure.kind}: {failure.reason}")
                if failure.fatal:
                    self.result.fatal = failure.reason
                if failure.fatal or not failure.retryable or attempt > self.options.retries:
                    await self._fail(req, failure, attempt)
                    return
                self.result.retries += 1
                if failure.retry_after is not None:
                    if failure.retry_after > self.options.max_retry_after:
                        asked, cap = failure.retry_after, self.options.max_retry_after
                        reason = f"{failure.reason}; the server asked to wait {asked:.0f} s, more than {cap:.0f} s"
                        await self._fail(req, Failure(failure.kind, reason, False, status=failure.status), attempt)
                        return
                    delay = failure.retry_after * (1.0 + 0.1 * self.rng.random())  # never earlier than asked
                else:
                    delay = backoff_delay(attempt, self.options.backoff, self.options.max_backoff, self.rng)
                if failure.kind == "rate_limit":  # everyone waits: the limit is the account's, not the request's
                    self.pause_until = max(self.pause_until, time.monotonic() + delay)
                    await self._wait_pause()
                else:
                    await asyncio.sleep(delay)
                continue
            meta_kw = {"endpoint_url": self.endpoint.public_url, "latency": latency, "timestamp": now_iso()}
            row = build_row(req, content, text, finish_reason, usage, meta, **meta_kw, attempts=attempt, retry_reasons=errors, via="api")
            await self._append({"event": "ok", "request_id": req.request_id, "uid": req.uid, "row": row})
            self.result.ok += 1
            self.result.count_usage(usage)
            self.progress.update(self.result)
            return

    async def _fail(self, req: Request, failure: Failure, attempts: int) -> None:
        event = {
            "event": "fail",
            "request_id": req.request_id,
            "uid": req.uid,
            "kind": failure.kind,
            "reason": failure.reason,
            "status": failure.status,
            "attempts": attempts,
            "timestamp": now_iso(),
        }
        await self._append(event)
        self.result.count_failure(failure.kind)
        self.progress.update(self.result)
