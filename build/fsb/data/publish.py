"""Publish a built dataset folder to the Hugging Face Hub as a versioned release (git tag vX.Y.Z).

(size: about 460 lines, the plan and the commit-and-tag with every failure path, which read best together;
the local checks are in `fsb.data.localbuild`, the Hub client's pieces and its errors in `fsb.data.hub`,
the download of a release in `fsb.data.download`.)

`publish` checks everything it can before it writes anything: the folder is a complete `fsb build`
(the card parses with datasets' own metadata parsing, every data file the card lists exists and
nothing else is there, stats.json's fingerprint matches the files), the version is X.Y.Z and greater
than every v* tag on the repo, the tag is free, the token can write there (a fine-grained token's scopes
included), and nothing the publish would delete or replace was written by anyone but fsb (main is empty,
or an fsb release whose card lists the files that go). A refused publish therefore sends no write
request at all. The plan also carries `fsb diff` of the latest release against the folder, which goes
into the commit description and the tag message. Then it creates the repo if missing, uploads with
ONE `create_commit` (adds every file, deletes remote files the folder no longer has, pinned to the
planned `parent_commit` so a concurrent push makes it fail instead of being overwritten) and tags
that exact commit.

Failure after a write, and what is left behind (the message says which case it was):
- the commit fails: the Hub applies a commit atomically, and main's head is re-read to confirm it is
  unchanged; a repo created by this publish is then deleted again, so the Hub is as before. If main
  moved although the commit was refused, someone else pushed (parent_commit did its job); if it moved
  with an error that was not a refusal, the commit may have landed with its answer lost.
- the tag fails after the commit landed: tagging is retried (a 409 whose tag already points at our
  commit counts as success); if it still fails, `PublishError(remote_changed=True)` says so, with the
  commit id. Main then holds the new content untagged; every existing tag is untouched.
In both "landed" cases re-running the same publish is the fix: the plan finds the folder's content
already on main, makes no new commit, and only creates the tag.

The token comes only from the `token` argument or $HF_TOKEN (never from a stored login), and is never
printed, logged or written; messages pass through `redact` all the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsb.core.errors import FsbError
from fsb.data import download, hub
from fsb.data.hub import PublishError, offline_hint, read_remote, redact, remote_errors, resolve_token, short_error, status
from fsb.data.localbuild import (
    LocalBuild,
    LocalCheck,
    LocalFile,
    card_warnings,
    check_folder,
    check_repo_id,
    parse_version,
)
from fsb.data.publish_plan import BRANCH, PublishPlan, PublishResult

__all__ = [
    "LocalBuild",
    "LocalCheck",
    "LocalFile",
    "PublishError",
    "PublishPlan",
    "PublishResult",
    "card_warnings",
    "check_folder",
    "check_local",
    "execute",
    "parse_version",
    "plan_publish",
    "publish",
    "redact",
    "version_of_tag",
]

REPO_TYPE = "dataset"
# Remote files a publish never deletes: the Hub's own .gitattributes (it routes large files to LFS/Xet).
KEEP_REMOTE = frozenset({".gitattributes"})
# Matched with fullmatch (a `$` would accept a trailing newline) and ASCII digits only (`\d` takes any
# Unicode digit, and int() would read "١" as 1).
_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_V_TAG = re.compile(r"v([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?(-[0-9A-Za-z.-]+)?")
_GLOB = re.compile(r"[*?\[\]{}]")
_TAG_ATTEMPTS = 3


def check_local(folder: str | os.PathLike[str], repo_id: str, version: str, *, token: str | None = None) -> LocalCheck:
    """Every check that needs no network: the repo id, the version, the folder (see `check_folder`), the
    card's Hub id; whether a token is set. Sends nothing. Raises InputError for bad input."""
    check_repo_id(repo_id)
    parse_version(version)
    build = check_folder(folder)
    return LocalCheck(repo_id, f"v{version}", build, resolve_token(token) is not None, tuple(card_warnings(build, repo_id)))


