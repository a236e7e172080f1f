"""The OpenAI Batch API, as files: the unfinished requests of a plan as batch input (custom_id = request
id, split at the API's limits), and a batch output (or error) file merged back into the journal.

Nothing is uploaded: the user sends the files with the provider's tools, which keeps this engine free of
any one provider's file and job API. Collecting twice adds nothing; a line of another plan is refused.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fsb.core.readers import InputError, iter_jsonl, sha256_file
from fsb.core.seals import recorded_write
from fsb.engine.endpoint import Endpoint
from fsb.engine.journal import Journal, journal_path
from fsb.engine.outputs import SideOutput, check_out, check_side_outputs, pending, recover_rows, write_outputs
from fsb.engine.plan import Request, RequestPlan
from fsb.engine.responses import Failure, Malformed, NoText, build_row, classify, extract, first_line, now_iso
from fsb.engine.runner import RunResult

__all__ = ["BATCH_MAX_BYTES", "BATCH_MAX_REQUESTS", "collect_batch", "write_batch"]

BATCH_MAX_REQUESTS = 50_000  # the OpenAI Batch API's limits per input file
BATCH_MAX_BYTES = 190_000_000


BATCH_LINE = r'\{"custom_id": .*'  # the first line of a Batch API input file that write_batch wrote
BATCH_KIND = "a Batch API input file from fsb (--batch-file)"


def write_batch(
    plan: RequestPlan, out: str | os.PathLike[str], batch_file: str | os.PathLike[str], limit: int | None = None, force: bool = False
) -> list[tuple[Path, int]]:
    """Write the unfinished requests as OpenAI Batch API input (JSON lines, custom_id = request id), split at the
    API's limits; the files written and how many requests each holds. An existing file is replaced only if its
    folder's record says fsb wrote it as a Batch API input, unchanged, or with `force`."""
    out = check_out(out)
    with Journal(journal_path(out)).open(plan) as journal:
        recover_rows(plan, journal, out)
        chunks: list[list[bytes]] = [[]]
        size = 0
        for r in pending(plan, journal.done, limit):
            line = {"custom_id": r.request_id, "method": "POST", "url": "/v1/chat/completions", "body": r.body}
            data = json.dumps(line, ensure_ascii=True).encode() + b"\n"
            if chunks[-1] and (len(chunks[-1]) >= BATCH_MAX_REQUESTS or size + len(data) > BATCH_MAX_BYTES):
                chunks.append([])
                size = 0
            chunks[-1].append(data)
            size += len(data)
        target = Path(batch_file)
        written = []
        for i, chunk in enumerate(chunks, start=1):
            if not chunk:
                continue
            p = target if len(chunks) == 1 else target.with_name(f"{target.name.removesuffix('.jsonl')}-{i:03d}.jsonl")
            recorded_write(p, b"".join(chunk), force=force, kind=BATCH_KIND)
            journal.append({"event": "batch", "file": p.name, "requests": len(chunk), "sha256": sha256_file(p), "created": now_iso()})
            written.append((p, len(chunk)))
        return written


def collect_batch(
    plan: RequestPlan,
    out: str | os.PathLike[str],
    batch_output: str | os.PathLike[str],
    *,
    side_outputs: Sequence[SideOutput] = (),
    base_url: str | None = None,
    api_key: str | None = None,
    force: bool = False,
) -> RunResult:
    """Merge an OpenAI Batch API output (or error) file into the journal and rewrite the output files.

    `base_url` is recorded without user info or query string, as in every other row, and `api_key`
    (if given) is scrubbed from everything written: no secret reaches a file.
    """
    endpoint = Endpoint(base_url or "http://batch.invalid", api_key)
    recorded_url = endpoint.public_url if base_url else None
    out = check_out(out)
    check_side_outputs(side_outputs, force=force)
    src = Path(batch_output)
    by_id = {r.request_id: r for r in plan.requests}
    result = RunResult(planned=len(plan.requests))
    started = time.monotonic()
    with Journal(journal_path(out), redact=endpoint.redact).open(plan) as journal:
        result.recovered = recover_rows(plan, journal, out)
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
            failure, row = _batch_line(req, rec, recorded_url)
            if row is not None:
                journal.append({"event": "ok", "request_id": req.request_id, "uid": req.uid, "row": row, "batch_file": src.name})
                result.ok += 1
                result.count_usage(row.get("usage"))
            else:
                assert failure is not None
                where = {"uid": req.uid, "kind": failure.kind, "reason": failure.reason, "status": failure.status}
                journal.append(
                    {"event": "fail", "request_id": req.request_id, **where, "attempts": 1, "timestamp": now_iso(), "batch_file": src.name}
                )
                result.count_failure(failure.kind)
        result.elapsed = time.monotonic() - started
        result.outputs = write_outputs(plan, journal, out, side_outputs)
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
        content, finish_reason, usage, meta = extract(body)
    except Malformed as e:
        return Failure("malformed", f"malformed response: {e}", True, status=status), None
    text = first_line(content) if req.one_line else content.strip()
    if not text:
        failure = classify(NoText(finish_reason, meta.get("refusal")))
        assert failure is not None
        return Failure(failure.kind, failure.reason, False, status=status), None
    created = meta.get("created")
    timestamp = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") if created else now_iso()
    provenance = {"endpoint_url": base_url, "latency": None, "timestamp": timestamp}
    row = build_row(req, content, text, finish_reason, usage, meta, **provenance, attempts=1, retry_reasons=[], via="batch")
    row["batch_request_id"] = rec.get("id")
    return None, row
