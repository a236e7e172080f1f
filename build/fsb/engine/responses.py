"""Reading answers: a chat completion into text and metadata, a failed attempt into a `Failure` that says
whether to retry, the retry delay (Retry-After, exponential backoff with jitter), and the output row.

Retried: 429 (its Retry-After honoured), 408, 409, 5xx, timeouts, dropped connections and malformed
answers. Not retried: empty answers, refusals, other 4xx and answers over the size cap; 401, 403 and
404 stop the run (every request would fail the same way).

Token usage is taken only when believable (`check_usage`: whole numbers in 0..`MAX_USAGE_TOKENS`); an
absurd record (1e30, a negative, a string) is neither stored as usage nor summed, the row says
`usage_rejected`, and one warning line is logged per process.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fsb import __version__
from fsb.engine.endpoint import Endpoint
from fsb.engine.plan import Request

__all__ = [
    "MAX_USAGE_TOKENS",
    "USAGE_FIELDS",
    "Failure",
    "Malformed",
    "NoText",
    "TooLarge",
    "backoff_delay",
    "build_row",
    "check_usage",
    "classify",
    "extract",
    "first_line",
    "now_iso",
    "retry_after_seconds",
]


MAX_USAGE_TOKENS = 10_000_000  # tokens in one request: more than any model's context, so a count above is a server's bug
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


def first_line(text: str) -> str:
    """The first non-blank line, stripped (the release kept `answer.strip().split("\\n")[0]`)."""
    for line in text.split("\n"):
        if line.strip():
            return line.strip()
    return ""


class Malformed(Exception):
    """The server answered 200 with something that is not a usable chat completion."""


class NoText(Exception):
    """The model answered with no text (args: finish_reason, refusal)."""


class TooLarge(Exception):
    """The answer was longer than the run's cap on bytes read per response."""


def extract(doc: Any) -> tuple[str, str | None, dict[str, Any] | None, dict[str, Any]]:
    """(content, finish_reason, usage, response metadata) from a chat completion object or dict.

    Parameters
    ----------
    doc
        The parsed answer (a dict, or an object with `model_dump`).

    Returns
    -------
    tuple
        The text (empty if none), the finish reason, the usage if believable (see `check_usage`; else
        None, with metadata `usage_rejected` saying why) and the response's metadata.
    """
    if hasattr(doc, "model_dump"):
        doc = doc.model_dump()
    if not isinstance(doc, dict):
        raise Malformed(f"expected a JSON object, got {type(doc).__name__}")
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise Malformed("the response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise Malformed("the first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise Malformed(f"message content is {type(content).__name__}, not text")
    usage, rejected = check_usage(doc.get("usage"))
    meta = {"response_model": doc.get("model"), "response_id": doc.get("id"), "system_fingerprint": doc.get("system_fingerprint")}
    if rejected:
        meta["usage_rejected"] = rejected
        _warn_usage(rejected)
    if isinstance(message.get("refusal"), str) and message["refusal"].strip():
        meta["refusal"] = message["refusal"]
    created = doc.get("created")
    if isinstance(created, int | float) and created > 0:
        meta["created"] = created
    return content or "", choice.get("finish_reason"), usage, meta


def check_usage(raw: Any) -> tuple[dict[str, int | None] | None, str | None]:
    """A server's token counts if they are believable, else None and why they were not.

    Each of prompt_tokens, completion_tokens and total_tokens must be absent/null or a whole number in
    0..`MAX_USAGE_TOKENS` (a bool, a string, a negative, a fraction, NaN or 1e30 is not). One bad count
    makes the whole record untrusted: it is neither stored as usage nor added to the run's token totals.

    Parameters
    ----------
    raw
        The response's `usage` field, as parsed from JSON.

    Returns
    -------
    tuple
        (usage with int counts, or None; a short description of what was rejected, or None).
    """
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        return None, f"usage is {type(raw).__name__}, not an object"
    usage: dict[str, int | None] = {}
    bad = []
    for name in USAGE_FIELDS:
        value = original = raw.get(name)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_USAGE_TOKENS):
            usage[name] = value
        else:
            bad.append(f"{name}={repr(original)[:24]}")
    if bad:
        return None, ", ".join(bad) + f" (each must be a whole number in 0..{MAX_USAGE_TOKENS})"
    return usage, None


_warned: set[str] = set()


def _warn_usage(rejected: str) -> None:
    """One warning line per process: the first absurd usage record is named, the rest are only not counted."""
    if "usage" not in _warned:
        _warned.add("usage")
        logging.getLogger("fsb.engine").warning(
            "warning: the server reported absurd token usage (%s); such counts are not stored and not added to the "
            "token totals (each row says usage_rejected)",
            rejected,
        )


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds and a Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_row(
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
    """The output row of a finished request: its fields, the answer, the exact request and the provenance of the answer.

    Parameters
    ----------
    req
        The request.
    content, text
        The raw answer, and the text kept from it (its first line for one-line requests).
    finish_reason, usage, meta
        As `extract` returns them; `meta["usage_rejected"]`, if set, is recorded as `usage_rejected`.
    endpoint_url, latency, timestamp, attempts, retry_reasons, via
        The provenance: where (without credentials), how long, when, after how many tries and why, api or batch.

    Returns
    -------
    dict
        The row, before the journal's redaction of secrets.
    """
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
    if meta.get("usage_rejected"):
        row["usage_rejected"] = meta["usage_rejected"]
    return row


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed, and what to do about it."""

    kind: str  # rate_limit, server_error, timeout, connection, malformed, too_large, empty, refusal, client_error, auth, not_found
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


def _transport_errors() -> tuple[type[BaseException], type[BaseException]]:
    """(timeout, transport) exception classes of the HTTP library under the openai client."""
    try:
        import httpx2 as httpx  # openai >= 3
    except ImportError:  # pragma: no cover - older openai clients use httpx
        import httpx  # type: ignore[no-redef]
    return httpx.TimeoutException, httpx.TransportError


def classify(exc: BaseException, endpoint: Endpoint | None = None) -> Failure | None:
    """Sort an exception from one attempt into a Failure; None for an exception that is a bug, not the server's doing."""
    import openai

    def short(text: str) -> str:
        text = " ".join(str(text).split())
        if endpoint is not None:
            text = endpoint.redact(text)
        return text if len(text) <= 300 else text[:297] + "..."

    if isinstance(exc, NoText):
        finish_reason, refusal = (*exc.args, None, None)[:2]
        if refusal:
            return Failure("refusal", f"the model refused: {short(refusal)}", retryable=False)
        return Failure("empty", f"empty response (finish_reason {finish_reason})", retryable=False)
    if isinstance(exc, Malformed):
        return Failure("malformed", f"malformed response: {short(str(exc))}", retryable=True)
    if isinstance(exc, TooLarge):
        return Failure("too_large", short(str(exc)), retryable=False)
    if isinstance(exc, openai.APITimeoutError | TimeoutError):  # TimeoutError: the wall-clock limit of one attempt
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
    transport = _transport_errors()
    if isinstance(exc, transport[0]):  # raised while the body streams in, outside the client's own wrapping
        return Failure("timeout", "timed out", retryable=True)
    if isinstance(exc, transport[1]):
        return Failure("connection", f"connection error ({type(exc).__name__})", retryable=True)
    if isinstance(exc, openai.APIResponseValidationError | ValueError):  # json.JSONDecodeError and pydantic errors are ValueErrors
        return Failure("malformed", f"malformed response: {short(f'{type(exc).__name__}: {exc}')}", retryable=True)
    return None
