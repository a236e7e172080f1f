"""`fsb`: a thin command line over the stage modules. Each subcommand parses arguments, calls one
importable function with keyword arguments, and prints: data on stdout, commentary on stderr. One module per
stage's commands (data, generate, bws, annotate, analyse, evaluate, report, publish), each registering them the
same way (fsb.cli.registry.Commands). Only the invoked command's options are built (`fsb score` does not pay
for the other twenty parsers), and heavy imports happen inside the handlers, so `fsb --help` is fast."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from fsb.cli.argtypes import OneLineParser
from fsb.cli.registry import Command, Commands, Handler
from fsb.core.errors import FsbError

__all__ = ["STAGES", "build_parser", "expected_failure", "main"]

# The command modules in workflow order: `fsb --help` lists their commands in this order.
STAGES = (
    "fsb.cli.data",  # fetch-release, build
    "fsb.cli.generate",  # seeds, generate, explain
    "fsb.cli.bws",  # tuples, score, reliability
    "fsb.cli.annotate",  # annotate export | import | llm
    "fsb.cli.analyse",  # analyse
    "fsb.cli.evaluate",  # eval, main
    "fsb.cli.report",  # baseline, report
    "fsb.cli.publish",  # diff, publish
)
# The order within the workflow, where a module's registration order differs.
ORDER = (
    "fetch-release", "build", "seeds", "generate", "tuples", "annotate", "score", "reliability",
    "analyse", "explain", "eval", "baseline", "report", "main", "diff", "publish",
)  # fmt: skip

EXIT_STATUS = """exit status:
  0    done
  1    requests still pending (a run of generate, explain or annotate llm left some unfinished: rerun it);
       also Python's own status for an unexpected error (a traceback: a bug in fsb, please report it)
  2    refused: bad input or arguments, an output fsb may not replace, a failure of the system (one line on stderr)
  130  interrupted (Ctrl-C or SIGTERM); a resumable run keeps everything it finished"""


def _commands() -> list[Command]:
    found: dict[str, Command] = {}
    for name in STAGES:
        registry = getattr(importlib.import_module(name), "commands", None)
        if not isinstance(registry, Commands):
            raise TypeError(f"{name} has no Commands registry named `commands`")
        for c in registry:
            if c.name in found:
                raise ValueError(f"fsb {c.name} is registered twice")
            found[c.name] = c
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(found.values(), key=lambda c: rank.get(c.name, len(rank)))


def _invoked(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first argument not starting with '-'), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser() -> argparse.ArgumentParser:
    """The whole `fsb` parser, every command with all its options (for the generated CLI reference and tools;
    `main` builds only the invoked command's options).

    Returns
    -------
    argparse.ArgumentParser
        The parser `fsb` would use if every command were invoked.
    """
    return _parser(full=True)[0]


def _parser(argv: Sequence[str] = (), full: bool = False) -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """The parser and name -> handler. Every command is listed, but only the one named in `argv` gets its
    options (building all of them cost 80 ms on every start), unless `full`."""
    p = OneLineParser(
        prog="fsb",
        description=(
            "Fifty Shades of Bias: build the dataset from best-worst judgments, score and check judgments, run the paper's "
            "analyses, generate and annotate new sentences, evaluate models and place them beside baselines and the human "
            "reference, and publish the dataset."
        ),
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action=_Version, nargs=0, help="print fsb's version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    invoked = _invoked(argv)
    handlers: dict[str, Handler] = {}
    for c in _commands():
        kwargs = dict(c.parser_kwargs)
        kwargs.setdefault("description", kwargs.get("help"))
        if full or c.name == invoked:
            c.arguments(sub.add_parser(c.name, epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs))
        else:
            sub.add_parser(c.name, help=kwargs.get("help"))
        handlers[c.name] = c.run
    return p, handlers


class _Version(argparse.Action):
    """--version, reading the installed metadata only when asked (importlib.metadata costs 20 ms at start)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        from fsb import __version__

        print(f"fsb {__version__}")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `fsb` console script: every expected failure is one line and exit code 2.

    While it runs, stdout survives its reader closing early (`fsb build | head -1`): the rest of the output
    goes to /dev/null, the command finishes its work and exits with that work's status. A command started
    with stdout closed (`fsb score j.csv >&-`: Python's sys.stdout is None) works as long as it writes files,
    and one that would print says so in one line, exit 2."""
    from fsb.cli.argtypes import unspool_stdin

    guard = _ReaderSafeStdout(sys.stdout)
    sys.stdout = guard  # type: ignore[assignment]
    try:
        return _main(argv)
    finally:
        with contextlib.suppress(FsbError):  # a stdout failure after the command's own failure: that one is reported
            guard.flush()
        sys.stdout = guard.stream
        unspool_stdin()  # the private copy of standard input, if `-` was read


class _ReaderSafeStdout:
    """sys.stdout for a command: a write or flush that fails because the pipe's reader has gone (EPIPE)
    points stdout at /dev/null and carries on, as the Python docs recommend ("Note on SIGPIPE", signal
    module), so a command never reports a failure, or stops half way, for work that completes."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def _failed(self, e: OSError) -> NoReturn:
        """A write to stdout the system refused (a full disk, `> /dev/full`): stdout goes to /dev/null (the
        bytes still buffered would fail again at exit) and the failure is one line naming standard output."""
        self._reader_gone()
        raise FsbError(f"cannot write to standard output: {e.strerror or e}") from None

    def _reader_gone(self) -> None:
        import os

        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a file descriptor (e.g. captured): nothing to redirect
            pass

    def write(self, text: str) -> int:
        if self.stream is None:  # started with stdout closed
            from fsb.core.errors import FsbError

            raise FsbError("standard output is closed, and this command prints there: run it with stdout open (e.g. `> file`)")
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)
        except OSError as e:
            self._failed(e)

    def flush(self) -> None:
        if self.stream is None:
            return
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._reader_gone()
        except OSError as e:
            self._failed(e)
        finally:
            with contextlib.suppress(OSError, ValueError):
                self.stream.flush()  # after a failure the buffered bytes go to /dev/null, not to a failure at exit

    @property
    def buffer(self) -> Any:
        """The stream's byte buffer, as safe from a reader gone (`fsb.cli.common.write_stdout` writes through it)."""
        return _ReaderSafeStdout(self.stream.buffer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _main(argv: Sequence[str] | None) -> int:
    import os

    from fsb.core.logredact import install_log_redaction
    from fsb.core.secrets import redact_message

    install_log_redaction()  # first: every log record and warning of the run (retry warnings name URLs) is redacted
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, handlers = _parser(argv)
    try:
        args = parser.parse_args(argv)
    except FsbError as e:  # --help or --version printed to a full or closed stdout: one line, as for any command
        command = " ".join(["fsb", *argv[:1]]) if argv and not argv[0].startswith("-") else "fsb"
        print(f"{command}: error: {e}", file=sys.stderr)
        return 2
    try:
        status = handlers[args.command](args)
        sys.stdout.flush()  # the last buffered bytes: a refused write (a full disk) is reported like any failure
        return status
    except KeyboardInterrupt:
        print(f"fsb {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        message = expected_failure(e)
        if message is None or os.environ.get("FSB_DEBUG") == "1":
            import traceback

            # The traceback a bug report needs (status 1, as the interpreter's own), with secrets redacted: a
            # token in a label, an argument or a URL is in its messages and locals' reprs as much as in ours.
            print(redact_message("".join(traceback.format_exception(e))), end="", file=sys.stderr)
            return 1
        print(f"fsb {args.command}: error: {redact_message(message)}", file=sys.stderr)
        return 2


def expected_failure(e: BaseException) -> str | None:
    """The one-line message `fsb` prints (exit 2) for an expected failure, or None for a bug, which keeps
    its traceback.

    Parameters
    ----------
    e : BaseException
        What a command raised.

    Returns
    -------
    str or None
        One line for fsb's own errors, the operating system's refusals (naming the paths), an unreachable
        network and an allocation too large (naming the options that size it); None otherwise.
    """
    if isinstance(e, FsbError):
        return " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, OSError) and not isinstance(e, ConnectionError):
        cause = e.strerror or str(e) or type(e).__name__
        from fsb.core.readers import shown

        paths = [shown(p) for p in (e.filename, e.filename2) if p is not None]
        return " ".join((f"{' -> '.join(paths)}: {cause}" if paths else cause).split())
    if isinstance(e, ConnectionError):  # e.g. datasets cannot reach a Hub repo (offline, or no such repo)
        return " ".join(str(e).split()) or "connection failed"
    if isinstance(e, MemoryError):  # e.g. numpy cannot allocate an array that large
        cause = " ".join(str(e).split())
        return f"out of memory{f' ({cause})' if cause else ''}: use smaller counts (--trials, --bootstrap, --k) or a smaller input"
    return None


if __name__ == "__main__":
    sys.exit(main())
