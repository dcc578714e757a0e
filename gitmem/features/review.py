"""Review of memory changes over a commit range, for pull requests and CI (``gitmem review``):
per memory what happened, who did it, the fields and body changed, and the problems a reviewer
should not miss (schema, dangling links, forks, cycles, secrets, gone anchors), as markdown
for a pull-request comment, text or JSON.
"""

from __future__ import annotations

import contextlib
import difflib
import html
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2
from pygit2.enums import SortMode

from gitmem.base.errors import GitmemError, InvalidInputError, NotFoundError
from gitmem.base.trailers import AGENT_TRAILER, OP_TRAILER, parse_trailers
from gitmem.format import codec, schema, secrets
from gitmem.format.layout import MEMORY_ROOTS, history_paths, id_from_path, memory_path
from gitmem.format.model import UNTITLED, Memory, Status
from gitmem.git.db import GitDB
from gitmem.git.diff import changed_paths, commit_changed_paths, memory_blob
from gitmem.git.objects import Snapshot, get_commit, tree_entry
from gitmem.store import memory_versions
from gitmem.store.memory_versions import bytes_at, read_at
from gitmem.store.merge import FORK_KEY

if TYPE_CHECKING:
    from gitmem.store.core import Store

DIFF_LIMIT = 80
"""Body diff lines shown per memory unless ``full``."""
KINDS = ("added", "updated", "superseded", "deleted", "archived", "pruned", "moved")
FORMATS = ("markdown", "json", "text")
_SUPERSEDES_RE = re.compile(r"^supersedes:[ \t]*['\"]?([^'\"\s#]+)", re.MULTILINE)


@dataclass(frozen=True)
class FieldChange:
    name: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.name, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class ReviewProblem:
    kind: str
    """invalid, dangling-supersedes, dangling-related, fork, cycle, secret, missing-anchor."""
    memory_id: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.memory_id, "message": self.message}


@dataclass
class MemoryChange:
    id: str
    kind: str
    path: str
    title: str | None = None
    category: str | None = None
    agents: list[str] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    fields: list[FieldChange] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)
    diff_truncated: int = 0
    """Diff lines left out (0: the whole diff is shown)."""
    supersedes: str | None = None
    moved_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fields": [f.to_dict() for f in self.fields]}


@dataclass
class Review:
    range: str
    base: str
    head: str
    commits: list[str] = field(default_factory=list)
    changes: list[MemoryChange] = field(default_factory=list)
    problems: list[ReviewProblem] = field(default_factory=list)
    chains: list[tuple[str, str, str]] = field(default_factory=list)
    """Edges (from, to, kind) of the changed version chains: supersedes or fork."""

    def problem(self, kind: str, memory_id: str, message: str) -> None:
        self.problems.append(ReviewProblem(kind, memory_id, message))

    def counts(self) -> dict[str, int]:
        return {kind: sum(1 for c in self.changes if c.kind == kind) for kind in KINDS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "range": self.range,
            "base": self.base,
            "head": self.head,
            "commits": self.commits,
            "counts": self.counts(),
            "changes": [c.to_dict() for c in self.changes],
            "problems": [p.to_dict() for p in self.problems],
            "chains": [{"from": a, "to": b, "kind": k} for a, b, k in self.chains],
        }


def resolve_commit(db: GitDB, rev: str) -> pygit2.Commit:
    """The commit of a revision or date (:meth:`GitDB.resolve`); NotFoundError if none."""
    commit = db.resolve(rev)
    if commit is None:
        raise NotFoundError(f"no revision {rev!r} in this store")
    return commit


