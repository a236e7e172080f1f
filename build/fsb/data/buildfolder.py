"""The folder `fsb build` writes, recognised and recorded: `build_folder_difference` (is OUT exactly what a build
wrote, unchanged?), `is_build_folder`, and the last-build record the loaders read ($FSB_HOME/last_build.json).
Split from `fsb.data.dataset`, which re-exports these names; a study build (`fsb.data.study_build`) uses the
same seal and rules, so `fsb publish`, `fsb diff` and a rebuild accept both."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import fifty_shades_of_bias as spec
from fsb.core.atomic import atomic_write
from fsb.core.readers import InputError, content_fingerprint, sha256_file
from fsb.core.seals import SEAL_FILE, list_tree, read_seal, seal_difference

__all__ = ["BUILD_KIND", "BUILD_SEAL", "build_folder_difference", "check_record_writable", "is_build_folder", "write_last_build"]


_CONFIGS = ("default", "annotations")  # the card's config order, which the fingerprint follows
BUILD_KIND = "a dataset folder written by `fsb build`"
BUILD_SEAL = "fsb build"


def build_folder_difference(folder: str | os.PathLike[str]) -> str | None:
    """None when `folder` is exactly what `fsb build` wrote, unchanged; else the first difference ("README.md
    was edited", "notes/ was added"), for the refusal message.

    A build seals what it wrote (.fsb-seal.json: the sha256 of every file, README.md and stats.json
    included, and the list of folders), and the folder must match the seal. A build made before seals
    has none: it is accepted only if it holds nothing but README.md, stats.json and one Parquet file per
    config under data/<config>/, and stats.json's fingerprint matches those files (an edited card or
    stats.json of such a build cannot be told apart; its next build carries a seal)."""
    root = Path(folder)
    if read_seal(root) is not None:
        return seal_difference(root, BUILD_SEAL)
    try:
        files, folders, others = list_tree(root)
        expected_folders = ["data", *(f"data/{c}" for c in _CONFIGS)]
        parquet = {c: [f for f in files if f.startswith(f"data/{c}/") and f.endswith(".parquet") and f.count("/") == 2] for c in _CONFIGS}
        allowed = {"README.md", "stats.json", *(f[0] for f in parquet.values() if len(f) == 1)}
        extra = [(r, f"{r} is a link or special file") for r in others]
        extra += [(r, f"{r}/ is not a folder fsb build writes") for r in folders if r not in expected_folders]
        extra += [(r, f"{r} is not a file fsb build writes") for r in files if r not in allowed]
        extra += [(f"data/{c}", f"data/{c}/ holds {len(f)} Parquet files, a build writes one") for c, f in parquet.items() if len(f) != 1]
        extra += [(r, f"{r} is missing") for r in ("README.md", "stats.json") if r not in files]
        if extra:
            return min(extra)[1] + f" (and it has no {SEAL_FILE}: a build made before seals, or not by fsb build)"
        recorded = json.loads((root / "stats.json").read_text(encoding="utf-8"))["fingerprint"]
        if recorded != content_fingerprint([sha256_file(root / parquet[c][0]) for c in _CONFIGS]):
            return "stats.json's fingerprint does not match the data files: a data file was changed"
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return "stats.json is not the one fsb build writes"
    return None


def is_build_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether `folder` is exactly what `fsb build` wrote, unchanged (`build_folder_difference` finds nothing).

    The test a build applies before replacing its --out: a folder failing it may hold a user's files."""
    return build_folder_difference(folder) is None


def write_last_build(out: Path, fingerprint: str) -> None:
    """Remember where the newest build went, so that `fifty_shades_of_bias.load()` and the lm-eval task find it."""
    record = {"path": str(out.resolve()), "fingerprint": fingerprint}
    atomic_write(spec.home() / "last_build.json", json.dumps(record, indent=2) + "\n")


def check_record_writable() -> None:
    """Before any folder is replaced: refuse a build whose last-build record could not be written, so a
    failure is reported while nothing has changed (`--no-record` builds without it)."""
    home = spec.home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=home):  # unlinked at once: nothing is left even if killed here
            pass
    except OSError as e:
        cause = e.strerror or type(e).__name__
        raise InputError(home, f"cannot record the build here ({cause}); set FSB_HOME to a writable folder or pass --no-record") from None
    record = home / "last_build.json"
    if record.exists() and not record.is_file():  # a folder (or a link to one), a FIFO...: atomic_write would refuse it
        what = "a folder" if record.is_dir() else "not a file"
        raise InputError(
            record, f"is {what}, so the build cannot be recorded here; remove it, set FSB_HOME to another folder, or pass --no-record"
        )
