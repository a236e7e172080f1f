"""Generate the reference pages (CLI, API, tasks, card fields) from the code before `mkdocs build`."""

from __future__ import annotations

if __name__ == "__main__":
    pass
