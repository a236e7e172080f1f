"""Download an fsb build from the Hugging Face Hub (`download_build`: a tag, branch or commit into a new
folder, e.g. for `fsb diff ORG/NAME@REV`), and recognise one: `release_files` names the files of the fsb
release a revision holds (its card, stats.json and the data files the card lists), or None. Reads only;
every failure is one redacted line (`fsb.data.hub.PublishError`). `fsb publish` uses both to compare a
release with the local build and to refuse deleting files fsb did not write.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from fsb.core.readers import InputError
from fsb.data import hub
from fsb.data.localbuild import check_repo_id, data_file_paths

__all__ = ["download_build", "fetch_build", "release_files"]


def release_files(api: Any, repo_id: str, revision: str, remote: dict[str, Any], token: str | None) -> set[str] | None:
    """The files of the fsb release at `revision` (its card, stats.json and the data files the card's configs
    list), or None when the revision does not hold one: no README.md and stats.json, a stats.json without
    fsb's fingerprint and `built_with.fsb`, or a card without exact `configs` data files."""
    from fsb.data.cardmeta import parse_card

    if "README.md" not in remote or "stats.json" not in remote:
        return None
    with tempfile.TemporaryDirectory(prefix="fsb-publish-") as tmp:
        stats_path = hub.read_remote(
            f"reading stats.json of {repo_id}", lambda: hub.download(api, repo_id, "stats.json", revision, Path(tmp)), token
        )
        card_path = hub.read_remote(
            f"reading the card of {repo_id}", lambda: hub.download(api, repo_id, "README.md", revision, Path(tmp)), token
        )
        try:
            stats = json.loads(stats_path.read_text(encoding="utf-8"))
            card_text = card_path.read_text(encoding="utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    if not (isinstance(stats, dict) and isinstance(stats.get("fingerprint"), str) and "fsb" in (stats.get("built_with") or {})):
        return None
    try:
        card = parse_card(card_text, "README.md")
        listed = {p for name in card.configs for p in data_file_paths(Path("README.md"), name, card.data_files(name))}
    except InputError:  # a card that does not parse, or lists globs: not one fsb wrote
        return None
    return {"README.md", "stats.json", *listed} if card.configs else None


def fetch_build(api: Any, repo_id: str, revision: str, dest: Path, token: str | None) -> Path:
    """Download the fsb build at `revision` (card, stats.json, the card's data files) into the new folder
    `dest`; PublishError when the revision does not hold one."""
    tree = hub.read_remote(f"listing the files of {repo_id} at {revision}", lambda: hub.remote_tree(api, repo_id, revision), token)
    files = release_files(api, repo_id, revision, tree, token)
    if files is None:
        raise hub.PublishError(f"{repo_id} at {revision} is not an fsb build (no card and stats.json written by `fsb build`)")
    with tempfile.TemporaryDirectory(prefix="fsb-download-") as cache:
        for rel in sorted(files):
            if rel not in tree:
                raise hub.PublishError(f"{repo_id} at {revision}: its card lists {rel}, which is not in the repo")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            source = hub.read_remote(
                f"downloading {rel} of {repo_id} at {revision}",
                lambda rel=rel: hub.download(api, repo_id, rel, revision, Path(cache)),
                token,
            )
            target.write_bytes(source.read_bytes())
    return dest


def download_build(
    repo_id: str, revision: str, dest: str | os.PathLike[str], *, token: str | None = None, endpoint: str | None = None
) -> Path:
    """Download the fsb build that `repo_id` holds at `revision` (a tag such as v1.0.0, a branch or a commit)
    into the folder `dest` (created; it must not exist), e.g. to `fsb diff` it. Reads only."""
    from huggingface_hub import HfApi

    check_repo_id(repo_id)
    target = Path(dest)
    if target.exists():
        raise InputError(target, "already exists: give a new folder to download the build into")
    token = hub.resolve_token(token)
    with hub.quiet_retries():
        return fetch_build(HfApi(endpoint=endpoint, token=token if token else False), repo_id, revision, target, token)
