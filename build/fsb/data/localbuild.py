"""A local dataset folder checked for publishing (no network): the exact bytes a publish uploads.

`check_folder` accepts a complete `fsb build` (FSB's own or any study's: the card parses with datasets' own
metadata parsing, every data file its configs list exists and nothing else is there, each config's row
count matches the card, stats.json's fingerprint matches the files). `parse_version` and `check_repo_id`
check the other two inputs of `fsb publish`. Split from `fsb.data.publish`, which re-exports these names.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from fsb.core.readers import InputError, content_fingerprint
from fsb.core.seals import SEAL_FILE

__all__ = [
    "LocalBuild",
    "LocalCheck",
    "LocalFile",
    "card_warnings",
    "check_folder",
    "check_repo_id",
    "data_file_paths",
    "git_oid",
    "local_file",
    "parse_version",
]

_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_GLOB = re.compile(r"[*?\[\]{}]")


@dataclass(frozen=True)
class LocalFile:
    """One file to upload: its path in the repo, and the exact bytes that were checked (and will be sent)."""

    path: str
    data: bytes = field(repr=False)
    sha256: str
    git_oid: str

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class LocalBuild:
    """A checked dataset folder: the files to publish and the build's fingerprint."""

    folder: Path
    files: tuple[LocalFile, ...]
    fingerprint: str
    configs: dict[str, tuple[str, ...]]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)


@dataclass(frozen=True)
class LocalCheck:
    """The outcome of the local checks alone (no network): the checked build, the tag, and warnings."""

    repo_id: str
    tag: str
    build: LocalBuild
    has_token: bool
    warnings: tuple[str, ...]

    def lines(self) -> list[str]:
        out = [f"local checks passed: {self.build.folder} as {self.repo_id} {self.tag}"]
        out += [f"    file    {f.path} ({f.size} bytes)" for f in self.build.files]
        out.append(f"  fingerprint {self.build.fingerprint}")
        out.append(
            "  token: "
            + (
                "HF_TOKEN is set (its rights are checked by a dry run with the network)"
                if self.has_token
                else "none (HF_TOKEN): a real publish would be refused"
            )
        )
        out.append("  not checked without the network: the token's rights, the repo's tags and files, the version order")
        return out


def parse_version(version: str) -> tuple[int, int, int]:
    """X.Y.Z (no leading zeros, no prefix or suffix) as a tuple of ints; InputError otherwise."""
    m = _VERSION.fullmatch(version or "")
    if m is None:
        raise InputError("--version", f"{version!r} is not a semantic version X.Y.Z (for example 1.2.0; no 'v' prefix, no suffix)")
    return int(m[1]), int(m[2]), int(m[3])


def check_repo_id(repo_id: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise InputError("--repo-id", f"{repo_id!r} must be ORG/NAME: the Hub needs a namespace (a user or an organization)")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise InputError("--repo-id", str(e)) from None


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def local_file(folder: Path, rel: str) -> LocalFile:
    data = (folder / rel).read_bytes()
    return LocalFile(rel, data, hashlib.sha256(data).hexdigest(), git_oid(data))


def data_file_paths(readme: Path, name: str, paths: list[Any]) -> list[str]:
    """The exact paths a config's `data_files` lists (`CardMeta.data_files`); globs are refused: a publish needs exact files."""
    for p in paths:
        if not isinstance(p, str) or not p or _GLOB.search(p) or p.startswith("/") or ".." in PurePosixPath(p).parts:
            raise InputError(readme, f"config {name!r} lists {p!r}: expected exact relative file paths", field="configs")
    return paths


def check_folder(folder: str | os.PathLike[str]) -> LocalBuild:
    """Check that `folder` is a complete `fsb build` and read the exact bytes to publish.

    Complete means: README.md parses as a dataset card with datasets' own metadata parsing, every data
    file its configs list exists (and no other file is in the folder), each config's Parquet row count
    matches the card's `dataset_info`, and stats.json's fingerprint is that of the data files.
    """
    import pyarrow.parquet as pq

    from fsb.data.cardmeta import read_card

    root = Path(folder)
    if not root.is_dir():
        raise InputError(root, "not a folder (expected a dataset folder written by `fsb build`)")
    readme, stats_path = root / "README.md", root / "stats.json"
    for p in (readme, stats_path):
        if not p.is_file():
            raise InputError(p, "file not found: not a complete dataset folder written by `fsb build`")
    card = read_card(readme)
    configs = card.configs
    if not configs:
        raise InputError(readme, "the card's YAML has no `configs:` (data files per config)", field="configs")
    files: dict[str, tuple[str, ...]] = {}
    for name, cfg in configs.items():
        if "data_files" not in cfg:
            raise InputError(readme, f"config {name!r} has no data_files", field="configs")
        paths = data_file_paths(readme, name, card.data_files(name))
        for rel in paths:
            if not (root / rel).is_file():
                raise InputError(root / rel, f"listed by the card's config {name!r} but not in the folder", field="configs")
        files[name] = tuple(paths)
        expected = card.num_examples(name)
        if expected:
            try:
                rows = sum(pq.read_metadata(root / rel).num_rows for rel in paths)
            except Exception as e:  # a truncated or non-Parquet file
                raise InputError(root, f"config {name!r}: a data file is not readable Parquet ({' '.join(str(e).split())})") from None
            if rows != expected:
                raise InputError(
                    readme, f"config {name!r}: the data files hold {rows} rows, the card says {expected}", field="dataset_info"
                )
    data_paths = list(dict.fromkeys(p for paths in files.values() for p in paths))
    present = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink())
    extra = sorted(set(present) - {"README.md", "stats.json", SEAL_FILE, *data_paths})  # the build's seal stays local
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        raise InputError(
            root,
            f"holds files that are not part of the build: {shown} "
            "(a publish uploads exactly the card, stats.json and the card's data files)",
        )
    try:
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
        recorded = stats["fingerprint"]
    except (ValueError, KeyError, TypeError):
        raise InputError(stats_path, "not a stats.json written by `fsb build` (no fingerprint)", field="fingerprint") from None
    data = {rel: local_file(root, rel) for rel in data_paths}
    fingerprint = content_fingerprint([data[rel].sha256 for rel in data_paths])
    if recorded != fingerprint:
        raise InputError(
            stats_path,
            f"fingerprint {recorded} does not match the data files ({fingerprint}): the folder was changed after `fsb build`",
            field="fingerprint",
        )
    ordered = [local_file(root, "README.md"), local_file(root, "stats.json"), *data.values()]
    return LocalBuild(root.resolve(), tuple(ordered), fingerprint, files)


def card_warnings(build: LocalBuild, repo_id: str) -> list[str]:
    """What the card says that will be wrong once it is on the Hub as `repo_id` (its loading examples)."""
    card = (build.folder / "README.md").read_text(encoding="utf-8")
    if f'load_dataset("{repo_id}"' not in card:
        return [
            f"the card's loading examples do not name {repo_id}; for a card that does, rebuild with "
            f"`fsb build --hub-id {repo_id}` (same data files)"
        ]
    return []
