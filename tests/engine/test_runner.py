"""fsb.engine.runner: the journal's group-commit writer (one fsync for the events that arrive together), which
keeps every finished request a cancelled worker leaves behind. The runner end to end (a real endpoint, faults,
Ctrl-C) is tested in tests/generate/test_generate.py and test_generate_faults.py."""

from __future__ import annotations

from typing import Any

from fsb.engine.runner import GroupCommit


def test_journal_writer_survives_a_cancelled_worker() -> None:
    """Ctrl-C cancels workers whose finished results still wait for the journal: those results are still
    written, and the writer thread keeps going (it used to die on set_result of a cancelled future)."""
    import threading

    entered, gate, written = threading.Event(), threading.Event(), []

    class SlowJournal:
        def append_many(self, events: list[dict[str, Any]]) -> None:
            entered.set()
            gate.wait(5)
            written.extend(events)

    writer = GroupCommit(SlowJournal())  # type: ignore[arg-type]
    first = writer.submit({"n": 1})
    assert entered.wait(5)  # the thread took event 1 and is writing it
    second, third = writer.submit({"n": 2}), writer.submit({"n": 3})
    assert second.cancel()  # the worker waiting for event 2 was cancelled
    gate.set()
    first.result(5)
    third.result(5)
    fourth = writer.submit({"n": 4})
    fourth.result(5)
    writer.close()
    assert [e["n"] for e in written] == [1, 2, 3, 4]
    assert writer.thread.is_alive() is False