def _changes_since(api: Any, repo_id: str, tag: str, build: LocalBuild, token: str | None) -> str:
    """`format_diff` of release `tag` (downloaded) against the local build; a one-line note instead when
    that release cannot be read or compared (the notes are advisory: they never block a publish)."""
    from fsb.data.diff import diff_builds, format_diff

    try:
        with tempfile.TemporaryDirectory(prefix="fsb-previous-") as tmp:
            folder = download.fetch_build(api, repo_id, tag, Path(tmp) / "previous", token)
            return format_diff(diff_builds(folder, build.folder, old_label=tag, new_label=f"this build ({build.folder.name})"))
    except (*remote_errors(), FsbError) as e:
        return f"changes since {tag}: not computed ({short_error(e, token)})"


def _shown(paths: list[str] | tuple[str, ...], limit: int = 10) -> str:
    return ", ".join(paths[:limit]) + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _refuse_foreign_files(
    api: Any, repo_id: str, head: str, remote: dict[str, Any], build: LocalBuild, delete: tuple[str, ...], token: str | None
) -> None:
    """Refuse to delete or replace files a publish did not write: main must be empty (only what repo creation
    puts there, e.g. .gitattributes) or an fsb release, and only that release's own files may go."""
    present = sorted(p for p in remote if p not in KEEP_REMOTE)
    if not present:
        return
    owned = download.release_files(api, repo_id, head, remote, token)
    if owned is None:
        replaced = [p for p in present if p in build.paths]
        what = f"would delete {_shown(list(delete))}" if delete else "would delete nothing"
        what += f" and replace {_shown(replaced)}" if replaced else ""
        raise PublishError(
            f"{repo_id} main ({head[:12]}) is not an fsb release (no card and stats.json written by `fsb build`): publishing {what}; "
            "publish to a new or empty repo, or remove those files on the Hub first; nothing was changed"
        )
    foreign = [p for p in delete if p not in owned]
    if foreign:
        raise PublishError(
            f"{repo_id} main ({head[:12]}) holds files that are not part of its fsb release: publishing would delete {_shown(foreign)}; "
            "remove them on the Hub first (or keep them in a separate repo); nothing was changed"
        )


def version_of_tag(tag: str) -> tuple[int, int, int, int] | None:
    """The sort key of a release tag, so that a publish can refuse a version older than one already released.

    Parameters
    ----------
    tag : str
        A tag of the Hub repo: vX.Y.Z (minor and patch optional), perhaps with a pre-release suffix (-rc1).

    Returns
    -------
    tuple of int, or None
        (major, minor, patch, 1); a pre-release (v2.0.0-rc1) ends in 0, so the release 2.0.0 counts as newer
        than it, as in semantic versioning. None for any other tag (latest, v1.0.0+local).
    """
    m = _V_TAG.fullmatch(tag)
    return (int(m[1]), int(m[2] or 0), int(m[3] or 0), 0 if m[4] else 1) if m else None


def _write_scope(api: Any, repo_id: str, token: str) -> str:
    """What the token may write, from whoami, before any write: "namespace" (create and write repos in the
    repo's namespace) or "repo" (write to this existing repo only: a fine-grained token scoped to it).

    A classic token has role "read" or "write"; a write token writes where its user does (the user's own
    namespace and its orgs, unless its org role is "read"). A fine-grained token (role "fineGrained")
    writes only where a scoped entry grants "repo.write": on the user or org, or on the dataset repo itself.
    """
    who = read_remote("checking the token (whoami)", lambda: api.whoami(), token)
    namespace = repo_id.split("/")[0]
    access = (who.get("auth") or {}).get("accessToken") or {}
    role = access.get("role")
    if role == "read":
        raise PublishError("the token is read-only; publishing needs a token with write access; nothing was changed")
    if role == "fineGrained":
        scoped = (access.get("fineGrained") or {}).get("scoped") or []
        grants = {
            ((e.get("entity") or {}).get("type"), (e.get("entity") or {}).get("name"))
            for e in scoped
            if isinstance(e, dict) and "repo.write" in (e.get("permissions") or [])
        }
        if ("user", namespace) in grants or ("org", namespace) in grants:
            return "namespace"
        if (REPO_TYPE, repo_id) in grants:
            return "repo"
        raise PublishError(
            f"the fine-grained token has no repo.write permission on {namespace!r} or on dataset {repo_id!r} "
            "(add it in the token's settings); nothing was changed"
        )
    orgs = {(o or {}).get("name"): (o or {}).get("roleInOrg") for o in who.get("orgs") or []}
    if namespace != who.get("name") and namespace not in orgs:
        raise PublishError(
            f"the token's user {who.get('name')!r} cannot write to namespace {namespace!r} "
            "(not the user or one of its orgs); nothing was changed"
        )
    if orgs.get(namespace) == "read":
        raise PublishError(f"the token's user {who.get('name')!r} has the read role in org {namespace!r}; nothing was changed")
    return "namespace"


