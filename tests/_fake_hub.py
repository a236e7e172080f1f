"""A small fake of the Hugging Face Hub's HTTP API, for tests: no self-hostable Hub server exists.

It implements just what huggingface_hub 2.x's `HfApi` needs to publish a dataset (whoami, also for
fine-grained tokens; repo create/delete/info, refs, tree and paths-info listings, validate-yaml, tags)
and what `datasets.load_dataset("org/name", revision=...)` needs to read it back (the same listings plus
`resolve` downloads with Range support). Uploads follow the real Hub's two paths: preupload answers
"lfs" for paths the branch's `.gitattributes` routes to LFS (the Hub's default for dataset repos sends
`*.parquet` there) or of 10 MiB and more, and "regular" otherwise; LFS files go through the Git LFS batch
API's basic transfer (batch -> PUT to a signed URL on a separate storage server -> verify), and the
NDJSON commit then references them by sha256 and size (`lfsFile` lines) beside inline base64 files.
Tree listings carry `lfs: {oid, size, pointerSize}` for LFS files, and `resolve` of an LFS file
redirects (302, X-Linked-Etag/X-Linked-Size) to the object on the storage server, as the Hub's CDN does.
Xet is not implemented (clients run with HF_HUB_DISABLE_XET=1). The real client talks to it over HTTP on
127.0.0.1: point it here with HF_ENDPOINT (read at import time, so run the client in a subprocess) and HF_TOKEN.

State lives in memory, one `FakeHub` per test. Every request is recorded (`requests`, with the kind of
endpoint and the bearer token sent), failures can be injected per endpoint kind (`inject`, optionally
after the request was carried out: a lost answer), and a hook can run just before an endpoint is served
(`on`), e.g. to make a concurrent commit between a client's planning and its commit. A request the fake
does not implement is answered 404 and recorded with kind "unknown". The server thread is a daemon and
shuts itself down after `lifetime` seconds at the latest.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import hmac
import itertools
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["GITATTRIBUTES", "STORAGE_KINDS", "WRITE_KINDS", "FakeHub", "Recorded", "git_blob_oid", "lfs_pointer"]

GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n"
_TYPES = {"datasets": "dataset", "models": "model", "spaces": "space"}
# Endpoints that change state or carry uploads; everything else is a read.
WRITE_KINDS = frozenset(
    {"create_repo", "delete_repo", "preupload", "lfs_batch", "lfs_upload", "lfs_verify", "commit", "create_tag", "delete_tag"}
)
# Requests served by the storage server (the S3/CDN stand-in): the client must send them no token.
STORAGE_KINDS = frozenset({"lfs_upload", "lfs_download"})
LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub stores files of this size and more in LFS whatever .gitattributes says


def git_blob_oid(data: bytes) -> str:
    """The git blob id of a file's bytes (what the Hub reports as a regular file's `oid`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    """The Git LFS pointer file of `data` (what git stores in the tree for an LFS file)."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n".encode()


def lfs_routed(gitattributes: bytes | None, path: str) -> bool:
    """Whether `.gitattributes` sends `path` to LFS (`PATTERN ... filter=lfs`; a pattern without a slash
    matches the file name at any depth, as in git)."""
    routed = False
    for line in (gitattributes or b"").decode("utf-8", "replace").splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        pattern, attrs = parts[0], parts[1:]
        target = path if "/" in pattern else PurePosixPath(path).name
        if fnmatch.fnmatchcase(target, pattern.lstrip("/")):
            if "filter=lfs" in attrs:
                routed = True
            elif "-filter" in attrs or "!filter" in attrs:
                routed = False
    return routed


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it. `token` is the bearer token sent, if any."""

    method: str
    path: str
    kind: str
    status: int
    token: str | None

    @property
    def is_write(self) -> bool:
        return self.kind in WRITE_KINDS


