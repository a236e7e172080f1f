"""The files a run leaves: the output (finished rows in uid order, JSON lines), the failures file and any
side outputs (a writer passed in, such as generation's release CSV), all rewritten from the journal,
atomically, when a run ends.

What a user owns is never lost: an output without its journal is not overwritten; an output whose
journal lost rows (truncated, deleted and recreated) gives its rows back to the journal before anything
is sent, and an output is never replaced by one holding fewer finished rows.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fsb.core.atomic import sweep_stale_temporaries
from fsb.core.output import write_unit
from fsb.core.readers import InputError, iter_jsonl
from fsb.core.seals import check_recorded_file, file_difference
from fsb.engine.endpoint import EngineError
from fsb.engine.journal import Journal, failures_path, journal_path
from fsb.engine.plan import Request, RequestPlan

__all__ = [
    "RUN_OUTPUT_KIND",
    "SIDE_OUTPUT_KIND",
    "SideOutput",
    "check_out",
    "check_side_outputs",
    "finished_ids",
    "pending",
    "recover_rows",
    "remove_stale_temporaries",
    "write_outputs",
]

RUN_OUTPUT_KIND = "the output of an fsb request run (generate, explain, annotate llm)"
SIDE_OUTPUT_KIND = "a file an fsb request run writes beside its output (generate --csv, annotate llm --judgments)"

# A file written beside the output from the finished rows, e.g. (path, release_csv).
SideOutput = tuple["str | os.PathLike[str]", Callable[[Sequence[Mapping[str, Any]]], str]]


def check_out(out: str | os.PathLike[str]) -> Path:
    """The output path, refused when it is not .jsonl or when it holds a file this tool cannot vouch for."""
    p = Path(out)
    if p.suffix != ".jsonl":
        raise InputError(p, "the output must be a .jsonl file (JSON lines, one row per finished request), e.g. --out runs/out.jsonl")
    if p.is_dir():
        raise InputError(p, "is a folder; give a file name ending in .jsonl")
    if p.exists() and not journal_path(p).exists():
        raise EngineError(
            f"{p} exists but has no journal ({journal_path(p).name}) beside it; refusing to overwrite it: move it or choose another --out"
        )
    if p.exists() or p.is_symlink():  # rewritten from the journal at the end: a hand edit would be lost
        why = file_difference(p, RUN_OUTPUT_KIND)
        if why is not None:
            raise InputError(
                p,
                f"exists and is not this run's output unchanged: {why}; refusing to rewrite it from "
                f"{journal_path(p).name}: move it aside (the journal keeps every finished row) or choose another --out",
            )
    return p


def check_side_outputs(side_outputs: Sequence[SideOutput], *, force: bool = False) -> None:
    """Refuse, before any request, a side output (generate --csv, annotate llm --judgments) that exists and is
    not one fsb recorded as such, unchanged (a hand edit, or another command's file: a judgments file from
    `fsb annotate import` is never taken for ours), unless `force`."""
    for path, _writer in side_outputs:
        check_recorded_file(path, force=force, kind=SIDE_OUTPUT_KIND)


def _output_rows(out: Path) -> list[tuple[int, dict[str, Any]]]:
    return list(iter_jsonl(out)) if out.is_file() else []


def recover_rows(plan: RequestPlan, journal: Journal, out: Path) -> int:
    """Give the journal back the finished rows it lost but the output still holds; the number given back.

    A row of the output that is neither in the journal nor a request of this plan means the output is
    not this plan's: refused, so that nothing of it is replaced.
    """
    by_id = {r.request_id: r for r in plan.requests}
    lost = []
    for n, row in _output_rows(out):
        rid = row.get("request_id")
        if isinstance(rid, str) and rid in journal.done:
            continue
        if not isinstance(rid, str) or rid not in by_id:
            raise EngineError(
                f"{out}, line {n}: a row that is not a request of this run's plan, and {journal.path.name} does not record it; "
                "refusing to replace the output: move it aside, or rerun with the arguments that wrote it"
            )
        lost.append({"event": "ok", "request_id": rid, "uid": by_id[rid].uid, "row": row, "recovered_from": out.name})
    if lost:
        journal.append_many(lost)
    return len(lost)


def finished_ids(plan: RequestPlan, out: str | os.PathLike[str]) -> set[str]:
    """The plan's finished request ids by its journal and its output, read without locking or writing (for dry runs)."""
    out = Path(out)
    ids = set(Journal.peek(journal_path(out), plan).done) if journal_path(out).is_file() else set()
    planned = {r.request_id for r in plan.requests}
    if journal_path(out).is_file():
        ids |= {row.get("request_id") for _, row in _output_rows(out) if row.get("request_id") in planned}
    return ids


def pending(plan: RequestPlan, finished: Iterable[str], limit: int | None = None) -> list[Request]:
    """The requests of `plan` not in `finished`, in uid order, at most `limit` of them."""
    done = set(finished)
    todo = [r for r in plan.requests if r.request_id not in done]
    return todo if limit is None else todo[: max(0, limit)]


def remove_stale_temporaries(out: Path, side_outputs: Sequence[SideOutput] = ()) -> None:
    """Delete half-written temporaries of our outputs that a killed run left behind: only those fsb registered
    when it created them (a user's file that merely looks like one is never touched)."""
    for target in (out, failures_path(out), *(Path(p) for p, _ in side_outputs)):
        with contextlib.suppress(OSError):
            sweep_stale_temporaries(target)


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in rows)


def _row_count(path: Path) -> int:
    try:
        return sum(1 for line in path.read_bytes().split(b"\n") if line.strip())
    except FileNotFoundError:
        return 0


def write_outputs(
    plan: RequestPlan, journal: Journal, out: str | os.PathLike[str], side_outputs: Sequence[SideOutput] = ()
) -> dict[str, Any]:
    """Rewrite the output (finished rows in uid order), the failures file and the side outputs from the journal.
    The output and its side outputs are one unit (`write_unit`): a kill leaves all old or all new, each
    recorded as fsb's (`check_out` and `check_side_outputs` refused anything else before the run)."""
    out = Path(out)
    rows = [journal.done[r.request_id] for r in plan.requests if r.request_id in journal.done]
    if rows:
        had = _row_count(out)
        if len(rows) < had:  # recover_rows makes this impossible; the check keeps it so
            raise EngineError(f"{out} holds {had} rows and {journal.path.name} only {len(rows)}; refusing to replace it with fewer")
    failures = []
    for r in plan.requests:
        if r.request_id in journal.done or r.request_id not in journal.failed:
            continue
        e = journal.failed[r.request_id]
        last = {
            "kind": e.get("kind"),
            "reason": e.get("reason"),
            "status": e.get("status"),
            "tries": e.get("tries"),
            "last_try": e.get("timestamp"),
        }
        failures.append({**r.fields, "request_id": r.request_id, **last})
    fpath = failures_path(out)
    if failures:
        write_unit({fpath: _jsonl(failures)}, kinds=RUN_OUTPUT_KIND, force=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            fpath.unlink()
    if rows:
        unit: dict[str | os.PathLike[str], str] = {out: _jsonl(rows)}
        kinds: dict[str | os.PathLike[str], str] = {out: RUN_OUTPUT_KIND}
        for path, writer in side_outputs:
            unit[path], kinds[path] = writer(rows), SIDE_OUTPUT_KIND
        write_unit(unit, kinds=kinds, force=True)  # checked before the run (check_out, check_side_outputs)
    return {"rows": len(rows), "failures": len(failures), "out": out if rows else None, "failures_file": fpath if failures else None}
