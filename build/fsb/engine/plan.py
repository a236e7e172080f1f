"""Requests and plans: what a command means to send, each request named by the hash of its exact body.

A *plan* is the list of requests a command means, numbered by uid. A request's id is the sha256 of its
exact body (model, messages, sampling settings) and its place in the plan (a key such as kind, seed
type, format, occurrence), so an id names one paid request across runs, machines and versions. The
plan id hashes every (uid, request id): two plans with one id send the same requests under the same uids.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Cost", "Request", "RequestPlan", "Sampling", "canonical_json", "estimate_cost", "estimate_tokens", "request_id"]


@dataclass(frozen=True)
class Sampling:
    """Sampling settings sent with every request; None leaves a setting to the server's default."""

    temperature: float | None = 0.0
    max_tokens: int | None = None  # None: the command's default for the request
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


def canonical_json(obj: Any) -> bytes:
    """One byte string per JSON value: sorted keys, ASCII, no spaces (what ids and hashes are taken of)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()


def request_id(body: Mapping[str, Any], key: Sequence[Any]) -> str:
    """The id of a request: sha256 of its exact body and its place in the plan (e.g. kind, seed type, format, occurrence)."""
    return hashlib.sha256(canonical_json({"body": body, "key": list(key)})).hexdigest()


@dataclass(frozen=True)
class Request:
    """One planned request: its uid, id, exact body, and the fields its output row starts with."""

    uid: int
    request_id: str
    body: dict[str, Any]
    fields: dict[str, Any]
    provenance: dict[str, Any]
    response_field: str = "response"
    one_line: bool = True  # keep the first non-empty line of the answer, or the whole answer stripped


@dataclass(frozen=True)
class RequestPlan:
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


def estimate_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """A rough prompt size: about 4 characters a token, plus 4 tokens a message and 3 for the reply's start."""
    return 3 + sum(4 + math.ceil(len(m.get("content", "")) / 4) for m in messages)


@dataclass(frozen=True)
class Cost:
    """What sending some requests costs at most: how many, their prompt tokens (estimated) and the completion bound."""

    requests: int
    prompt_tokens: int
    max_completion_tokens: int


def estimate_cost(requests: Sequence[Request]) -> Cost:
    """The cost of `requests` before any is sent: prompt tokens by `estimate_tokens`, completions at their max_tokens."""
    prompt = sum(estimate_tokens(r.body["messages"]) for r in requests)
    completion = sum(int(r.body.get("max_tokens") or 0) for r in requests)
    return Cost(len(requests), prompt, completion)