@dataclass
class Commit:
    oid: str
    parent: str | None
    title: str
    files: dict[str, bytes]  # path -> content (for an LFS file: the object's content, not its pointer)
    date: str
    lfs: frozenset[str] = frozenset()  # the paths stored as LFS pointers
    description: str = ""


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    tag_messages: dict[str, str] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)  # sha256 -> content, uploaded through the batch API


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class FakeHub:
    """An in-memory Hub on 127.0.0.1; use as a context manager. `url` is the HF_ENDPOINT to use."""

    def __init__(
        self,
        token: str,
        *,
        user: str = "tester",
        orgs: tuple[str, ...] = ("fsb-org",),
        fine_grained: list[dict[str, Any]] | None = None,
        org_roles: dict[str, str] | None = None,
        lifetime: float = 300.0,
    ):
        """`fine_grained`: make the token a fine-grained one with these scoped grants, in whoami's shape
        (`[{"entity": {"type": "org", "name": "fsb-org"}, "permissions": ["repo.content.read", "repo.write"]}]`);
        the fake then also refuses (403) every write the grants do not cover, as the Hub does. `org_roles`:
        the user's role per org in whoami (`roleInOrg`, default "write"); "read" members cannot write there."""
        self.token = token
        self.user = user
        self.orgs = orgs
        self.fine_grained = fine_grained
        self.org_roles = dict(org_roles or {})
        self.secret = secrets.token_hex(16)  # signs the storage URLs the batch API and resolve hand out
        self.lifetime = lifetime
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[Recorded] = []
        # kind -> list of (status, message, applied) to answer the next requests of that kind with, in order
        self.fail: dict[str, list[tuple[int, str, bool]]] = {}
        # kind -> callables run (once each) just before a request of that kind is served
        self.before: dict[str, list[Callable[[], None]]] = {}
        self._lock = threading.RLock()
        self._counter = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._storage: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            pass

        class Storage(_StorageHandler):
            pass

        Handler.hub = Storage.hub = hub
        # Two origins, as on the real Hub: the API and the object storage its signed URLs point to.
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._storage = ThreadingHTTPServer(("127.0.0.1", 0), Storage)
        for name, server in (("fake-hub", self._server), ("fake-hub-storage", self._storage)):
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True).start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for server in (self._server, self._storage):
            if server is not None:
                server.shutdown()
                server.server_close()
        self._server = self._storage = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake Hub is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def storage_url(self) -> str:
        assert self._storage is not None, "the fake Hub is not running"
        host, port = self._storage.server_address[:2]
        return f"http://{host}:{port}"

    def sign(self, path: str) -> str:
        return hmac.new(self.secret.encode(), path.encode(), hashlib.sha256).hexdigest()

    # --- test helpers ----------------------------------------------------------------------------

    def inject(self, kind: str, status: int = 500, message: str = "injected failure", times: int = 1, applied: bool = False) -> None:
        """Answer the next `times` requests of `kind` (e.g. "commit", "create_tag") with an error.

        With `applied`, the request is carried out first and only its answer is the error (a lost response).
        """
        with self._lock:
            self.fail.setdefault(kind, []).extend([(status, message, applied)] * times)

    def on(self, kind: str, fn: Callable[[], None]) -> None:
        """Run `fn` once, just before the next request of `kind` is served."""
        with self._lock:
            self.before.setdefault(kind, []).append(fn)

    def writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.is_write]

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> dict[str, bytes]:
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            return dict(repo.commits[self._resolve(repo, revision)].files)

    def head(self, repo_id: str, branch: str = "main", repo_type: str = "dataset") -> str:
        return self.repo(repo_id, repo_type).branches[branch]

    def lfs_paths(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> frozenset[str]:
        """The paths stored as LFS pointers at `revision`."""
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            return repo.commits[self._resolve(repo, revision)].lfs

    def add_repo(self, repo_id: str, *, repo_type: str = "dataset", private: bool = False) -> Repo:
        """Create a repo directly (as the Hub does: one initial commit holding .gitattributes)."""
        with self._lock:
            if (repo_type, repo_id) in self.repos:
                raise HubError(409, f"You already created this {repo_type} repo")
            repo = Repo(repo_type, repo_id, private)
            self.repos[(repo_type, repo_id)] = repo
            self._commit(repo, None, "initial commit", {".gitattributes": GITATTRIBUTES})
            return repo

    def push(self, repo_id: str, files: dict[str, bytes], *, delete: tuple[str, ...] = (), title: str = "direct push") -> str:
        """Commit directly on main (a change made by someone else); returns the new commit id."""
        with self._lock:
            repo = self.repo(repo_id)
            tree = dict(repo.commits[repo.branches["main"]].files)
            for p in delete:
                tree.pop(p, None)
            tree.update(files)
            routed = {p for p in tree if lfs_routed(tree.get(".gitattributes"), p) or len(tree[p]) >= LFS_THRESHOLD}
            for p in routed:
                repo.lfs_objects[hashlib.sha256(tree[p]).hexdigest()] = tree[p]
            return self._commit(repo, repo.branches["main"], title, tree, lfs=routed)

    # --- state -----------------------------------------------------------------------------------

    def _commit(
        self, repo: Repo, parent: str | None, title: str, files: dict[str, bytes], *, lfs: set[str] | None = None, description: str = ""
    ) -> str:
        seed = f"{repo.repo_id}\n{parent}\n{title}\n{next(self._counter)}\n" + "\n".join(
            f"{p} {git_blob_oid(d)}" for p, d in sorted(files.items())
        )
        oid = hashlib.sha1(seed.encode()).hexdigest()
        date = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        repo.commits[oid] = Commit(oid, parent, title, files, date, frozenset(p for p in lfs or () if p in files), description)
        repo.branches["main"] = oid
        return oid

    @staticmethod
    def _resolve(repo: Repo, revision: str) -> str:
        rev = revision.removeprefix("refs/heads/").removeprefix("refs/tags/")
        if rev in repo.branches:
            return repo.branches[rev]
        if rev in repo.tags:
            return repo.tags[rev]
        if rev in repo.commits:
            return rev
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")


def _entries(files: dict[str, bytes], commit: Commit, prefix: str, recursive: bool, expand: bool) -> list[dict[str, Any]]:
    """Tree entries under `prefix` (files and folders), as /tree and /paths-info list them."""
    out: dict[str, dict[str, Any]] = {}
    base = prefix.strip("/")
    for path, data in sorted(files.items()):
        if base and not path.startswith(base + "/"):
            continue
        rest = path[len(base) + 1 :] if base else path
        parts = rest.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(filter(None, [base, *parts[:depth]]))
            if folder not in out and (recursive or depth == 1):
                out[folder] = {"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(), "size": 0, "path": folder}
        if recursive or len(parts) == 1:
            out[path] = _file_entry(path, data, commit, expand, path in commit.lfs)
    return list(out.values())


def _file_entry(path: str, data: bytes, commit: Commit, expand: bool, lfs: bool = False) -> dict[str, Any]:
    """A file's entry; for an LFS file, `oid` is the pointer's git blob id, `size` the content's size,
    and `lfs` the object (sha256, size) and the pointer's size, as the Hub lists them."""
    entry: dict[str, Any] = {"type": "file", "oid": git_blob_oid(data), "size": len(data), "path": path}
    if lfs:
        pointer = lfs_pointer(data)
        entry["oid"] = git_blob_oid(pointer)
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": len(pointer)}
    if expand:
        entry["lastCommit"] = {"id": commit.oid, "title": commit.title, "date": commit.date}
    return entry


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read hub.requests instead
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    # --- plumbing --------------------------------------------------------------------------------

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        auth = self.headers.get("Authorization") or ""
        self.sent_token = auth.removeprefix("Bearer ").strip() or None
        split = urlsplit(self.path)
        self.query = parse_qs(split.query)
        self.segments = split.path.split("/")[1:]
        kind, handler, args = self._route()
        hub = self.hub
        status = 200
        try:
            with hub._lock:
                hooks = hub.before.pop(kind, [])
            for fn in hooks:
                fn()
            with hub._lock:
                queued = hub.fail.get(kind)
                injected = queued.pop(0) if queued else None
            if injected is not None and not injected[2]:
                raise HubError(injected[0], injected[1])
            if self.sent_token is not None and self.sent_token != hub.token:
                raise HubError(401, "Invalid credentials in Authorization header")
            with hub._lock:
                status, headers, body = handler(*args)
            if injected is not None:
                raise HubError(injected[0], injected[1])
        except HubError as e:
            status = e.status
            headers = {"X-Error-Message": e.message, **({"X-Error-Code": e.code} if e.code else {})}
            body = json.dumps({"error": e.message}).encode()
        except Exception as e:  # a bug in the fake: answer 500 and keep serving
            status, headers, body = 500, {"X-Error-Message": f"fake hub: {e!r}"}, json.dumps({"error": repr(e)}).encode()
        with hub._lock:
            hub.requests.append(Recorded(self.command, split.path, kind, status, self.sent_token))
        self._send(status, headers, body)

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        headers = {"Content-Type": "application/json", **headers}
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", headers.get("Content-Length", str(len(body))))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        return status, dict(headers or {}), json.dumps(obj).encode()

    def _route(self) -> tuple[str, Callable[..., tuple[int, dict[str, str], bytes]], tuple[Any, ...]]:
        s, m = self.segments, self.command
        if s[:2] == ["api", "whoami-v2"] and m == "GET":
            return "whoami", self._whoami, ()
        if s[:2] == ["api", "agent-harnesses"] and m == "GET":  # huggingface_hub's user-agent registry
            return "agent_harnesses", lambda: self._json({"standardEnvVars": [], "harnesses": {}}), ()
        if s[:2] == ["api", "validate-yaml"] and m == "POST":
            return "validate_yaml", self._validate_yaml, ()
        if s[:3] == ["api", "repos", "create"] and m == "POST":
            return "create_repo", self._create_repo, ()
        if s[:3] == ["api", "repos", "delete"] and m == "DELETE":
            return "delete_repo", self._delete_repo, ()
        if len(s) >= 4 and s[0] == "api" and s[1] in _TYPES:
            repo_key = (_TYPES[s[1]], f"{unquote(s[2])}/{unquote(s[3])}")
            rest = s[4:]
            action = rest[0] if rest else ""
            arg = unquote(rest[1]) if len(rest) > 1 else "main"
            path = unquote("/".join(rest[2:]))
            table: dict[tuple[str, str], tuple[str, Callable[..., tuple[int, dict[str, str], bytes]], tuple[Any, ...]]] = {
                ("GET", ""): ("repo_info", self._repo_info, (repo_key, "main")),
                ("GET", "revision"): ("repo_info", self._repo_info, (repo_key, arg)),
                ("GET", "refs"): ("list_refs", self._refs, (repo_key,)),
                ("GET", "tree"): ("tree", self._tree, (repo_key, arg, path)),
                ("POST", "paths-info"): ("paths_info", self._paths_info, (repo_key, arg)),
                ("POST", "preupload"): ("preupload", self._preupload, (repo_key, arg)),
                ("POST", "commit"): ("commit", self._commit, (repo_key, arg)),
                ("POST", "tag"): ("create_tag", self._create_tag, (repo_key, arg)),
                ("DELETE", "tag"): ("delete_tag", self._delete_tag, (repo_key, arg)),
            }
            if (m, action) in table:
                return table[(m, action)]
        # Git LFS batch API: /datasets/org/name.git/info/lfs/objects/{batch,verify} (models have no type prefix)
        offset = 1 if s and s[0] in _TYPES else 0
        lfs_api = len(s) == offset + 6 and s[offset + 1].endswith(".git") and s[offset + 2 : offset + 5] == ["info", "lfs", "objects"]
        if m == "POST" and lfs_api:
            repo_type = _TYPES[s[0]] if offset else "model"
            repo_key = (repo_type, f"{unquote(s[offset])}/{unquote(s[offset + 1]).removesuffix('.git')}")
            if s[offset + 5] == "batch":
                return "lfs_batch", self._lfs_batch, (repo_key,)
            if s[offset + 5] == "verify":
                return "lfs_verify", self._lfs_verify, (repo_key,)
        if m in ("GET", "HEAD"):
            # /datasets/org/name/resolve/REV/path (models have no type prefix)
            offset = 1 if s and s[0] in _TYPES else 0
            if len(s) >= offset + 5 and s[offset + 2] == "resolve":
                repo_type = _TYPES[s[0]] if offset else "model"
                repo_key = (repo_type, f"{unquote(s[offset])}/{unquote(s[offset + 1])}")
                return "resolve", self._resolve_file, (repo_key, unquote(s[offset + 3]), unquote("/".join(s[offset + 4 :])))
        return "unknown", self._unknown, ()

    # --- auth and lookup -------------------------------------------------------------------------

    def _need_token(self) -> None:
        if self.sent_token is None:
            raise HubError(401, "You must be authenticated to do this")

    def _can_write(self, namespace: str, repo: Repo | None = None) -> None:
        """A write to `namespace` (creating a repo) or to `repo`: the user's namespaces, narrowed for a
        fine-grained token to its scoped grants of repo.write (on the user or org, or on the repo itself)."""
        self._need_token()
        if namespace not in (self.hub.user, *self.hub.orgs) or self.hub.org_roles.get(namespace) == "read":
            raise HubError(403, f"You don't have the rights to create or write to {namespace}")
        if self.hub.fine_grained is not None:
            grants = {(g["entity"]["type"], g["entity"]["name"]) for g in self.hub.fine_grained if "repo.write" in g.get("permissions", [])}
            ok = ("user", namespace) in grants or ("org", namespace) in grants
            ok = ok or (repo is not None and (repo.repo_type, repo.repo_id) in grants)
            if not ok:
                raise HubError(403, f"This fine-grained token does not have write access to {repo.repo_id if repo else namespace}")

    def _get_repo(self, key: tuple[str, str]) -> Repo:
        repo = self.hub.repos.get(key)
        if repo is None or (repo.private and self.sent_token is None):
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    # --- endpoints -------------------------------------------------------------------------------

    def _unknown(self) -> tuple[int, dict[str, str], bytes]:
        raise HubError(404, f"fake hub: no route for {self.command} {self.path}")

    def _whoami(self) -> tuple[int, dict[str, str], bytes]:
        if self.sent_token is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        access: dict[str, Any] = {"displayName": "tests", "role": "write", "createdAt": "2026-01-01T00:00:00.000Z"}
        if self.hub.fine_grained is not None:
            scoped = [
                {**g, "entity": {"_id": hashlib.sha1(g["entity"]["name"].encode()).hexdigest()[:24], **g["entity"]}}
                for g in self.hub.fine_grained
            ]
            grants = {"canReadGatedRepos": False, "global": ["discussion.write", "post.write"], "scoped": scoped}
            access.update(role="fineGrained", fineGrained=grants)
        return self._json(
            {
                "type": "user",
                "name": self.hub.user,
                "fullname": "Test User",
                "orgs": [{"type": "org", "name": o, "roleInOrg": self.hub.org_roles.get(o, "write")} for o in self.hub.orgs],
                "auth": {"type": "access_token", "accessToken": access},
            }
        )

    def _validate_yaml(self) -> tuple[int, dict[str, str], bytes]:
        import yaml

        content = json.loads(self.body)["content"]
        if content.startswith("---"):
            header = content.split("---", 2)[1]
            try:
                yaml.safe_load(header)
            except yaml.YAMLError as e:
                return self._json({"errors": [{"message": str(e)}], "warnings": []}, status=400)
        return self._json({"errors": [], "warnings": []})

    def _create_repo(self) -> tuple[int, dict[str, str], bytes]:
        payload = json.loads(self.body)
        namespace = payload.get("organization") or self.hub.user
        self._can_write(namespace)
        repo_type = payload.get("type") or "model"
        repo_id = f"{namespace}/{payload['name']}"
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        url = f"{self.hub.url}/{prefix}{repo_id}"
        if (repo_type, repo_id) in self.hub.repos:
            return self._json({"error": f"You already created this {repo_type} repo", "url": url}, status=409)
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        self.hub.add_repo(repo_id, repo_type=repo_type, private=private)
        return self._json({"url": url, "name": repo_id, "id": repo_id})

    def _delete_repo(self) -> tuple[int, dict[str, str], bytes]:
        payload = json.loads(self.body)
        namespace = payload.get("organization") or self.hub.user
        self._can_write(namespace)
        key = (payload.get("type") or "model", f"{namespace}/{payload['name']}")
        self._get_repo(key)
        del self.hub.repos[key]
        return self._json({})

    def _repo_info(self, key: tuple[str, str], revision: str) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        commit = repo.commits[self.hub._resolve(repo, revision)]
        return self._json(
            {
                "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
                "id": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": commit.oid,
                "private": repo.private,
                "gated": False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "createdAt": next(iter(repo.commits.values())).date,
                "lastModified": commit.date,
                "siblings": [{"rfilename": p} for p in sorted(commit.files)],
            }
        )

    def _refs(self, key: tuple[str, str]) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        return self._json(
            {
                "branches": [{"name": b, "ref": f"refs/heads/{b}", "targetCommit": c} for b, c in repo.branches.items()],
                "converts": [],
                "tags": [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": c} for t, c in repo.tags.items()],
                "pullRequests": [],
            }
        )

    def _tree(self, key: tuple[str, str], revision: str, path: str) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        commit = repo.commits[self.hub._resolve(repo, revision)]
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        expand = self.query.get("expand", ["false"])[0].lower() in ("1", "true")
        if path and path not in commit.files and not any(p.startswith(path.rstrip("/") + "/") for p in commit.files):
            raise HubError(404, f"{path} does not exist on {revision}", "EntryNotFound")
        return self._json(_entries(commit.files, commit, path, recursive, expand))

    def _paths_info(self, key: tuple[str, str], revision: str) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        commit = repo.commits[self.hub._resolve(repo, revision)]
        ctype = self.headers.get("Content-Type", "")
        if "json" in ctype:
            form = json.loads(self.body)
            paths, expand = form.get("paths", []), bool(form.get("expand"))
        else:
            form = parse_qs(self.body.decode())
            paths, expand = form.get("paths", []), form.get("expand", ["false"])[0].lower() in ("1", "true")
        out = []
        for p in paths:
            p = p.strip("/")
            if p in commit.files:
                out.append(_file_entry(p, commit.files[p], commit, expand, p in commit.lfs))
            elif any(f.startswith(p + "/") for f in commit.files):
                out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(), "size": 0, "path": p})
        return self._json(out)

    def _preupload(self, key: tuple[str, str], revision: str) -> tuple[int, dict[str, str], bytes]:
        """Upload mode per file: "lfs" where the branch's .gitattributes routes the path (or the file is
        large), else "regular"; `oid` is the current file's (an LFS file's sha256, a regular file's git oid)."""
        repo = self._get_repo(key)
        self._can_write(repo.repo_id.split("/")[0], repo)
        commit = repo.commits[self.hub._resolve(repo, revision)]
        answer = []
        for f in json.loads(self.body)["files"]:
            existing = commit.files.get(f["path"])
            lfs = lfs_routed(commit.files.get(".gitattributes"), f["path"]) or int(f.get("size") or 0) >= LFS_THRESHOLD
            oid = None
            if existing is not None:
                oid = hashlib.sha256(existing).hexdigest() if f["path"] in commit.lfs else git_blob_oid(existing)
            answer.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid})
        return self._json({"files": answer, "commitOid": commit.oid})

    def _lfs_batch(self, key: tuple[str, str]) -> tuple[int, dict[str, str], bytes]:
        """The Git LFS batch API (upload, basic transfer): for each object not stored yet, a signed PUT URL
        on the storage server and a verify URL here; an object already stored gets no actions."""
        repo = self._get_repo(key)
        self._can_write(repo.repo_id.split("/")[0], repo)
        payload = json.loads(self.body)
        if payload.get("operation") != "upload" or "basic" not in payload.get("transfers", ["basic"]):
            raise HubError(400, "fake hub: only the upload operation with the basic transfer is implemented")
        if payload.get("hash_algo", "sha256") != "sha256":
            raise HubError(400, "fake hub: only sha256 objects")
        prefix = "" if repo.repo_type == "model" else f"{repo.repo_type}s/"
        objects = []
        for obj in payload["objects"]:
            oid, size = obj["oid"], obj["size"]
            entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if not (isinstance(oid, str) and len(oid) == 64 and all(c in "0123456789abcdef" for c in oid)):
                entry["error"] = {"code": 422, "message": "invalid oid"}
            elif oid not in repo.lfs_objects or len(repo.lfs_objects[oid]) != size:
                upload = f"/upload/{repo.repo_type}/{repo.repo_id}/{oid}/{size}"
                entry["actions"] = {
                    "upload": {"href": f"{self.hub.storage_url}{upload}?X-Signature={self.hub.sign(upload)}", "expires_in": 900},
                    "verify": {"href": f"{self.hub.url}/{prefix}{repo.repo_id}.git/info/lfs/objects/verify", "header": {}},
                }
            objects.append(entry)
        return self._json({"transfer": "basic", "objects": objects}, headers={"Content-Type": "application/vnd.git-lfs+json"})

    def _lfs_verify(self, key: tuple[str, str]) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        self._can_write(repo.repo_id.split("/")[0], repo)
        obj = json.loads(self.body)
        data = repo.lfs_objects.get(obj.get("oid"))
        if data is None or len(data) != obj.get("size"):
            raise HubError(404, f"LFS object {obj.get('oid')} of size {obj.get('size')} was not uploaded")
        return self._json({"success": True})

    def _commit(self, key: tuple[str, str], revision: str) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        self._can_write(repo.repo_id.split("/")[0], repo)
        branch = unquote(revision)
        if branch not in repo.branches:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        lines = [json.loads(line) for line in self.body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "the first NDJSON line must be the header")
        header = lines[0]["value"]
        head = repo.branches[branch]
        parent = header.get("parentCommit")
        if parent is not None and parent != head:
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        tree = dict(repo.commits[head].files)
        lfs = set(repo.commits[head].lfs)
        attributes = tree.get(".gitattributes")
        for line in lines[1:]:
            op, value = line["key"], line["value"]
            if op == "file":
                if value.get("encoding") != "base64":
                    raise HubError(400, "fake hub: only base64 files are supported")
                if lfs_routed(attributes, value["path"]):
                    raise HubError(400, f"{value['path']} is tracked by LFS (.gitattributes): upload it with the LFS batch API, not inline")
                tree[value["path"]] = base64.b64decode(value["content"])
                lfs.discard(value["path"])
            elif op == "lfsFile":
                data = repo.lfs_objects.get(value.get("oid"))
                if value.get("algo") != "sha256" or data is None or ("size" in value and len(data) != value["size"]):
                    raise HubError(422, f"Your push was rejected: the LFS object of {value['path']} ({value.get('oid')}) was not uploaded")
                tree[value["path"]] = data
                lfs.add(value["path"])
            elif op == "deletedFile":
                if value["path"] not in tree:
                    raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
                del tree[value["path"]]
            elif op == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                for p in [p for p in tree if p.startswith(folder)]:
                    del tree[p]
            else:
                raise HubError(400, f"fake hub: unsupported commit operation {op!r}")
        oid = self.hub._commit(repo, head, header.get("summary") or "", tree, lfs=lfs, description=header.get("description") or "")
        prefix = "" if repo.repo_type == "model" else f"{repo.repo_type}s/"
        return self._json(
            {"success": True, "commitOid": oid, "commitUrl": f"{self.hub.url}/{prefix}{repo.repo_id}/commit/{oid}", "pullRequestUrl": None}
        )

    def _create_tag(self, key: tuple[str, str], revision: str) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        self._can_write(repo.repo_id.split("/")[0], repo)
        payload = json.loads(self.body)
        tag = payload["tag"]
        target = self.hub._resolve(repo, revision)
        if tag in repo.tags or tag in repo.branches:
            raise HubError(409, f"Tag {tag} already exists")
        repo.tags[tag] = target
        repo.tag_messages[tag] = payload.get("message") or ""
        return self._json({})

    def _delete_tag(self, key: tuple[str, str], tag: str) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        self._can_write(repo.repo_id.split("/")[0], repo)
        if repo.tags.pop(tag, None) is None:
            raise HubError(404, f"Invalid rev id: {tag}", "RevisionNotFound")
        return self._json({})

    def _resolve_file(self, key: tuple[str, str], revision: str, path: str) -> tuple[int, dict[str, str], bytes]:
        repo = self._get_repo(key)
        oid = self.hub._resolve(repo, revision)
        files = repo.commits[oid].files
        if path not in files:
            raise HubError(404, "Entry not found", "EntryNotFound")
        data = files[path]
        if path in repo.commits[oid].lfs:
            # As the Hub does for an LFS file: a redirect to a signed URL of the object on the storage
            # (CDN) origin, with the object's etag (its sha256) and size on the redirect itself.
            sha = hashlib.sha256(data).hexdigest()
            target = f"/objects/{repo.repo_type}/{repo.repo_id}/{sha}"
            location = f"{self.hub.storage_url}{target}?X-Signature={self.hub.sign(target)}"
            return (
                302,
                {
                    "Location": location,
                    "X-Repo-Commit": oid,
                    "X-Linked-Etag": f'"{sha}"',
                    "X-Linked-Size": str(len(data)),
                    "ETag": f'"{git_blob_oid(lfs_pointer(data))}"',
                    "Content-Type": "text/plain; charset=utf-8",
                },
                f"Found. Redirecting to {location}".encode(),
            )
        headers = {"Content-Type": "application/octet-stream", "X-Repo-Commit": oid, "ETag": f'"{git_blob_oid(data)}"'}
        return _ranged(self.headers.get("Range"), headers, data)