def _latest_release(refs: Any, repo_id: str, tag: str, version: str) -> str | None:
    """The repo's latest release tag; refuses a tag that is taken or a version not greater than the latest."""
    taken = {t.name for t in refs.tags} | {b.name for b in refs.branches}
    if tag in taken:
        raise PublishError(f"{repo_id} already has {tag}; releases are immutable, publish a greater version; nothing was changed")
    released = sorted((v, t.name) for t in refs.tags if (v := version_of_tag(t.name)) is not None)
    latest = released[-1][1] if released else None
    if released and (*parse_version(version), 1) <= released[-1][0]:
        raise PublishError(f"{tag} is not greater than the latest release {latest} of {repo_id}; nothing was changed")
    return latest


def plan_publish(
    folder: str | os.PathLike[str],
    repo_id: str,
    version: str,
    *,
    token: str | None = None,
    private: bool = False,
    endpoint: str | None = None,
    require_token: bool = True,
) -> PublishPlan:
    """Check the folder and the version locally, then read the repo's state and work out the commit and tag.

    Sends read requests only. Raises InputError for bad input and PublishError for other refusals.
    """
    local = check_local(folder, repo_id, version, token=token)
    build = local.build
    token = resolve_token(token)
    if token is None and require_token:
        raise PublishError("no Hugging Face token: set HF_TOKEN (a token with write access); nothing was sent to the Hub")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    api = HfApi(endpoint=endpoint, token=token if token else False)
    tag = f"v{version}"
    scope = _write_scope(api, repo_id, token) if token else None
    try:
        info = api.repo_info(repo_id, repo_type=REPO_TYPE)
    except GatedRepoError as e:
        raise PublishError(f"cannot read {repo_id}: {short_error(e, token)}") from None
    except RepositoryNotFoundError:
        info = None
    except remote_errors() as e:
        raise PublishError(f"reading {repo_id} failed: {short_error(e, token)}; nothing was changed{offline_hint(e)}") from None
    if info is None:
        if scope == "repo":
            raise PublishError(
                f"{repo_id} does not exist and the fine-grained token can write to that repo only, not create it "
                "(create it on the Hub, or grant repo.write on the namespace); nothing was changed"
            )
        return PublishPlan(
            repo_id, version, tag, api.endpoint, build, True, private, None, build.paths, (), (), None, token is not None, local.warnings
        )
    if private and not info.private:
        raise PublishError(
            f"{repo_id} exists and is public; --private only applies to a new repo "
            "(change its visibility on the Hub first); nothing was changed"
        )
    refs = read_remote(f"listing the refs of {repo_id}", lambda: api.list_repo_refs(repo_id, repo_type=REPO_TYPE), token)
    latest = _latest_release(refs, repo_id, tag, version)
    head = info.sha
    remote = read_remote(f"listing the files of {repo_id}", lambda: hub.remote_tree(api, repo_id, head), token)
    add = tuple(f.path for f in build.files if f.path not in remote or not hub.same(f, remote[f.path]))
    unchanged = tuple(f.path for f in build.files if f.path not in add)
    delete = tuple(sorted(p for p in remote if p not in build.paths and p not in KEEP_REMOTE))
    _refuse_foreign_files(api, repo_id, head, remote, build, delete, token)
    return PublishPlan(
        repo_id=repo_id,
        version=version,
        tag=tag,
        endpoint=api.endpoint,
        build=build,
        create_repo=False,
        private=bool(info.private),
        parent_commit=head,
        add=add,
        unchanged=unchanged,
        delete=delete,
        latest_tag=latest,
        has_token=token is not None,
        warnings=local.warnings,
        changes=_changes_since(api, repo_id, latest, build, token) if latest else None,
    )


# --- the publish --------------------------------------------------------------------------------


