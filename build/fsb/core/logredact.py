"""Log redaction: every log record and warning of the process passes through `fsb.core.secrets.redact_message`.

huggingface_hub, urllib3 and httpx print request URLs (an --endpoint's credentials) in their retry
warnings. `install_log_redaction` puts a redacting record factory into `logging`, redacts every record a
handler is given (`logging.Handler.handle`: records made by `makeLogRecord` or a library's own factory
too) and wraps `warnings.showwarning` and the threads' exception hook. fsb's start imports no logging
(a command that logs nothing never pays for it): until it is imported, a finder first in `sys.meta_path`
waits for it and has the module patched after its code runs, before `import logging` returns it.
`RedactingFilter` does the same for one handler or logger.
"""

from __future__ import annotations

import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any

from fsb.core.secrets import redact_message

if TYPE_CHECKING:
    import logging

__all__ = ["RedactingFilter", "install_log_redaction"]

_LOCK = threading.Lock()
_INSTALLED = False


class RedactingFilter:
    """A logging filter that passes every record through `redact_message` (message, arguments and traceback);
    not a `logging.Filter` subclass (any object with `filter` will do), so importing fsb does not import logging."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact `record` in place; always keep it (True)."""
        _scrub_record(record)
        return True


def _scrub_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a record whose arguments do not format: leave it to logging's own error report
        return
    clean = redact_message(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
        import traceback

        record.exc_text = redact_message("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
    if record.stack_info:
        record.stack_info = redact_message(record.stack_info)


def install_log_redaction() -> None:
    """From now on, every log record and warning of this process is redacted by `redact_message`.

    Installed as the log record factory and in `logging.Handler.handle` (so records of every logger,
    whatever handler prints them, logging's last-resort stderr handler too) and around
    `warnings.showwarning`; without `logging` imported yet, the moment it is (`_LoggingHook`), before any
    record. Idempotent; call it where secrets are resolved, before the first request.
    """
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return
        _INSTALLED = True
    show = warnings.showwarning

    def showwarning(message: Warning | str, category: type[Warning], filename: str, lineno: int, *rest: Any, **kw: Any) -> None:
        show(redact_message(str(message)), category, filename, lineno, *rest, **kw)

    warnings.showwarning = showwarning
    threading.excepthook = _thread_excepthook
    hook = _LoggingHook()
    sys.meta_path.insert(0, hook)  # first the hook, then the check: an import in between meets one of them
    if "logging" in sys.modules and hook.claim():
        _redact_records(sys.modules["logging"])


class _LoggingHook:
    """A meta path finder for `logging` alone: the spec the finders after it give, its loader made to
    patch the module (`_redact_records`) right after executing it. It leaves `sys.meta_path` on first use;
    the module keeps its real loader (a reload runs that loader alone)."""

    def claim(self) -> bool:
        """True for the one caller that gets to patch logging (the hook leaves sys.meta_path)."""
        try:
            sys.meta_path.remove(self)
        except ValueError:
            return False
        return True

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        """None but for `logging`, the first time: the other finders' spec, its loader wrapped once."""
        if name != "logging" or not self.claim():
            return None
        finders = [f for f in sys.meta_path if hasattr(f, "find_spec")]
        spec = next((s for f in finders if (s := f.find_spec(name, path, target)) is not None), None)
        if spec is not None and spec.loader is not None:
            _patch_after_exec(spec.loader)
        return spec


def _patch_after_exec(loader: Any) -> None:
    """Make `loader` run `_redact_records` on the module right after executing it, once."""
    real_exec = loader.exec_module

    def exec_module(module: Any) -> None:
        del loader.exec_module  # once: the loader is the real one again
        real_exec(module)
        _redact_records(module)

    loader.exec_module = exec_module


def _thread_excepthook(args: Any) -> None:
    """A thread's uncaught exception, printed as `threading`'s own hook does, redacted."""
    import traceback

    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
    print(f"Exception in thread {name}:\n{redact_message(text)}", end="", file=sys.stderr, flush=True)


def _redact_records(logging_module: Any) -> None:
    """Make `logging`'s record factory pass every record through `_scrub_record`."""
    make_record = logging_module.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        _scrub_record(record)
        return record

    logging_module.setLogRecordFactory(factory)
    handle = logging_module.Handler.handle

    def redacted_handle(self: logging.Handler, record: logging.LogRecord) -> Any:
        _scrub_record(record)  # a record made without the factory (makeLogRecord, a library's own factory)
        return handle(self, record)

    logging_module.Handler.handle = redacted_handle
