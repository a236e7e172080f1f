"""fsb.core.logredact: log records and warnings of the HTTP clients are redacted once installed, also
when logging is imported after the installation (and the installation imports no logging)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from fsb.core import secrets
from fsb.core.logredact import RedactingFilter

# A bare environment, but the fsb under test (not an installed copy) on the path of the child.
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(secrets.__file__).parents[2])}


def test_logging_and_warnings_are_redacted_once_installed(capfd: pytest.CaptureFixture[str]) -> None:
    """huggingface_hub's retry warnings printed the request URL (with an --endpoint's credentials) six times."""
    code = (
        "import logging, warnings\n"
        "from fsb.core import logredact, secrets\n"
        "secrets.register('RegisteredSecret123')\n"
        "logredact.install_log_redaction()\n"
        "logredact.install_log_redaction()\n"
        "log = logging.getLogger('huggingface_hub.utils._http')\n"
        "log.warning('HTTP Error 500 thrown while requesting GET %s', 'http://u:EndpointPass99@127.0.0.1:9/api')\n"
        "log.warning('echo %s', 'UmVnaXN0ZXJlZFNlY3JldDEyMw==')\n"
        "try:\n    raise ValueError('RegisteredSecret123 in a traceback')\n"
        "except ValueError:\n    logging.getLogger('urllib3').exception('failed')\n"
        "warnings.warn('see http://x.example/?access_token=abcdef12345')\n"
        "warnings.warn('retrying with key registeredsecret123')\n"
    )
    env = {**CLEAN_ENV, "HF_ENDPOINT": "http://u:EndpointPass99@127.0.0.1:9"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "GET http://***@127.0.0.1:9/api" in err and "echo ***" in err and "*** in a traceback" in err
    assert "access_token=***" in err and "retrying with key ***" in err
    for leak in ("EndpointPass99", "RegisteredSecret123", "UmVnaXN0ZXJlZFNlY3JldDEyMw", "abcdef12345"):
        assert leak not in err


def test_the_filter_redacts_a_record() -> None:
    secrets.register("FilterSecret4567")
    record = logging.LogRecord("httpx", logging.WARNING, __file__, 1, "key %s", ("FilterSecret4567",), None)
    assert RedactingFilter().filter(record) and record.getMessage() == "key ***"


def test_redaction_is_installed_before_logging_is_imported_and_still_catches_every_record() -> None:
    """`fsb` start-up no longer imports logging (nor html.entities, urllib.parse): importing the module and
    installing the redaction must import none of them, yet a library importing logging afterwards (as
    huggingface_hub does) must find every record redacted, tracebacks included; the import hook that
    patches logging leaves no trace (was fsb.core.onimport's own test)."""
    code = (
        "import sys\n"
        "from fsb.core import logredact\n"
        "logredact.install_log_redaction()\n"
        "print(sorted(m for m in ('logging', 'html.entities', 'urllib.parse', 'traceback') if m in sys.modules))\n"
        "import logging.handlers\n"
        "log = logging.getLogger('urllib3')\n"
        "log.warning('key %s', 'LateSecret-4f9a2c')\n"
        "try:\n    raise ValueError('LateSecret-4f9a2c in a traceback')\n"
        "except ValueError:\n    log.exception('failed')\n"
        "print(type(logging.__loader__).__name__, logging.__spec__.loader is logging.__loader__)\n"
        "print([type(f).__name__ for f in sys.meta_path if 'Hook' in type(f).__name__], 'exec_module' in vars(logging.__loader__))\n"
    )
    env = {**CLEAN_ENV, "OPENAI_API_KEY": "LateSecret-4f9a2c"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "SourceFileLoader True", "[] False"]  # the hook has left, the loader is the real one
    assert "key ***" in proc.stderr and "*** in a traceback" in proc.stderr
    assert "LateSecret" not in proc.stderr


def test_records_made_around_the_factory_and_thread_tracebacks_are_redacted() -> None:
    """Adversarial review: a record made by `makeLogRecord` and handed to a handler, a record made after a
    library installs its own record factory, and a thread's uncaught exception all printed the secret."""
    code = (
        "import logging, threading\n"
        "from fsb.core import logredact, secrets\n"
        "secrets.register('AroundSecret-77c1')\n"
        "logredact.install_log_redaction()\n"
        "handler = logging.StreamHandler()\n"
        "handler.handle(logging.makeLogRecord({'msg': 'made %s', 'args': ('AroundSecret-77c1',)}))\n"
        "plain = logging.LogRecord\n"
        "logging.setLogRecordFactory(lambda *a, **k: plain(*a, **k))\n"
        "log = logging.getLogger('lib')\n"
        "log.addHandler(handler)\n"
        "log.warning('after %s', 'AroundSecret-77c1')\n"
        "def boom():\n    raise RuntimeError('thread AroundSecret-77c1')\n"
        "t = threading.Thread(target=boom, name='worker'); t.start(); t.join()\n"
    )
    env = {**CLEAN_ENV}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "made ***" in proc.stderr and "after ***" in proc.stderr, proc.stderr
    assert "Exception in thread worker" in proc.stderr and "RuntimeError: thread ***" in proc.stderr, proc.stderr
    assert "AroundSecret-77c1" not in proc.stderr
