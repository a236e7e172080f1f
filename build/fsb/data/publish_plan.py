"""What a publish will do and what it did: `PublishPlan` (computed from local checks and remote reads only,
printable) and `PublishResult`. Split from `fsb.data.publish`, which re-exports both."""

from __future__ import annotations

from dataclasses import dataclass

from fsb.data.localbuild import LocalBuild

__all__ = ["BRANCH", "PublishPlan", "PublishResult"]

BRANCH = "main"


@dataclass(frozen=True)
class PublishPlan:
    """What a publish will do; computed from local checks and remote reads only."""

    repo_id: str
    version: str
    tag: str
    endpoint: str
    build: LocalBuild
    create_repo: bool
    private: bool
    parent_commit: str | None
    add: tuple[str, ...]
    unchanged: tuple[str, ...]
    delete: tuple[str, ...]
    latest_tag: str | None
    has_token: bool
    warnings: tuple[str, ...] = ()
    changes: str | None = None  # `format_diff` of the latest release against this build, if there is one

    @property
    def needs_commit(self) -> bool:
        return bool(self.add or self.delete)

    def lines(self) -> list[str]:
        """The plan as printable lines (no secrets in it)."""
        from fsb.core.secrets import safe_url  # the endpoint is printed without its credentials

        where = f"{safe_url(self.endpoint)}/datasets/{self.repo_id}"
        out = [f"plan: publish {self.build.folder} to {where} as {self.tag}"]
        if self.create_repo:
            out.append(f"  create dataset repo {self.repo_id} ({'private' if self.private else 'public'})")
        else:
            out.append(f"  repo exists ({'private' if self.private else 'public'}), main at {self.parent_commit}")
        out.append(f"  latest release: {self.latest_tag or 'none'}; new tag {self.tag}")
        if self.needs_commit:
            out.append(f"  one commit on {BRANCH}" + (f" with parent {self.parent_commit}" if self.parent_commit else ""))
        else:
            out.append(f"  no commit: {BRANCH} already holds exactly this build; only the tag is created")
        out += [f"    add     {p}" for p in self.add]
        out += [f"    delete  {p}" for p in self.delete]
        out += [f"    same    {p}" for p in self.unchanged]
        out.append(f"  fingerprint {self.build.fingerprint}")
        if self.changes:
            out += ["  " + line for line in self.changes.splitlines()]
        if not self.has_token:
            out.append("  no token (HF_TOKEN): a real publish would be refused")
        return out


@dataclass(frozen=True)
class PublishResult:
    """The outcome: the plan, and (unless a dry run) the tagged commit."""

    plan: PublishPlan
    dry_run: bool
    commit_oid: str | None = None
    commit_url: str | None = None
    committed: bool = False
    created_repo: bool = False

    @property
    def tag(self) -> str:
        return self.plan.tag

    def lines(self) -> list[str]:
        """The result as printable lines (URLs without credentials)."""
        from fsb.core.secrets import safe_url

        if self.dry_run:
            return [*self.plan.lines(), "dry run: nothing was written to the Hub"]
        p = self.plan
        return [
            f"published {p.repo_id} {p.tag}",
            f"  commit {self.commit_oid} {safe_url(self.commit_url or '')}" + ("" if self.committed else " (already on main; tag only)"),
            f"  tag {p.tag} -> {self.commit_oid}",
            f'  load it with: datasets.load_dataset("{p.repo_id}", revision="{p.tag}")',
        ]