def _title(plan: PublishPlan) -> str:
    """The dataset's name for the commit and the tag: a study build's pretty name (stats.json), else FSB's."""
    stats = next((f.data for f in plan.build.files if f.path == "stats.json"), b"{}")
    try:
        name = (json.loads(stats).get("study") or {}).get("pretty_name")
    except (ValueError, AttributeError):
        name = None
    return " ".join(name.split())[:100] if isinstance(name, str) and name.strip() else "Fifty Shades of Bias"


def _description(plan: PublishPlan) -> str:
    from fsb import __version__

    lines = [f"{_title(plan)} {plan.tag}, published by fsb {__version__}.", "", f"Build fingerprint: {plan.build.fingerprint}", ""]
    if plan.changes:
        lines += [plan.changes, ""]
    lines += [f"- add {p}" for p in plan.add] + [f"- delete {p}" for p in plan.delete]
    return "\n".join(lines)


def _tag_message(plan: PublishPlan) -> str:
    head = f"{_title(plan)} {plan.tag} (fingerprint {plan.build.fingerprint[:16]})"
    return f"{head}\n\n{plan.changes}" if plan.changes else head


def _rollback_created(api: Any, repo_id: str, token: str) -> tuple[str, bool]:
    """Delete the repo this publish created (nothing of ours was committed to it); say what happened and
    whether the Hub is left changed."""
    try:
        api.delete_repo(repo_id, repo_type=REPO_TYPE, missing_ok=True)
        return "the repo created for this publish was deleted again", False
    except remote_errors() as e:
        return (
            f"the empty repo created for this publish could not be deleted ({short_error(e, token)}): delete it on the Hub, or re-run",
            True,
        )


def _commit_failure(api: Any, plan: PublishPlan, parent: str | None, created: bool, error: BaseException, token: str) -> PublishError:
    """Find out what a failed commit left on the Hub (main's head, re-read) and say it in one line."""
    concurrent = status(error) in (409, 412)
    if concurrent:
        why = f"{BRANCH} moved since the plan (expected parent {parent}): someone else pushed; re-run to plan against the new state"
    else:
        why = short_error(error, token)
    head: str | None
    try:
        head = api.repo_info(plan.repo_id, repo_type=REPO_TYPE).sha
    except remote_errors():
        head = None
    failed = f"the commit to {plan.repo_id} failed: {why}"
    if head == parent:
        if created:
            undo, changed = _rollback_created(api, plan.repo_id, token)
            return PublishError(f"{failed}; {undo}", remote_changed=changed)
        return PublishError(f"{failed}; {BRANCH} is unchanged", remote_changed=False)
    if concurrent:
        return PublishError(f"{failed}; nothing of ours was committed", remote_changed=created)
    rerun = "re-run the same publish: if the content landed, the re-run makes no new commit and only tags it"
    if head is None:
        return PublishError(f"{failed}; {BRANCH} could not be read afterwards, so it may hold this commit; {rerun}", remote_changed=True)
    return PublishError(
        f"{failed}; but {BRANCH} is now at {head}: the commit may have landed and its answer been lost; {rerun}", remote_changed=True
    )


def _create_tag(api: Any, plan: PublishPlan, commit_oid: str, token: str, commit_url: str | None) -> None:
    """Tag `commit_oid`, retrying transient failures; a tag that already points there counts as done."""
    last: BaseException | None = None
    for attempt in range(_TAG_ATTEMPTS):
        try:
            api.create_tag(
                plan.repo_id,
                tag=plan.tag,
                tag_message=_tag_message(plan),
                revision=commit_oid,
                repo_type=REPO_TYPE,
            )
            return
        except remote_errors() as e:
            last = e
            code = status(e)
            if code == 409:
                with contextlib.suppress(*remote_errors()):
                    refs = api.list_repo_refs(plan.repo_id, repo_type=REPO_TYPE)
                    if any(t.name == plan.tag and t.target_commit == commit_oid for t in refs.tags):
                        return  # an earlier attempt landed; its answer was lost
                break
            if code is not None and code < 500 and code != 429:
                break
            if attempt + 1 < _TAG_ATTEMPTS:
                time.sleep(0.5 * 2**attempt)
    where = f"commit {commit_oid}" + (f" ({redact(commit_url, token)})" if commit_url else "")
    why = short_error(last, token) if last else "unknown error"
    raise PublishError(
        f"{where} is on {plan.repo_id} main but tag {plan.tag} could not be created ({why}); "
        f"re-run the same publish to tag it (it sees the content already on main and makes no new commit), "
        f"or: hf repos tag create {plan.repo_id} {plan.tag} --revision {commit_oid} --repo-type dataset",
        remote_changed=True,
        commit_oid=commit_oid,
    )


