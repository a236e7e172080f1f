"""The journal: the append-only, fsync'd record of one plan's results (`<out stem>.journal.jsonl`).

Every finished request is appended as one line, written and fsync'd before it counts as finished;
failures are appended too, with their reason. On open the journal is read back: a torn last line (a
kill mid-write) is cut off, finished ids are skipped, failed ones are tried again. Its first line
records the plan id, so a journal belongs to one plan; it is locked while a run writes it, so two runs
never interleave. A write that fails (a full disk) is cut back off, so the file never holds half a
line followed by whole ones. Secrets are scrubbed from every event before it is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fsb import __version__
from fsb.core.readers import InputError
from fsb.engine.endpoint import EngineError
from fsb.engine.plan import RequestPlan
from fsb.engine.responses import now_iso

__all__ = ["Journal", "failures_path", "journal_path", "parse_journal", "scrub"]


def journal_path(out: str | os.PathLike[str]) -> Path:
    """`gens.jsonl` -> `gens.journal.jsonl` (beside it)."""
    p = Path(out)
    return p.with_name(p.name.removesuffix(".jsonl") + ".journal.jsonl")


def failures_path(out: str | os.PathLike[str]) -> Path:
    """`gens.jsonl` -> `gens.failures.jsonl`: the requests that failed on their last try, with the reason."""
    p = Path(out)
    return p.with_name(p.name.removesuffix(".jsonl") + ".failures.jsonl")


def scrub(value: Any, redact: Callable[[str], str]) -> Any:
    """`value` with `redact` applied to every string in it: dict keys and values, list and tuple items, at any depth.

    The journal's one gate for secrets: every event passes here before it is written, and the output, the
    failures file and the CSV are rewritten from the journal, so a key a server echoed (in any encoding
    `fsb.core.secrets.redact` knows) is in none of them.

    Parameters
    ----------
    value
        An event, or any part of one (JSON-like: dicts, lists, tuples, strings, numbers, None).
    redact
        The redaction, e.g. `Endpoint.redact`.

    Returns
    -------
    Any
        A copy with every string redacted (tuples become lists, as JSON writes them).
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {(redact(k) if isinstance(k, str) else k): scrub(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, redact) for v in value]
    return value


def parse_journal(path: Path, data: bytes) -> tuple[list[dict[str, Any]], int, int]:
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

    def __init__(self, path: str | os.PathLike[str], redact: Callable[[str], str] | None = None):
        self.path = Path(path)
        self.done: dict[str, dict[str, Any]] = {}
        self.failed: dict[str, dict[str, Any]] = {}
        self.repaired = 0
        self.redact = redact
        self._fd: int | None = None
        self._lock = threading.Lock()

    @classmethod
    def peek(cls, path: str | os.PathLike[str], plan: RequestPlan | None = None) -> Journal:
        """Read a journal without locking or repairing it (for dry runs); a missing file reads as empty."""
        j = cls(path)
        if j.path.is_file():
            events, _, _ = parse_journal(j.path, j.path.read_bytes())
            j._load(events, plan)
        return j

    def open(self, plan: RequestPlan) -> Journal:
        """Lock the journal, cut off a torn tail, check it belongs to `plan`, and load what is finished."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise EngineError(f"another run is writing {self.path} (it is locked); wait for it or stop it") from None
        try:
            data = b""
            with open(fd, "rb", closefd=False) as f:
                f.seek(0)
                data = f.read()
            events, good, torn = parse_journal(self.path, data)
            if torn:
                os.ftruncate(fd, good)
                os.fsync(fd)
                self.repaired = torn
            self._fd = fd
            self._load(events, plan)
            if not events:
                head = {"event": "plan", "plan_id": plan.plan_id, "summary": plan.summary, "fsb_version": __version__, "created": now_iso()}
                self.append(head)
                if not existed:
                    _fsync_dir(self.path.parent)
        except BaseException:
            self._fd = None
            os.close(fd)
            raise
        return self

    def _load(self, events: list[dict[str, Any]], plan: RequestPlan | None) -> None:
        if events and plan is not None:
            head = events[0]
            if head.get("event") != "plan":
                raise InputError(self.path, "not an fsb journal: the first line is not a plan record", line=1)
            if head.get("plan_id") != plan.plan_id:
                raise EngineError(_plan_mismatch(self.path, head.get("summary") or {}, plan.summary))
        for e in events:
            kind = e.get("event")
            rid = e.get("request_id")
            if kind == "ok" and isinstance(rid, str):
                if rid not in self.done:  # never written twice by this code; the first one wins
                    self.done[rid] = e["row"]
                    self.failed.pop(rid, None)
            elif kind == "fail" and isinstance(rid, str) and rid not in self.done:
                before = self.failed.get(rid, {}).get("tries", 0)
                self.failed[rid] = {**e, "tries": before + int(e.get("attempts") or 1)}

    def append(self, event: dict[str, Any]) -> None:
        """Append one event as one line and fsync it; thread-safe. The in-memory state follows."""
        self.append_many([event])

    def append_many(self, events: Sequence[dict[str, Any]]) -> None:
        """Append events, one line each, in one write and one fsync (a group commit); thread-safe.

        If the write or the fsync fails (a full disk), what it wrote is cut off again and the error raised:
        the journal then holds exactly the events written before, and none of these counts as finished.
        """
        if self._fd is None:
            raise RuntimeError("the journal is not open")
        if self.redact is not None:
            events = [scrub(e, self.redact) for e in events]
        data = b"".join(json.dumps(e, ensure_ascii=True, separators=(",", ":")).encode() + b"\n" for e in events)
        with self._lock:
            start = os.lseek(self._fd, 0, os.SEEK_END)
            try:
                view = memoryview(data)
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                os.fsync(self._fd)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, start)
                if e.filename is None:
                    e.filename = str(self.path)
                raise
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