def _ranged(rng: str | None, headers: dict[str, str], data: bytes) -> tuple[int, dict[str, str], bytes]:
    """A download answer honouring a `Range: bytes=...` header (200 without one, 206 or 416 with one)."""
    headers = {**headers, "Accept-Ranges": "bytes"}
    if rng and rng.startswith("bytes="):
        start_s, _, end_s = rng[len("bytes=") :].partition("-")
        if start_s == "":  # suffix range: the last N bytes
            start, end = max(0, len(data) - int(end_s)), len(data) - 1
        else:
            start, end = int(start_s), min(int(end_s) if end_s else len(data) - 1, len(data) - 1)
        if start >= len(data):
            return 416, {**headers, "Content-Range": f"bytes */{len(data)}"}, b""
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        return 206, headers, data[start : end + 1]
    return 200, headers, data


class _StorageHandler(_Handler):
    """The object storage the Hub's signed URLs point to (S3 for uploads, the CDN for downloads): a
    separate origin that checks the URL's signature and expects no token."""

    def _route(self) -> tuple[str, Callable[..., tuple[int, dict[str, str], bytes]], tuple[Any, ...]]:
        s, m = self.segments, self.command
        path = urlsplit(self.path).path
        signed = hmac.compare_digest(self.query.get("X-Signature", [""])[0], self.hub.sign(path))
        if m == "PUT" and len(s) == 6 and s[0] == "upload":
            return "lfs_upload", self._upload, ((s[1], f"{s[2]}/{s[3]}"), s[4], int(s[5]), signed)
        if m in ("GET", "HEAD") and len(s) == 5 and s[0] == "objects":
            return "lfs_download", self._download, ((s[1], f"{s[2]}/{s[3]}"), s[4], signed)
        return "unknown", self._unknown, ()

    def _upload(self, key: tuple[str, str], oid: str, size: int, signed: bool) -> tuple[int, dict[str, str], bytes]:
        if not signed:
            raise HubError(403, "SignatureDoesNotMatch")
        if self.sent_token is not None:
            raise HubError(400, "fake storage: a token was sent to the storage origin")
        if len(self.body) != size or hashlib.sha256(self.body).hexdigest() != oid:
            raise HubError(400, "fake storage: the uploaded bytes do not match the object's sha256 and size")
        repo = self.hub.repos.get(key)
        if repo is None:
            raise HubError(404, "NoSuchBucket")
        repo.lfs_objects[oid] = self.body
        return 200, {"ETag": f'"{hashlib.md5(self.body).hexdigest()}"'}, b""

    def _download(self, key: tuple[str, str], oid: str, signed: bool) -> tuple[int, dict[str, str], bytes]:
        repo = self.hub.repos.get(key)
        if not signed:
            raise HubError(403, "SignatureDoesNotMatch")
        if repo is None or oid not in repo.lfs_objects:
            raise HubError(404, "NoSuchKey")
        data = repo.lfs_objects[oid]
        return _ranged(self.headers.get("Range"), {"Content-Type": "application/octet-stream", "ETag": f'"{oid}"'}, data)
