"""The one base class of every expected failure in fsb: bad input, a refused output path, a missing
dataset or model, a refused publish. The CLI catches it once and prints one line (exit code 2)."""

from __future__ import annotations

__all__ = ["FsbError"]


class FsbError(Exception):
    """An expected failure whose message is one line naming the file, argument or resource and the cause.

    Raise it (or a subclass) for anything a user can fix; the CLI prints `fsb COMMAND: error: MESSAGE`
    and exits 2, and shows the traceback only when FSB_DEBUG=1."""
