"""Where the project's non-code folders are: in a source checkout (editable install) they sit at the
repository root; an installed wheel carries dataset_card/ inside the package and harness/ inside
lm-eval's own tasks folder (see hatch_build.py)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["path", "repo_root"]

_PACKAGE = Path(__file__).resolve().parents[1]  # the fsb package folder (this file is fsb/core/resources.py)


def repo_root() -> Path | None:
    """The source checkout this package runs from, or None for an installed wheel."""
    root = _PACKAGE.parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "dataset_card").is_dir() else None


def path(name: str) -> Path:
    """The folder `dataset_card` or `harness`, wherever this installation keeps it."""
    root = repo_root()
    if root is not None:
        return root / name
    if name == "harness":
        import importlib.util

        spec = importlib.util.find_spec("lm_eval")
        if spec is None or spec.origin is None:
            raise FileNotFoundError("lm-eval is not installed, so the fsb task folder is not either")
        return Path(spec.origin).parent / "tasks" / "fsb"
    return _PACKAGE / f"_{name}"
