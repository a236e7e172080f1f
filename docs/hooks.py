"""mkdocs hook: prose in square brackets inside a docstring is not a cross-reference.

Markdown reads `[, annotator][, timestamp]` or a regular expression such as `[a-z0-9]+` as a reference
link, and mkdocs-autorefs warns that it found no such target, which fails `mkdocs build --strict`. A real
reference names an identifier (`fsb.bws.counting.count`, a bibliography key such as `kiritchenko2017`):
such a miss stays a warning and fails the build; any other "target" is logged at INFO, naming the docstring.
"""

from __future__ import annotations

import logging
import re

_MISS = re.compile(r"Could not find cross-reference target '(?P<target>[^']*)'")
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.]*$")


class _ProseBrackets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        m = _MISS.search(record.getMessage())
        if m and record.levelno == logging.WARNING and not _IDENTIFIER.match(m.group("target")):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


logging.getLogger("mkdocs.plugins.mkdocs_autorefs._internal.plugin").addFilter(_ProseBrackets())