def parse_range(db: GitDB, spec: str) -> tuple[str, str]:
    """``BASE..HEAD``, ``BASE...HEAD`` (from their merge base) or ``BASE`` (up to the tip)."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInputError("the review range is empty; give BASE..HEAD")
    if "..." in spec:
        left, right = spec.split("...", 1)
        a, b = resolve_commit(db, left or "HEAD"), resolve_commit(db, right or "HEAD")
        base = db.repo.merge_base(a.id, b.id)
        if base is None:
            raise InvalidInputError(f"{left} and {right} have no common history")
        return str(base), str(b.id)
    if ".." in spec:
        left, right = spec.split("..", 1)
        left_id, right_id = (resolve_commit(db, rev or "HEAD").id for rev in (left, right))
        return str(left_id), str(right_id)
    return str(resolve_commit(db, spec).id), str(resolve_commit(db, "HEAD").id)


def memory_paths(repo: pygit2.Repository, old: pygit2.Commit, new: pygit2.Commit) -> list[str]:
    """The memory files that differ between two commits, one path per memory (the path it
    has now, also for a commit from before ``gitmem migrate``)."""
    keys = {
        history_paths(path)[0]
        for path in changed_paths(old.tree, new.tree)
        if path.split("/", 1)[0] in MEMORY_ROOTS and path.endswith(".md")
    }
    return sorted(k for k in keys if memory_blob(old.tree, k) != memory_blob(new.tree, k))


def _touching(
    commits: list[pygit2.Commit], paths: list[str]
) -> dict[str, list[tuple[pygit2.Commit, list[tuple[str, str]]]]]:
    """For each path, the commits of the range that changed it (differs from every parent,
    as git log says); a plain id's change at its other path counts for it."""
    out: dict[str, list[tuple[pygit2.Commit, list[tuple[str, str]]]]] = {p: [] for p in paths}
    key_of = {twin: path for path in paths for twin in history_paths(path)}
    for commit in commits:
        changed = commit_changed_paths(commit) & key_of.keys()
        if changed:
            trailers = parse_trailers(commit.message)
            for path in sorted({key_of[p] for p in changed}):
                out[path].append((commit, trailers))
    return out


def field_changes(before: Memory, after: Memory) -> list[FieldChange]:
    old, new = before.rendered_metadata(), after.rendered_metadata()
    return [
        FieldChange(key, schema.to_json_value(old.get(key)), schema.to_json_value(new.get(key)))
        for key in [*old, *(k for k in new if k not in old)]
        if not (key in old and key in new and codec.same(old[key], new[key]))
    ]


def body_diff(path: str, before: str, after: str, full: bool) -> tuple[list[str], int]:
    lines = list(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
            lineterm="",
        )
    )
    if full or len(lines) <= DIFF_LIMIT:
        return lines, 0
    return lines[:DIFF_LIMIT], len(lines) - DIFF_LIMIT


