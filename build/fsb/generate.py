"""Seeds -> generations through any OpenAI-compatible chat endpoint, resumable at any moment.

A *plan* is the list of requests a command means: one per (seed, format), numbered by uid in the
release's order (seed type, then format, then seed order), each with a request id that is the sha256
of the exact request body (model, messages, sampling settings) and its place (seed type, format,
occurrence). A run sends the requests of the plan that are not finished yet.

Durability: every finished generation is appended to a journal (`<out stem>.journal.jsonl`) as one
line, written and fsync'd before the request counts as finished (workers that finish together share
one fsync); failures are appended too, with their reason. On start the journal is read back: a torn
last line (a kill mid-write) is cut off, finished ids are skipped, failed ones are tried again. A
journal belongs to one plan (its first line records the plan id): rerunning with other seeds, prompts,
model or settings into the same output is refused. The journal is locked while a run writes it, so two
runs never interleave. The output (`--out`, JSON lines
that `fsb build` reads) and the failures file are rewritten from the journal, atomically, when a run
ends (also after Ctrl-C), sorted by uid, each uid at most once.

Long runs: bounded concurrency, retries with exponential backoff and jitter on 429, 408, 409, 5xx,
timeouts, dropped connections and malformed responses (a 429's Retry-After pauses every worker until
then); 401, 403 and 404 stop the run (every request would fail the same way). The API key is read from
OPENAI_API_KEY only and is scrubbed from anything recorded or printed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import fcntl
import hashlib
import ipaddress
import json
import math
import os
import random
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import fifty_shades_of_bias as spec

from . import __version__
from ._io import InputError, atomic_write, iter_jsonl, read_utf8, sha256_file
from .errors import FsbError
from .prompts import TEMPLATE_VERSION, PromptSet
from .seeds import Seed

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "Endpoint",
    "Failure",
    "GenerateError",
    "Journal",
    "Plan",
    "Request",
    "RunOptions",
    "RunResult",
    "Sampling",
    "backoff_delay",
    "build_generation_plan",
    "classify",
    "collect_batch",
    "dry_run",
    "first_line",
    "journal_path",
    "request_id",
    "resolve_endpoint",
    "retry_after_seconds",
    "run",
    "write_batch",
    "write_outputs",
]

# Sentence formats want one line (the release kept the first line of each answer); a conversation is long.
DEFAULT_MAX_TOKENS = {"conversion": 100, "completion": 100, "conversation": 512}
RELEASE_COLUMNS = ("uid", "prompt_type", "seed_type", "query", "response")
BATCH_MAX_REQUESTS = 50_000  # the OpenAI Batch API's limits per input file
BATCH_MAX_BYTES = 190_000_000
_LOCAL_HOSTS = {"localhost", "localhost.localdomain"}


class GenerateError(FsbError):
    """A problem with the run's setup (no key for a remote endpoint, a locked or foreign journal, a refused key)."""


# --- endpoint and key -----------------------------------------------------------------------------


