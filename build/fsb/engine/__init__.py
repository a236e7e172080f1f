"""The request engine: a plan of chat-completion requests sent to any OpenAI-compatible endpoint,
resumable at any moment, for every command that asks a model (`fsb generate`, `fsb explain`).

A command builds a `RequestPlan` (its `Request`s, each named by the hash of its exact body, see
`request_id`), resolves an `Endpoint` (the key from $OPENAI_API_KEY only), and either `run`s the plan
(bounded concurrency, retries, a wall-clock limit per attempt, a cap on bytes per answer) or writes it
as Batch API files (`write_batch`, then `collect_batch`). Every result goes to a `Journal` before it
counts; the output, the failures file and any side outputs are rewritten from the journal when a run
ends. Expected failures raise `EngineError` (an `fsb.core.errors.FsbError`). Modules, in import order:

    endpoint   base URL and key rules, EngineError
    plan       Sampling, Request, RequestPlan, request ids, the cost before running
    responses  answers into text and rows, failures into retry decisions
    journal    the append-only, fsync'd, locked record of one plan's results
    outputs    output, failures and side files rewritten from the journal; lost rows recovered
    runner     the concurrent runner (RunOptions, RunResult, Progress)
    batch      OpenAI Batch API input and output files
"""

from __future__ import annotations

from fsb.engine.batch import BATCH_LINE, collect_batch, write_batch
from fsb.engine.endpoint import Endpoint, EngineError, resolve_endpoint
from fsb.engine.journal import Journal, failures_path, journal_path
from fsb.engine.outputs import SideOutput, finished_ids, pending
from fsb.engine.plan import Cost, Request, RequestPlan, Sampling, canonical_json, estimate_cost, estimate_tokens, request_id
from fsb.engine.responses import Failure, backoff_delay, classify, first_line, retry_after_seconds
from fsb.engine.runner import Progress, RunOptions, RunResult, run

__all__ = [
    "BATCH_LINE",
    "Cost",
    "Endpoint",
    "EngineError",
    "Failure",
    "Journal",
    "Progress",
    "Request",
    "RequestPlan",
    "RunOptions",
    "RunResult",
    "Sampling",
    "SideOutput",
    "backoff_delay",
    "canonical_json",
    "classify",
    "collect_batch",
    "estimate_cost",
    "estimate_tokens",
    "failures_path",
    "finished_ids",
    "first_line",
    "journal_path",
    "pending",
    "request_id",
    "resolve_endpoint",
    "retry_after_seconds",
    "run",
    "write_batch",
]