def execute(plan: PublishPlan, *, token: str | None = None, message: str | None = None) -> PublishResult:
    """Carry out a plan from `plan_publish`: create the repo if planned, make the one commit, tag it.

    Raises PublishError (one line, says what changed on the Hub) when a write fails.
    """
    token = resolve_token(token)
    if token is None:
        raise PublishError("no Hugging Face token: set HF_TOKEN (a token with write access); nothing was sent to the Hub")
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    api = HfApi(endpoint=plan.endpoint, token=token)
    parent = plan.parent_commit
    created = False
    if plan.create_repo:
        try:
            api.create_repo(plan.repo_id, repo_type=REPO_TYPE, private=plan.private, exist_ok=False)
        except remote_errors() as e:
            why = (
                "it was created by someone else since the plan (or is not visible to this token)"
                if status(e) == 409
                else short_error(e, token)
            )
            raise PublishError(f"creating {plan.repo_id} failed: {why}; nothing was changed") from None
        created = True
        try:
            parent = api.repo_info(plan.repo_id, repo_type=REPO_TYPE).sha
            stray = sorted(set(hub.remote_tree(api, plan.repo_id, parent)) - KEEP_REMOTE)
        except remote_errors() as e:
            undo, changed = _rollback_created(api, plan.repo_id, token)
            raise PublishError(
                f"reading the new repo {plan.repo_id} failed: {short_error(e, token)}; {undo}", remote_changed=changed
            ) from None
        if stray:
            raise PublishError(
                f"the new repo {plan.repo_id} already holds {', '.join(stray)}: someone else is writing to it; "
                "nothing of ours was committed (the repo this publish created is left in place)",
                remote_changed=True,
            )
    committed = False
    if plan.needs_commit:
        ops: list[Any] = [CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=f.data) for f in plan.build.files]
        ops += [CommitOperationDelete(path_in_repo=p) for p in plan.delete]
        try:
            info = api.create_commit(
                plan.repo_id,
                operations=ops,
                commit_message=message or f"Release {plan.tag}",
                commit_description=_description(plan),
                repo_type=REPO_TYPE,
                revision=BRANCH,
                parent_commit=parent,
            )
        except remote_errors() as e:
            raise _commit_failure(api, plan, parent, created, e, token) from None
        commit_oid, commit_url, committed = info.oid, info.commit_url, True
    else:
        commit_oid = parent
        commit_url = f"{api.endpoint}/datasets/{plan.repo_id}/commit/{commit_oid}"
    assert commit_oid is not None
    _create_tag(api, plan, commit_oid, token, commit_url)
    return PublishResult(plan, dry_run=False, commit_oid=commit_oid, commit_url=commit_url, committed=committed, created_repo=created)


def publish(
    folder: str | os.PathLike[str],
    repo_id: str,
    version: str,
    *,
    token: str | None = None,
    private: bool = False,
    endpoint: str | None = None,
    message: str | None = None,
    dry_run: bool = False,
    on_plan: Callable[[PublishPlan], None] | None = None,
) -> PublishResult:
    """Publish `folder` (an `fsb build`) to the dataset repo `repo_id` (ORG/NAME) and tag it `v<version>`.

    Everything is checked before the first write (see the module docstring); `dry_run` stops after the
    plan. Raises InputError for bad input, PublishError for refusals and failures (with a one-line
    message that says what changed on the Hub). The token is `token` or $HF_TOKEN, nothing else.
    `on_plan` is called with the plan before anything is written (the CLI prints it there).
    """
    with hub.quiet_retries():  # the Hub client's retry warnings are held back: fsb's one-line error comes first and alone
        plan = plan_publish(folder, repo_id, version, token=token, private=private, endpoint=endpoint, require_token=not dry_run)
        if on_plan is not None:
            on_plan(plan)
        if dry_run:
            return PublishResult(plan, dry_run=True)
        return execute(plan, token=token, message=message)