def _is_local(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() in _LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Endpoint:
    """Where requests go, and the key (from the environment only; never printed, logged or stored)."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)

    @property
    def local(self) -> bool:
        """On this machine (a loopback address or localhost): such a server may need no key."""
        return _is_local(urlsplit(self.base_url).hostname)

    @property
    def public_url(self) -> str:
        """The base URL without user info or query string, as recorded in the output."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def redact(self, text: str) -> str:
        """`text` with the key (and any user info of the URL) replaced by ***."""
        for secret in (self.api_key, urlsplit(self.base_url).password):
            if secret:
                text = text.replace(secret, "***")
        return text


def resolve_endpoint(base_url: str | None = None, env: Mapping[str, str] | None = None) -> Endpoint:
    """The endpoint from `--base-url` (else $OPENAI_BASE_URL, else OpenAI's) and the key from $OPENAI_API_KEY.

    A missing key is an error unless the endpoint is on this machine (127.0.0.1, ::1, localhost).
    """
    env = os.environ if env is None else env
    url = (base_url or env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GenerateError(f"--base-url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {url!r}")
    key = env.get("OPENAI_API_KEY") or None
    endpoint = Endpoint(url.rstrip("/"), key)
    if key is None and not endpoint.local:
        raise GenerateError(
            f"OPENAI_API_KEY is not set, and {endpoint.public_url} is not on this machine: set the key in the environment "
            "(it is never read from the command line). Only a local server (127.0.0.1, ::1, localhost) may run without one."
        )
    return endpoint


# --- sampling settings and requests ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sampling:
    """Sampling settings sent with every request; None leaves a setting to the server's default."""

    temperature: float | None = 0.0
    max_tokens: int | None = None  # None: the format's default (DEFAULT_MAX_TOKENS)
    top_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def params(self, default_max_tokens: int) -> dict[str, Any]:
        """The request-body fields, in a fixed order."""
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        out["max_tokens"] = self.max_tokens if self.max_tokens is not None else default_max_tokens
        for name in ("top_p", "frequency_penalty", "presence_penalty", "seed"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.stop:
            out["stop"] = list(self.stop)
        return out


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()


def request_id(body: Mapping[str, Any], key: Sequence[Any]) -> str:
    """The id of a request: sha256 of its exact body and its place in the plan (kind, seed type, format, occurrence)."""
    return hashlib.sha256(_canonical({"body": body, "key": list(key)})).hexdigest()


@dataclass(frozen=True)
class Request:
    """One planned request: its uid, id, exact body, and the fields its output row starts with."""

    uid: int
    request_id: str
    body: dict[str, Any]
    fields: dict[str, Any]
    provenance: dict[str, Any]
    response_field: str = "response"
    one_line: bool = True  # keep the first non-empty line (the release's sentences) or the whole answer


@dataclass(frozen=True)
class Plan:
    """The requests of one command, in uid order, and a summary of what made them (for refusals and reports)."""

    requests: list[Request]
    summary: dict[str, Any]

    @property
    def plan_id(self) -> str:
        """A hash of every (uid, request id): plans with the same id send the same requests under the same uids."""
        h = hashlib.sha256()
        for r in self.requests:
            h.update(f"{r.uid} {r.request_id}\n".encode())
        return h.hexdigest()


def build_generation_plan(
    seeds: Sequence[Seed],
    prompts: PromptSet,
    formats: Sequence[str],
    model: str,
    sampling: Sampling,
) -> Plan:
    """One request per seed and format; uids run 1.. by seed type, then format, then seed order (the release's layout)."""
    unknown = [f for f in formats if f not in spec.PROMPT_TYPES]
    if unknown or not formats:
        raise ValueError(f"unknown formats {unknown}; expected some of {', '.join(spec.PROMPT_TYPES)}")
    requests: list[Request] = []
    seeds_hash = hashlib.sha256()
    counts: dict[str, int] = {}
    for seed_type in spec.SEED_TYPES:
        group = [s for s in seeds if s.seed_type == seed_type]
        counts[seed_type] = len(group)
        for s in group:
            seeds_hash.update(_canonical([s.seed_type, s.text, s.occurrence]))
        for fmt in spec.PROMPT_TYPES:
            if fmt not in formats:
                continue
            for s in group:
                messages, shown = prompts.messages(s.text, seed_type, fmt, s.occurrence)
                body = {"model": model, "messages": messages, **sampling.params(DEFAULT_MAX_TOKENS[fmt])}
                rid = request_id(body, ["generate", seed_type, fmt, s.occurrence])
                uid = len(requests) + 1
                fields = {"uid": uid, "seed_type": seed_type, "prompt_type": fmt, "query": s.text, "seed": s.text}
                provenance = {"seed_source": s.provenance(), "ic_examples": shown, "template_version": TEMPLATE_VERSION}
                requests.append(Request(uid, rid, body, fields, provenance, "response", one_line=fmt != "conversation"))
    ids = [r.request_id for r in requests]
    if len(set(ids)) != len(ids):  # read_seeds refuses duplicates, so this is a bug, not bad input
        raise AssertionError("two planned requests share an id")
    summary = {
        "kind": "generate",
        "model": model,
        "formats": [f for f in spec.PROMPT_TYPES if f in formats],
        "seeds": counts,
        "seeds_sha256": seeds_hash.hexdigest(),
        "sampling": {**sampling.params(0), "max_tokens": sampling.max_tokens or {f: DEFAULT_MAX_TOKENS[f] for f in formats}},
        "shots": prompts.shots,
        "ic_seed": prompts.seed,
        "ic_files": prompts.describe(),
        "template_version": TEMPLATE_VERSION,
        "requests": len(requests),
    }
    return Plan(requests, summary)


# --- responses ------------------------------------------------------------------------------------------


def first_line(text: str) -> str:
    """The first non-blank line, stripped (the release kept `answer.strip().split("\\n")[0]`)."""
    for line in text.split("\n"):
        if line.strip():
            return line.strip()
    return ""


class _Malformed(Exception):
    """The server answered 200 with something that is not a usable chat completion."""


class _Empty(Exception):
    """The model answered with no text."""


def _extract(doc: Any) -> tuple[str, str | None, dict[str, Any] | None, dict[str, Any]]:
    """(content, finish_reason, usage, response metadata) from a chat completion object or dict."""
    if hasattr(doc, "model_dump"):
        doc = doc.model_dump()
    if not isinstance(doc, dict):
        raise _Malformed(f"expected a JSON object, got {type(doc).__name__}")
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Malformed("the response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _Malformed("the first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise _Malformed(f"message content is {type(content).__name__}, not text")
    usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else None
    if usage is not None:
        usage = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    meta = {"response_model": doc.get("model"), "response_id": doc.get("id"), "system_fingerprint": doc.get("system_fingerprint")}
    if isinstance(message.get("refusal"), str) and message["refusal"].strip():
        meta["refusal"] = message["refusal"]
    created = doc.get("created")
    if isinstance(created, int | float) and created > 0:
        meta["created"] = created
    return content or "", choice.get("finish_reason"), usage, meta


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _build_row(
    req: Request,
    content: str,
    text: str,
    finish_reason: str | None,
    usage: dict[str, Any] | None,
    meta: dict[str, Any],
    *,
    endpoint_url: str | None,
    latency: float | None,
    timestamp: str,
    attempts: int,
    retry_reasons: list[str],
    via: str,
) -> dict[str, Any]:
    body = req.body
    row: dict[str, Any] = dict(req.fields)
    row[req.response_field] = text
    row.update(
        {
            "request_id": req.request_id,
            "model": body["model"],
            "params": {k: v for k, v in body.items() if k not in ("model", "messages")},
            "messages": body["messages"],
            **req.provenance,
            "raw_response": content,
            "finish_reason": finish_reason,
            "usage": usage,
            "response_model": meta.get("response_model"),
            "response_id": meta.get("response_id"),
            "system_fingerprint": meta.get("system_fingerprint"),
            "base_url": endpoint_url,
            "latency_s": None if latency is None else round(latency, 4),
            "timestamp": timestamp,
            "attempts": attempts,
            "retry_reasons": retry_reasons,
            "via": via,
            "fsb_version": __version__,
        }
    )
    return row


# --- failures and retries ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed, and what to do about it."""

    kind: str  # rate_limit, server_error, timeout, connection, malformed, empty, refusal, client_error, auth, not_found
    reason: str
    retryable: bool
    fatal: bool = False
    status: int | None = None
    retry_after: float | None = None


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date); None if absent or unreadable."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra is None:
        return None
    try:
        value = float(ra)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with jitter: base * 2^(attempt-1), capped, times a uniform factor in [0.5, 1]."""
    return min(cap, base * 2 ** (attempt - 1)) * (0.5 + 0.5 * rng.random())


def classify(exc: BaseException, endpoint: Endpoint | None = None) -> Failure | None:
    """Sort an exception from one attempt into a Failure; None for an exception that is a bug, not the server's doing."""
    import openai

    def short(text: str) -> str:
        text = " ".join(str(text).split())
        if endpoint is not None:
            text = endpoint.redact(text)
        return text if len(text) <= 300 else text[:297] + "..."

    if isinstance(exc, _Empty):
        finish_reason, refusal = (*exc.args, None, None)[:2]
        if refusal:
            return Failure("refusal", f"the model refused: {short(refusal)}", retryable=False)
        return Failure("empty", f"empty response (finish_reason {finish_reason})", retryable=False)
    if isinstance(exc, _Malformed):
        return Failure("malformed", f"malformed response: {short(str(exc))}", retryable=True)
    if isinstance(exc, openai.APITimeoutError):
        return Failure("timeout", "timed out", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__})" if cause is not None else ""
        return Failure("connection", f"connection error{detail}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        body = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
        detail = body.get("message") if isinstance(body, dict) and body.get("message") else exc.message
        message = short(f"HTTP {status}: {detail}")
        if status == 429:
            return Failure("rate_limit", message, True, status=status, retry_after=retry_after_seconds(exc.response.headers))
        if status in (408, 409) or status >= 500:
            return Failure("server_error", message, True, status=status, retry_after=retry_after_seconds(exc.response.headers))
        if status in (401, 403):
            return Failure("auth", message + " (check OPENAI_API_KEY)", False, fatal=True, status=status)
        if status == 404:
            return Failure("not_found", message + " (check --base-url and --model)", False, fatal=True, status=status)
        return Failure("client_error", message, False, status=status)
    if isinstance(exc, openai.APIResponseValidationError | ValueError):  # json.JSONDecodeError and pydantic errors are ValueErrors
        return Failure("malformed", f"malformed response: {short(f'{type(exc).__name__}: {exc}')}", retryable=True)
    return None


# --- the journal ----------------------------------------------------------------------------------------


def journal_path(out: str | os.PathLike[str]) -> Path:
    """`gens.jsonl` -> `gens.journal.jsonl` (beside it)."""
    p = Path(out)
    return p.with_name(p.name.removesuffix(".jsonl") + ".journal.jsonl")


def failures_path(out: str | os.PathLike[str]) -> Path:
    """`gens.jsonl` -> `gens.failures.jsonl`: the requests that failed on their last try, with the reason."""
    p = Path(out)
    return p.with_name(p.name.removesuffix(".jsonl") + ".failures.jsonl")


def _parse_journal(path: Path, data: bytes) -> tuple[list[dict[str, Any]], int, int]:
    """The events of a journal, the byte length of its good prefix, and how many torn bytes follow it.

    A line is complete only with its newline. An unparseable tail (a kill or a crash mid-write) is torn;
    an unparseable line followed by good ones is corruption, and an error.
    """
    events: list[dict[str, Any]] = []
    good = 0
    offset = 0
    bad_at: int | None = None
    bad_line = 0
    for n, raw in enumerate(data.split(b"\n"), start=1):
        end = offset + len(raw) + 1
        complete = end <= len(data)
        event = None
        if complete and raw.strip():
            try:
                event = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                event = None
            if not isinstance(event, dict) or "event" not in event:
                event = None
        if complete and not raw.strip():
            event = {}  # a blank line: harmless
        if event is None and (raw or complete):
            if bad_at is None:
                bad_at, bad_line = offset, n
        elif event is not None:
            if bad_at is not None:
                raise InputError(path, "corrupt journal line (followed by good ones); move the journal aside to start over", line=bad_line)
            if event:
                events.append(event)
            good = end
        offset = end
    return events, good, len(data) - good


class Journal:
    """The append-only, fsync'd record of one plan's results; locked while open for writing."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.done: dict[str, dict[str, Any]] = {}
        self.failed: dict[str, dict[str, Any]] = {}
        self.repaired = 0
        self.duplicates = 0
        self._fd: int | None = None
        self._lock = threading.Lock()

    @classmethod
    def peek(cls, path: str | os.PathLike[str], plan: Plan | None = None) -> Journal:
        """Read a journal without locking or repairing it (for --dry-run); a missing file reads as empty."""
        j = cls(path)
        if j.path.is_file():
            events, _, _ = _parse_journal(j.path, j.path.read_bytes())
            j._load(events, plan)
        return j

    def open(self, plan: Plan) -> Journal:
        """Lock the journal, cut off a torn tail, check it belongs to `plan`, and load what is finished."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise GenerateError(f"another run is writing {self.path} (it is locked); wait for it or stop it") from None
        try:
            data = b""
            with open(fd, "rb", closefd=False) as f:
                f.seek(0)
                data = f.read()
            events, good, torn = _parse_journal(self.path, data)
            if torn:
                os.ftruncate(fd, good)
                os.fsync(fd)
                self.repaired = torn
            self._fd = fd
            self._load(events, plan)
            if not events:
                head = {"event": "plan", "plan_id": plan.plan_id, "summary": plan.summary, "fsb_version": __version__, "created": _now()}
                self.append(head)
                if not existed:
                    _fsync_dir(self.path.parent)
        except BaseException:
            self._fd = None
            os.close(fd)
            raise
        return self

    def _load(self, events: list[dict[str, Any]], plan: Plan | None) -> None:
        if events and plan is not None:
            head = events[0]
            if head.get("event") != "plan":
                raise InputError(self.path, "not an fsb journal: the first line is not a plan record", line=1)
            if head.get("plan_id") != plan.plan_id:
                raise GenerateError(_plan_mismatch(self.path, head.get("summary") or {}, plan.summary))
        for e in events:
            kind = e.get("event")
            rid = e.get("request_id")
            if kind == "ok" and isinstance(rid, str):
                if rid in self.done:
                    self.duplicates += 1  # never written by this code; tolerated, the first one wins
                    continue
                self.done[rid] = e["row"]
                self.failed.pop(rid, None)
            elif kind == "fail" and isinstance(rid, str) and rid not in self.done:
                before = self.failed.get(rid, {}).get("tries", 0)
                self.failed[rid] = {**e, "tries": before + int(e.get("attempts") or 1)}

    def append(self, event: dict[str, Any]) -> None:
        """Append one event as one line and fsync it; thread-safe. The in-memory state follows."""
        self.append_many([event])

    def append_many(self, events: Sequence[dict[str, Any]]) -> None:
        """Append events, one line each, in one write and one fsync (a group commit); thread-safe."""
        if self._fd is None:
            raise RuntimeError("the journal is not open")
        data = b"".join(json.dumps(e, ensure_ascii=True, separators=(",", ":")).encode() + b"\n" for e in events)
        with self._lock:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
            self._load(list(events), None)

    def close(self) -> None:
        """Close the file, which releases the lock."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing releases the lock
            self._fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _plan_mismatch(path: Path, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    differ = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    detail = ", ".join(differ) if differ else "the requests"
    return (
        f"{path} records another plan (it differs in: {detail}). Its results belong to that plan: rerun with the same "
        "seeds, prompts, model and settings, or write to another --out."
    )


# --- outputs ------------------------------------------------------------------------------------------


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in rows)


def write_outputs(
    plan: Plan, journal: Journal, out: str | os.PathLike[str], csv_path: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Rewrite the output (finished rows in uid order), the failures file and the optional CSV from the journal."""
    out = Path(out)
    rows = [journal.done[r.request_id] for r in plan.requests if r.request_id in journal.done]
    if rows:
        atomic_write(out, _jsonl(rows))
    failures = []
    for r in plan.requests:
        if r.request_id in journal.done or r.request_id not in journal.failed:
            continue
        e = journal.failed[r.request_id]
        failures.append(
            {**r.fields, "request_id": r.request_id, "kind": e.get("kind"), "reason": e.get("reason"), "status": e.get("status"),
             "tries": e.get("tries"), "last_try": e.get("timestamp")}
        )  # fmt: skip
    fpath = failures_path(out)
    if failures:
        atomic_write(fpath, _jsonl(failures))
    else:
        with contextlib.suppress(FileNotFoundError):
            fpath.unlink()
    if csv_path is not None and rows:
        atomic_write(csv_path, release_csv(rows, plan.requests[0].response_field if plan.requests else "response"))
    return {"rows": len(rows), "failures": len(failures), "out": out if rows else None, "failures_file": fpath if failures else None}


def _csv_field(value: object) -> str:
    text = str(value)
    # The csv module leaves a lone carriage return unquoted when lines end in "\n"; readers then split there.
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def release_csv(rows: Iterable[Mapping[str, Any]], response_field: str = "response") -> str:
    """The release's FSB_text.csv columns (uid, prompt_type, seed_type, query, response) from output rows, losslessly."""
    lines = [",".join(RELEASE_COLUMNS)]
    for r in rows:
        lines.append(",".join(_csv_field(r[k]) for k in ("uid", "prompt_type", "seed_type", "query", response_field)))
    return "\n".join(lines) + "\n"


# --- running --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunOptions:
    """How a run behaves: concurrency, retries, timeouts, progress, and how much of the plan to send."""

    concurrency: int = 8
    retries: int = 5
    timeout: float = 60.0
    backoff: float = 1.0
    max_backoff: float = 60.0
    max_retry_after: float = 600.0
    progress: bool = True
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
    repaired_bytes: int = 0
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


class _Progress:
    """A tqdm bar with the rate, tokens, retries and failures; a no-op when disabled."""

    def __init__(self, total: int, enabled: bool, desc: str):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="req", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
        self.started = time.monotonic()

    def update(self, result: RunResult, done: int = 1) -> None:
        if self.bar is None:
            return
        elapsed = max(1e-9, time.monotonic() - self.started)
        tokens = result.prompt_tokens + result.completion_tokens
        postfix = {"tok/s": f"{tokens / elapsed:.0f}", "tokens": tokens, "retries": result.retries, "failed": result.failed}
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _GroupCommit:
    """One writer thread for the journal: events that arrive while an fsync runs share the next one.

    A worker awaits its event's future, so a request counts as finished only once it is on disk, but
    sixteen workers finishing together cost one or two fsyncs, not sixteen in a row.
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
        self, requests: list[Request], journal: Journal, endpoint: Endpoint, options: RunOptions, result: RunResult, progress: _Progress
    ):
        self.requests = requests
        self.journal = journal
        self.endpoint = endpoint
        self.options = options
        self.result = result
        self.progress = progress
        self.rng = random.Random(options.jitter_seed)
        self.pause_until = 0.0
        self.writer = _GroupCommit(journal)

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

    async def _one(self, client: Any, req: Request) -> None:
        errors: list[str] = []
        attempt = 0
        headers = {"X-FSB-Request-Id": req.request_id}
        body = req.body
        while True:
            attempt += 1
            await self._wait_pause()
            if self.result.fatal is not None:
                return
            t0 = time.monotonic()
            try:
                raw = await client.chat.completions.with_raw_response.create(**body, extra_headers=headers, timeout=self.options.timeout)
                completion = raw.parse()
                latency = time.monotonic() - t0
                content, finish_reason, usage, meta = _extract(completion)
                text = first_line(content) if req.one_line else content.strip()
                if not text:
                    raise _Empty(finish_reason, meta.get("refusal"))
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
            row = _build_row(
                req, content, text, finish_reason, usage, meta,
                endpoint_url=self.endpoint.public_url, latency=latency, timestamp=_now(), attempts=attempt, retry_reasons=errors, via="api",
            )  # fmt: skip
            await self._append({"event": "ok", "request_id": req.request_id, "uid": req.uid, "row": row})
            self.result.ok += 1
            if usage:
                self.result.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                self.result.completion_tokens += int(usage.get("completion_tokens") or 0)
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
            "timestamp": _now(),
        }
        await self._append(event)
        self.result.failed += 1
        self.result.failures[failure.kind] = self.result.failures.get(failure.kind, 0) + 1
        self.progress.update(self.result)


def run(
    plan: Plan,
    out: str | os.PathLike[str],
    endpoint: Endpoint,
    options: RunOptions | None = None,
    *,
    csv_path: str | os.PathLike[str] | None = None,
    log: TextIO | None = None,
) -> RunResult:
    """Send the plan's unfinished requests, journaling each result; then rewrite the output files.

    Safe to kill at any moment and to rerun with the same arguments: finished requests are never sent
    again, failed ones are retried. Raises KeyboardInterrupt after writing the outputs if interrupted.
    """
    options = options or RunOptions()
    log = log or sys.stderr
    out = _check_out(out)
    result = RunResult(planned=len(plan.requests))
    started = time.monotonic()
    with Journal(journal_path(out)).open(plan) as journal:
        _remove_stale_temporaries(out, csv_path)
        result.repaired_bytes = journal.repaired
        if journal.repaired:
            print(f"journal {journal.path}: cut off a torn last line ({journal.repaired} bytes) left by an interrupted run", file=log)
        todo = [r for r in plan.requests if r.request_id not in journal.done]
        result.already = len(plan.requests) - len(todo)
        if options.limit is not None:
            todo = todo[: max(0, options.limit)]
        result.selected = len(todo)
        progress = _Progress(len(todo), options.progress and bool(todo), str(plan.summary.get("kind", "generate")))
        try:
            if todo:
                started_event = {"event": "run", "started": _now(), "pending": len(todo), "base_url": endpoint.public_url}
                journal.append({**started_event, "concurrency": options.concurrency})
                asyncio.run(_Runner(todo, journal, endpoint, options, result, progress).run())
        finally:
            progress.close()
            result.elapsed = time.monotonic() - started
            result.outputs = write_outputs(plan, journal, out, csv_path)
    if result.fatal:
        print(f"stopped: {result.fatal}", file=log)
    return result


def _remove_stale_temporaries(out: Path, csv_path: str | os.PathLike[str] | None) -> None:
    """Delete half-written temporaries of our outputs that a killed run left behind.

    Only a run holding the journal's lock writes these files, so while we hold it any of them is stale.
    """
    for target in (out, failures_path(out), *([Path(csv_path)] if csv_path else [])):
        for stale in target.parent.glob(f".{target.name}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()


def _check_out(out: str | os.PathLike[str]) -> Path:
    """The output path, refused when it is not .jsonl or when it holds a file this tool cannot vouch for."""
    p = Path(out)
    if p.suffix != ".jsonl":
        raise InputError(p, "the output must be a .jsonl file (JSON lines, which `fsb build --generations` reads)")
    if p.is_dir():
        raise InputError(p, "is a folder; give a file name ending in .jsonl")
    if p.exists() and not journal_path(p).exists():
        raise GenerateError(
            f"{p} exists but has no journal ({journal_path(p).name}) beside it; refusing to overwrite it: move it or choose another --out"
        )
    return p


# --- dry run -------------------------------------------------------------------------------------------


def estimate_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """A rough prompt size: about 4 characters a token, plus 4 tokens a message and 3 for the reply's start."""
    return 3 + sum(4 + math.ceil(len(m.get("content", "")) / 4) for m in messages)


def dry_run(plan: Plan, out: str | os.PathLike[str] | None, limit: int | None = None, stream: TextIO | None = None) -> dict[str, int]:
    """Print the requests a run would send (all messages) and the token estimate; sends and writes nothing."""
    stream = stream or sys.stdout
    done: set[str] = set()
    if out is not None and journal_path(out).is_file():
        done = set(Journal.peek(journal_path(out), plan).done)
    todo = [r for r in plan.requests if r.request_id not in done]
    if limit is not None:
        todo = todo[: max(0, limit)]
    prompt = completion = 0
    for r in todo:
        tokens = estimate_tokens(r.body["messages"])
        prompt += tokens
        completion += int(r.body.get("max_tokens") or 0)
        label = " ".join(f"{k}={r.fields[k]}" for k in ("seed_type", "prompt_type") if k in r.fields)
        print(f"### uid {r.uid} {label} request {r.request_id[:16]} (~{tokens} prompt tokens)", file=stream)
        for m in r.body["messages"]:
            print(f"[{m['role']}] {m['content']}", file=stream)
        print(file=stream)
    stats = {"requests": len(todo), "finished": len(done), "prompt_tokens": prompt, "max_completion_tokens": completion}
    print(
        f"dry run: {len(todo)} requests to send ({len(done)} of {len(plan.requests)} already finished); "
        f"about {prompt} prompt tokens (~4 characters a token) and at most {completion} completion tokens. Nothing was sent.",
        file=stream,
    )
    return stats


# --- the Batch API ------------------------------------------------------------------------------------------


def write_batch(plan: Plan, out: str | os.PathLike[str], batch_file: str | os.PathLike[str], limit: int | None = None) -> list[Path]:
    """Write the unfinished requests as OpenAI Batch API input (JSON lines, custom_id = request id), split at the API's limits."""
    out = _check_out(out)
    with Journal(journal_path(out)).open(plan) as journal:
        todo = [r for r in plan.requests if r.request_id not in journal.done]
        if limit is not None:
            todo = todo[: max(0, limit)]
        chunks: list[list[bytes]] = [[]]
        size = 0
        for r in todo:
            line = {"custom_id": r.request_id, "method": "POST", "url": "/v1/chat/completions", "body": r.body}
            data = json.dumps(line, ensure_ascii=True).encode() + b"\n"
            if chunks[-1] and (len(chunks[-1]) >= BATCH_MAX_REQUESTS or size + len(data) > BATCH_MAX_BYTES):
                chunks.append([])
                size = 0
            chunks[-1].append(data)
            size += len(data)
        target = Path(batch_file)
        paths = []
        for i, chunk in enumerate(chunks, start=1):
            if not chunk:
                continue
            p = target if len(chunks) == 1 else target.with_name(f"{target.name.removesuffix('.jsonl')}-{i:03d}.jsonl")
            atomic_write(p, b"".join(chunk))
            journal.append({"event": "batch", "file": p.name, "requests": len(chunk), "sha256": sha256_file(p), "created": _now()})
            paths.append(p)
        return paths


def collect_batch(
    plan: Plan,
    out: str | os.PathLike[str],
    batch_output: str | os.PathLike[str],
    *,
    csv_path: str | os.PathLike[str] | None = None,
    base_url: str | None = None,
) -> RunResult:
    """Merge an OpenAI Batch API output (or error) file into the journal and rewrite the output files.

    `base_url` is recorded without user info or query string, as in every other row: no secret reaches a file.
    """
    base_url = Endpoint(base_url).public_url if base_url else None
    out = _check_out(out)
    src = Path(batch_output)
    by_id = {r.request_id: r for r in plan.requests}
    result = RunResult(planned=len(plan.requests))
    started = time.monotonic()
    with Journal(journal_path(out)).open(plan) as journal:
        result.already = len(journal.done)
        for n, rec in iter_jsonl(src):
            if not isinstance(rec.get("custom_id"), str):
                raise InputError(src, "a Batch API output line needs a custom_id", line=n, field="custom_id")
            req = by_id.get(rec["custom_id"])
            if req is None:
                raise InputError(src, f"custom_id {rec['custom_id'][:16]} is not a request of this plan (other seeds or settings?)", line=n)
            if req.request_id in journal.done:
                continue
            result.selected += 1
            failure, row = _batch_line(req, rec, base_url)
            if row is not None:
                journal.append({"event": "ok", "request_id": req.request_id, "uid": req.uid, "row": row, "batch_file": src.name})
                result.ok += 1
                usage = row.get("usage") or {}
                result.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                result.completion_tokens += int(usage.get("completion_tokens") or 0)
            else:
                assert failure is not None
                journal.append(
                    {"event": "fail", "request_id": req.request_id, "uid": req.uid, "kind": failure.kind, "reason": failure.reason,
                     "status": failure.status, "attempts": 1, "timestamp": _now(), "batch_file": src.name}
                )  # fmt: skip
                result.failed += 1
                result.failures[failure.kind] = result.failures.get(failure.kind, 0) + 1
        result.elapsed = time.monotonic() - started
        result.outputs = write_outputs(plan, journal, out, csv_path)
    return result


def _batch_line(req: Request, rec: Mapping[str, Any], base_url: str | None) -> tuple[Failure | None, dict[str, Any] | None]:
    """A Batch API output line as an output row, or the failure it reports."""
    response = rec.get("response") if isinstance(rec.get("response"), dict) else {}
    error = rec.get("error") if isinstance(rec.get("error"), dict) else {}
    status = response.get("status_code")
    body = response.get("body")
    if error or status != 200:
        body_error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
        message = error.get("message") or body_error.get("message") or error.get("code") or "no message"
        kind = "client_error" if isinstance(status, int) and 400 <= status < 500 else "server_error" if status else "batch_error"
        prefix = f"batch: HTTP {status}" if status else "batch error"
        return Failure(kind, f"{prefix}: {' '.join(str(message).split())[:300]}", True, status=status), None
    try:
        content, finish_reason, usage, meta = _extract(body)
    except _Malformed as e:
        return Failure("malformed", f"malformed response: {e}", True, status=status), None
    text = first_line(content) if req.one_line else content.strip()
    if not text:
        failure = classify(_Empty(finish_reason, meta.get("refusal")))
        assert failure is not None
        return Failure(failure.kind, failure.reason, False, status=status), None
    created = meta.get("created")
    timestamp = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") if created else _now()
    row = _build_row(
        req, content, text, finish_reason, usage, meta, endpoint_url=base_url, latency=None, timestamp=timestamp, attempts=1,
        retry_reasons=[], via="batch",
    )  # fmt: skip
    row["batch_request_id"] = rec.get("id")
    return None, row


def read_batch_ids(path: str | os.PathLike[str]) -> list[str]:
    """The custom_ids of a Batch API input file, in order (used by tests and for checks)."""
    ids = []
    for line in read_utf8(path).split("\n"):
        if line.strip():
            ids.append(json.loads(line)["custom_id"])
    return ids


def print_result(result: RunResult, log: TextIO | None = None) -> None:
    """The one-line summary and where the files are."""
    log = log or sys.stderr
    print(result.summary_line(), file=log)
    outs = result.outputs
    if outs.get("out"):
        print(f"wrote {outs['rows']} rows -> {outs['out']}", file=log)
    if outs.get("failures_file"):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(result.failures.items())) or "from earlier runs"
        where = outs["failures_file"]
        print(f"{outs['failures']} requests failed ({kinds}); reasons in {where}; rerun the same command to retry them", file=log)