def review(
    store: Store,
    spec: str,
    *,
    full: bool = False,
    project: str | Path | None = None,
    scope: str | None = None,
) -> Review:
    """Review the memory changes of ``spec`` (``BASE..HEAD``) in one store; anchors are
    checked against ``project``'s HEAD (a ``<project>/.gitmem/`` store: its own project)."""
    db = store.db(scope)
    repo = db.repo
    if project is None and db.workdir is not None and db.workdir.resolve().name == ".gitmem":
        # A project's own store (<project>/.gitmem/): its anchors name the project's files.
        parent = db.workdir.resolve().parent
        if (parent / ".git").exists():
            project = parent
    base_id, head_id = parse_range(db, spec)
    base, head = get_commit(repo, base_id), get_commit(repo, head_id)
    result = Review(range=spec, base=base_id, head=head_id)
    walker = repo.walk(head.id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.hide(base.id)
    commits = list(walker)
    result.commits = [str(c.id) for c in commits]
    paths = memory_paths(repo, base, head)
    touching = _touching(commits, paths)
    base_snap, head_snap = Snapshot(repo, base), Snapshot(repo, head)
    policy = secrets.policy_from_config(store.config(scope).raw)
    removed: dict[str, MemoryChange] = {}
    added: dict[str, str] = {}
    decoded: dict[str, Memory | None] = {}
    for path, old_data, new_data, (before, _), (after, problem) in read_pair(
        repo, base_snap, head_snap, paths
    ):
        memory_id = id_from_path(path) or (after.id if after else path)
        if new_data is not None and id_from_path(path) == memory_id:
            decoded[memory_id] = after
        if problem is not None:
            result.problem("invalid", memory_id, problem)
        shown = after or before
        ops = [v for _, trailers in touching[path] for k, v in trailers if k == OP_TRAILER]
        change = MemoryChange(
            id=memory_id,
            kind=_kind(before, after, old_data, new_data, ops),
            path=path,
            title=shown.title if shown else None,
            category=shown.category if shown else None,
            supersedes=after.supersedes if after and not before else None,
        )
        for commit, trailers in touching[path]:
            change.commits.append(str(commit.id))
            agent = next((v for k, v in trailers if k == AGENT_TRAILER), None)
            change.agents = list(dict.fromkeys([*change.agents, agent or commit.author.name]))
        if before is not None and after is not None:
            change.fields = field_changes(before, after)
        change.diff, change.diff_truncated = body_diff(
            path, before.body if before else "", after.body if after else "", full
        )
        if before is not None and after is None and new_data is None:
            removed[before.body] = change
        if old_data is None and after is not None:
            added[change.id] = after.body
        if new_data is not None:
            masked = _secrets(result, policy, memory_id, old_data, new_data)
            # Never repeat a credential in a comment that many people read: its diff line
            # shows the masked excerpt instead.
            change.diff = [
                line[0] + masked[line[1:]] if line[:1] == "+" and line[1:] in masked else line
                for line in change.diff
            ]
        result.changes.append(change)
    _moves(result, removed, added)
    _links(result, repo, head_snap, base_snap, project, decoded)
    return result


Read = tuple[Memory | None, str | None]
"""A memory as read (None if there is none or it is unreadable) and why it is unreadable."""


def read_pair(
    repo: pygit2.Repository, old: Snapshot, new: Snapshot, paths: list[str]
) -> Iterator[tuple[str, bytes | None, bytes | None, Read, Read]]:
    """Each changed path, its bytes and its memory in ``old`` and ``new``, with version and
    updated_at derived from history as ``gitmem history`` shows them."""
    out = {p: (a, b) for p in paths if (a := read_at(old, p)) != (b := read_at(new, p))}
    befores = memory_versions.as_read(repo, old.commit, {p: x[0][0] for p, x in out.items()})
    afters = memory_versions.as_read(repo, new.commit, {p: x[1][0] for p, x in out.items()})
    for path, (was, now) in out.items():
        old_data, new_data = bytes_at(old, path), bytes_at(new, path)
        yield path, old_data, new_data, (befores[path], was[1]), (afters[path], now[1])


def _kind(
    before: Memory | None,
    after: Memory | None,
    old: bytes | None,
    new: bytes | None,
    ops: list[str],
) -> str:
    if old is None:
        return "superseded" if after is not None and after.supersedes else "added"
    if "prune" in ops:
        return "pruned"
    if new is None:
        return "deleted"
    if after is not None and after.status is Status.ARCHIVED:
        return "updated" if before is not None and before.status is Status.ARCHIVED else "archived"
    return "updated"


def _moves(result: Review, removed: dict[str, MemoryChange], added: dict[str, str]) -> None:
    """An added memory with the body of a deleted one (and no supersedes) is a move."""
    gone: list[MemoryChange] = []
    for change in result.changes:
        if change.kind != "added":
            continue
        old = removed.get(added.get(change.id, "\0"))
        if old is not None and old.kind == "deleted" and old not in gone:
            change.kind, change.moved_from = "moved", old.id
            gone.append(old)
    result.changes = [c for c in result.changes if c not in gone]


def _secrets(
    result: Review,
    policy: secrets.SecretPolicy,
    memory_id: str,
    old: bytes | None,
    new: bytes,
) -> dict[str, str]:
    """Report new secrets in ``new``; returns each reported line's masked excerpt."""
    masked: dict[str, str] = {}
    text = new.decode("utf-8", "replace")
    old_lines = set(old.decode("utf-8", "replace").splitlines()) if old else set()
    lines = text.splitlines()
    for finding in policy.scan(text):
        if 0 < finding.line <= len(lines):
            if lines[finding.line - 1] in old_lines:
                continue  # there before this range: not this change's doing
            masked[lines[finding.line - 1]] = finding.excerpt
        result.problem(
            "secret",
            memory_id,
            f"line {finding.line} looks like a credential ({finding.kind}): {finding.excerpt}",
        )
    return masked


def _head_memory(snap: Snapshot, memory_id: str, cache: dict[str, Memory | None]) -> Memory | None:
    """The memory at HEAD, decoded once per review (decoding validates: it is most of the cost)."""
    if memory_id in cache:
        return cache[memory_id]
    try:
        path = snap.locate(memory_id) or memory_path(memory_id)
    except GitmemError:
        return None
    memory, _ = read_at(snap, path)
    cache[memory_id] = memory
    return memory


def _successors(snap: Snapshot) -> Iterator[tuple[str, str]]:
    """(successor, predecessor) for every memory at ``snap`` naming a predecessor."""
    for root in MEMORY_ROOTS:
        for path in snap.iter_files(root):
            data = bytes_at(snap, path)
            if not data or b"supersedes:" not in data:
                continue
            head = data.split(b"\n---", 1)[0].decode("utf-8", "replace")
            found = _SUPERSEDES_RE.search(head)
            memory_id = id_from_path(path)
            if found and memory_id:
                yield memory_id, found.group(1)


def _links(
    result: Review,
    repo: pygit2.Repository,
    head: Snapshot,
    base: Snapshot,
    project: str | Path | None,
    decoded: dict[str, Memory | None],
) -> None:
    present = {c.id: c for c in result.changes if head.exists(c.path)}
    wanted_forks: set[str] = set()
    for change in result.changes:
        memory = _head_memory(head, change.id, decoded) if change.id in present else None
        if memory is None:
            continue
        if memory.supersedes:
            target = memory.supersedes
            exists = False
            with contextlib.suppress(GitmemError):
                exists = head.locate(target) is not None or base.locate(target) is not None
            if not exists:
                result.problem(
                    "dangling-supersedes",
                    memory.id,
                    f"supersedes {target}, which is in neither {result.base[:10]} nor "
                    f"{result.head[:10]}",
                )
            result.chains.append((target, memory.id, "supersedes"))
            wanted_forks.add(target)
            _cycle(result, head, memory, decoded)
        for related in memory.related:
            if _head_memory(head, related.id, decoded) is None:
                result.problem(
                    "dangling-related",
                    memory.id,
                    f"related {related.id} ({related.relationship}) is not in the store",
                )
        of = memory.extra.get(FORK_KEY)
        if isinstance(of, str) and change.kind in {"added", "superseded"}:
            result.problem("fork", memory.id, f"unresolved merge fork of {of}")
            result.chains.append((of, memory.id, "fork"))
        if project is not None:
            _anchors(result, memory, project)
    if wanted_forks:
        successors: dict[str, list[str]] = {}
        for new, old in _successors(head):
            if old in wanted_forks:
                successors.setdefault(old, []).append(new)
        for target, ids in sorted(successors.items()):
            if len(ids) > 1:
                listed = ", ".join(sorted(ids))
                result.problem("fork", target, f"{target} has {len(ids)} successors: {listed}")
                for other in sorted(ids):
                    if (target, other, "supersedes") not in result.chains:
                        result.chains.append((target, other, "supersedes"))


def _cycle(
    result: Review, head: Snapshot, start: Memory, decoded: dict[str, Memory | None]
) -> None:
    seen = {start.id}
    current: Memory | None = start
    for _ in range(1000):
        if current is None or not current.supersedes:
            return
        target = current.supersedes
        if target in seen:
            result.problem(
                "cycle", start.id, f"the supersedes chain from {start.id} loops at {target}"
            )
            return
        seen.add(target)
        current = _head_memory(head, target, decoded)


def _anchors(result: Review, memory: Memory, project: str | Path) -> None:
    from gitmem.features.lifecycle.anchors import anchors_of, open_project

    repo = open_project(project)
    try:
        tree = repo.head.peel(pygit2.Commit).tree
    except (pygit2.GitError, KeyError):
        return
    for anchor in anchors_of(memory.extra):
        if tree_entry(tree, anchor.rstrip("/")) is None:
            result.problem(
                "missing-anchor", memory.id, f"anchor {anchor} does not exist at the project's HEAD"
            )


COMMENT_LIMIT = 65_536
"""A GitHub pull-request comment's length limit in characters (GitLab allows 1,000,000)."""


def render(result: Review, fmt: str = "markdown", *, max_chars: int | None = None) -> str:
    """The review as ``fmt``; markdown cut to at most ``max_chars`` characters when given,
    keeping the summary and every problem first, then the table, then the details, and
    saying what was left out. JSON and text are never cut."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    if max_chars is not None and (
        isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1024
    ):
        raise InvalidInputError(f"max_chars must be an integer of at least 1024, not {max_chars!r}")
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2, ensure_ascii=False)
    if fmt == "text":
        return _text(result)
    return _markdown(result, max_chars)


def _summary(result: Review) -> str:
    counts = ", ".join(f"{n} {kind}" for kind, n in result.counts().items() if n)
    problems = len(result.problems)
    return (
        f"{len(result.commits)} commit(s), {len(result.changes)} memor"
        f"{'y' if len(result.changes) == 1 else 'ies'} changed"
        + (f" ({counts})" if counts else "")
        + f", {problems} problem(s)"
    )


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(text.split()).replace("|", "\\|") or " "


class _Budget:
    """Markdown blocks added while they fit; what does not fit is counted, not shown."""

    # Room kept for the closing line that says what was cut.
    RESERVE = 400

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.out: list[str] = []
        self.size = 0
        self.cut: dict[str, int] = {}

    def add(self, lines: list[str], what: str | None = None) -> bool:
        """Add ``lines`` (one block) if they fit; else count one ``what`` left out."""
        size = sum(len(line) + 1 for line in lines)
        if self.limit is not None and self.size + size > self.limit - self.RESERVE:
            if what is not None:
                self.cut[what] = self.cut.get(what, 0) + 1
            return False
        self.out += lines
        self.size += size
        return True

    def text(self) -> str:
        if self.cut:
            left = ", ".join(f"{n} {what}" for what, n in self.cut.items())
            self.out += [
                "",
                f"**Cut to fit a {self.limit:,}-character comment:** {left} not shown here. "
                "The full report is the CI job's artifact "
                "(`gitmem review RANGE > review.md` prints it all).",
            ]
        return "\n".join(self.out).rstrip("\n") + "\n"


def _markdown(result: Review, max_chars: int | None = None) -> str:
    doc = _Budget(max_chars)
    doc.add([f"## gitmem review `{result.base[:7]}..{result.head[:7]}`", "", _summary(result), ""])
    # Problems come before the table: a cut comment must still show every reason to block.
    doc.add(["### Problems", ""])
    if result.problems:
        for p in result.problems:
            where = f" `{p.memory_id}`" if p.memory_id else ""
            doc.add([f"- **{p.kind}**{where}: {p.message}"], "problem(s)")
    else:
        doc.add(["None found."])
    doc.add([""])
    if result.changes and doc.add(
        [
            "### Changed memories",
            "",
            "| change | id | title | category | by | commits |",
            "|---|---|---|---|---|---|",
        ]
    ):
        for c in result.changes:
            what = c.kind + (f" from `{c.moved_from}`" if c.moved_from else "")
            doc.add(
                [
                    f"| {what} | `{c.id}` | {_cell(c.title or UNTITLED)} | "
                    f"{_cell(c.category or '-')} | {_cell(', '.join(c.agents) or '-')} | "
                    f"{', '.join(f'`{h[:7]}`' for h in c.commits)} |"
                ],
                "table row(s)",
            )
        doc.add([""])
    if result.chains:
        chart = ["### Version chains", "", "```mermaid", "graph LR"]
        names: dict[str, str] = {}

        def node(memory_id: str) -> str:
            if memory_id not in names:
                names[memory_id] = f"n{len(names)}"
                chart.append(f'  {names[memory_id]}["{memory_id}"]')
            return names[memory_id]

        for a, b, kind in result.chains:
            left, right = node(a), node(b)
            arrow = "-.->|fork|" if kind == "fork" else "-->|superseded by|"
            chart.append(f"  {left} {arrow} {right}")
        doc.add([*chart, "```", ""], "version-chain diagram")
    if result.changes:
        doc.add(["### Changes", ""])
    for c in result.changes:
        title = html.escape(f" {c.title}", quote=False) if c.title else ""
        block = [
            f"<details><summary><b>{c.kind}</b> <code>{c.id}</code>{title}</summary>",
            "",
        ]
        if c.supersedes:
            block += [f"Supersedes `{c.supersedes}`.", ""]
        if c.fields:
            block += ["| field | before | after |", "|---|---|---|"]
            block += [
                f"| {f.name} | {_cell(f.before if f.before is not None else '-')} | "
                f"{_cell(f.after if f.after is not None else '-')} |"
                for f in c.fields
            ]
            block.append("")
        if c.diff:
            block += ["```diff", *c.diff, "```"]
            if c.diff_truncated:
                block.append(f"… {c.diff_truncated} more line(s) (--full shows them)")
            block.append("")
        block += ["</details>", ""]
        doc.add(block, "change detail(s)")
    return doc.text()


def _text(result: Review) -> str:
    out = [f"review {result.base[:10]}..{result.head[:10]}: {_summary(result)}"]
    for c in result.changes:
        extra = f" (from {c.moved_from})" if c.moved_from else ""
        extra += f" (supersedes {c.supersedes})" if c.supersedes else ""
        out.append(
            f"{c.kind:<10} {c.id}{extra}  {c.title or UNTITLED}  by {', '.join(c.agents) or '-'}"
        )
        out += [f"    {f.name}: {_cell(f.before)} -> {_cell(f.after)}" for f in c.fields]
        out += [f"    {line}" for line in c.diff]
        if c.diff_truncated:
            out.append(f"    … {c.diff_truncated} more line(s)")
    if result.problems:
        out.append("problems:")
        out += [
            f"  {p.kind}: " + (f"{p.memory_id}: " if p.memory_id else "") + p.message
            for p in result.problems
        ]
    return "\n".join(out) + "\n"
