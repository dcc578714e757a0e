"""``gitmem purge``: remove a memory, or every match of a pattern, from all of history
(docs/security.md): every commit of a local branch or tag rewritten oldest first, the refs
moved under the write lock, every derived copy deleted, and the steps that finish it on the
hub and every clone reported. Refuses what cannot be done safely; writes only with ``apply``.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import pygit2

from gitmem.base import paths, redact
from gitmem.base.errors import ConflictError, InvalidInputError, NotFoundError
from gitmem.format import saferegex
from gitmem.format import secrets as secrets_mod
from gitmem.format.layout import check_id, history_paths, memory_path
from gitmem.format.model import Scope
from gitmem.git.db import GitDB, operation_in_progress
from gitmem.git.objects import blob_data, builder_remove, tree_entry
from gitmem.store.core import Store

MESSAGE_PATH = "(commit message)"
REPLACEMENT = "(purged)"
"""No YAML indicator: a plain front-matter value stays a plain string (not ``[purged]``)."""

MIN_TITLE = 4
"""Titles shorter than this are not replaced in commit messages (too likely elsewhere)."""
REGEX_TIMEOUT = 1.0
"""Seconds a pattern may spend on one text (a file version, a message) before it is stopped."""
MAX_TEXT_BYTES = 16 * 1024 * 1024
"""Blobs larger than this are not searched for a pattern (as ``gitmem secrets``)."""


class PurgeRefusedError(ConflictError):
    """The rewrite cannot be done safely now; the message says why and what to do first."""


@dataclass(frozen=True)
class Removal:
    """One thing removed: a file version or its matches (``path``; :data:`MESSAGE_PATH` for a
    commit message's), by the ``commit`` that introduced it (its id before the rewrite)."""

    commit: str
    path: str
    what: str

    def line(self) -> str:
        return f"{self.commit[:10]} {self.path}: {self.what}"


@dataclass(frozen=True)
class Step:
    """One place the purge must be finished, and the commands to run there."""

    where: str
    commands: list[str]
    note: str = ""


@dataclass
class PurgeReport:
    """What a purge removed (or, in a dry run, would remove) and how to finish it."""

    target: str
    applied: bool
    scope: str
    removals: list[Removal] = field(default_factory=list)
    commits_rewritten: int = 0
    refs: list[tuple[str, str, str]] = field(default_factory=list)  # (ref, old id, new id)
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.removals)

    def to_dict(self) -> dict[str, Any]:
        refs = [{"ref": r, "old": o, "new": n} for r, o, n in self.refs]
        return {**asdict(self), "refs": refs}


# -- what to remove ------------------------------------------------------------------------


Spans = list[tuple[int, int, str]]
"""(start, end, kind) of each match in a text; kind may be empty."""


def _title(text: str | None) -> str | None:
    """The ``title`` of a memory file's front-matter, if it parses and has one."""
    if text is None:
        return None
    from gitmem.format import codec

    try:
        title = codec.parse(text).metadata.get("title")
    except (InvalidInputError, ValueError, RecursionError):
        return None
    return title.strip() if isinstance(title, str) and title.strip() else None


def _replace(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, _ in spans:
        if start < pos:
            continue
        out.append(text[pos:start])
        out.append(REPLACEMENT)
        pos = end
    out.append(text[pos:])
    return "".join(out)


# -- the rewrite ---------------------------------------------------------------------------


def _tips(repo: pygit2.Repository) -> tuple[dict[str, pygit2.Oid], list[str]]:
    """Local branches and lightweight tags (name -> commit), and annotated tag names."""
    refs: dict[str, pygit2.Oid] = {}
    annotated: list[str] = []
    for name in repo.references:
        if not name.startswith(("refs/heads/", "refs/tags/")):
            continue
        ref = repo.references[name]
        if not isinstance(ref.target, pygit2.Oid):
            continue
        obj = repo.get(ref.target)
        if obj is None:
            raise PurgeRefusedError(
                f"{name} points at a missing object",
                hint="run gitmem doctor; fetch the object from a clone first",
            )
        if obj.type == pygit2.enums.ObjectType.COMMIT:
            refs[name] = ref.target
        elif obj.type == pygit2.enums.ObjectType.TAG:
            annotated.append(name)
    return refs, annotated


class _Rewriter:
    """Every commit's tree without the files at ``drop``, its blobs in ``blobs`` replaced."""

    def __init__(
        self, repo: pygit2.Repository, drop: tuple[str, ...], blobs: dict[pygit2.Oid, bytes]
    ) -> None:
        self.repo = repo
        self.drop = drop
        self.blobs = blobs
        self.tree_map: dict[tuple[pygit2.Oid, str], pygit2.Oid | None] = {}
        self.touched: dict[pygit2.Oid, bool] = {}

    def touches(self, tree: pygit2.Tree) -> bool:
        """Whether the rewrite changes this tree (memoised by tree id)."""
        known = self.touched.get(tree.id)
        if known is None:
            if self.drop:
                known = any(tree_entry(tree, path) is not None for path in self.drop)
            else:
                known = any(
                    entry.id in self.blobs
                    if entry.type_str == "blob"
                    else entry.type_str == "tree"
                    and isinstance(sub := self.repo[entry.id], pygit2.Tree)
                    and self.touches(sub)
                    for entry in tree
                )
            self.touched[tree.id] = known
        return known

    def tree(self, tree: pygit2.Tree) -> pygit2.Oid:
        """The rewritten tree's id (written to the object database)."""
        new = self._rewritten(tree, "")
        return self.repo.TreeBuilder().write() if new is None else new

    def _rewritten(self, tree: pygit2.Tree, base: str) -> pygit2.Oid | None:
        """``tree`` (the folder ``base``) rewritten; None when nothing is left in it."""
        drop = self.drop
        key = (tree.id, base if drop else "")
        if key in self.tree_map:
            return self.tree_map[key]
        builder: pygit2.TreeBuilder | None = None
        for entry in tree:
            path = f"{base}{entry.name}"
            new: pygit2.Oid | None = entry.id
            if path in drop:
                new = None
            elif entry.type_str == "blob" and entry.id in self.blobs:
                new = self.repo.create_blob(self.blobs[entry.id])
            elif entry.type_str == "tree" and (
                not drop or any(d.startswith(f"{path}/") for d in drop)
            ):
                sub = self.repo[entry.id]
                if isinstance(sub, pygit2.Tree):
                    new = self._rewritten(sub, f"{path}/")
            if new != entry.id:
                if builder is None:
                    builder = self.repo.TreeBuilder(tree)
                if new is None:
                    builder_remove(self.repo, builder, str(entry.name))
                else:
                    builder.insert(str(entry.name), new, entry.filemode)
        result = tree.id if builder is None else builder.write() if len(builder) else None
        self.tree_map[key] = result
        return result


def new_blobs(
    repo: pygit2.Repository, tree: pygit2.Tree, seen: set[pygit2.Oid]
) -> Iterator[tuple[pygit2.Oid, str]]:
    """Each blob below ``tree`` not in ``seen`` yet, with its path (trees in ``seen`` are
    skipped whole, so a history's walk reads each object once). Iterative: a hostile history
    may nest trees deeper than Python recurses; a missing subtree is skipped."""
    stack: list[tuple[pygit2.Tree, str]] = [(tree, "")]
    while stack:
        current, base = stack.pop()
        for entry in current:
            if entry.id in seen:
                continue
            seen.add(entry.id)
            if entry.type_str == "tree":
                sub = repo.get(entry.id)
                if isinstance(sub, pygit2.Tree):
                    stack.append((sub, f"{base}{entry.name}/"))
            elif entry.type_str == "blob":
                yield entry.id, f"{base}{entry.name}"


def text_blob(
    repo: pygit2.Repository, oid: pygit2.Oid, limit: int = MAX_TEXT_BYTES
) -> bytes | None:
    """The blob's content if it is text (no NUL in its first 8 KiB) and at most ``limit``
    bytes; None for binary, oversized or missing blobs."""
    try:  # the size from the header first: a blob over the bound is never inflated
        kind, size = repo.odb.read_header(oid)
    except (KeyError, pygit2.GitError):
        return None
    if kind != pygit2.enums.ObjectType.BLOB or size > limit:
        return None
    data = cast(pygit2.Blob, repo[oid]).data
    return None if b"\0" in data[:8192] else data


def _collect(
    repo: pygit2.Repository, commits: list[pygit2.Commit]
) -> tuple[dict[pygit2.Oid, str], dict[pygit2.Oid, str], dict[pygit2.Oid, tuple[str, str]]]:
    """Every distinct text blob (decoded), every message, and where each blob first
    appeared: (introducing commit, path)."""
    texts: dict[pygit2.Oid, str] = {}
    messages: dict[pygit2.Oid, str] = {}
    first: dict[pygit2.Oid, tuple[str, str]] = {}
    seen: set[pygit2.Oid] = set()
    for commit in commits:
        messages[commit.id] = commit.message
        for oid, path in new_blobs(repo, commit.tree, seen):
            first[oid] = (str(commit.id), path)
            data = text_blob(repo, oid)
            if data is not None:
                texts[oid] = data.decode("utf-8", "surrogateescape")
    return texts, messages, first


def purge(
    store: Store,
    *,
    memory: str | None = None,
    pattern: str | None = None,
    secrets: bool = False,
    apply: bool = False,
    scope: Scope | str | None = None,
    remote: str | None = None,
    timeout: float = REGEX_TIMEOUT,
) -> PurgeReport:
    """Remove ``memory`` (every version), every match of ``pattern``, or every credential
    the store's policy finds (``secrets``) from all of history; without ``apply`` only the
    report. :class:`PurgeRefusedError` where that cannot be done safely, NotFoundError when
    ``memory`` was never in the store."""
    if sum([memory is not None, pattern is not None, bool(secrets)]) != 1:
        raise InvalidInputError("give one of a memory id, a pattern or secrets=True")
    db = store.db(scope)
    repo = db.repo
    drop: tuple[str, ...] = ()
    finder: Callable[[str], Spans] | None = None
    if memory is not None:
        label, drop = f"memory {memory}", history_paths(memory_path(check_id(memory)))
    elif pattern is not None:
        if not isinstance(pattern, str) or not pattern:
            raise InvalidInputError("the pattern is empty")
        compiled = saferegex.compile(pattern, timeout=timeout, what="the pattern")
        label = "every match of the pattern"

        def finder(text: str) -> Spans:
            return [(a, b, "") for a, b in compiled.spans(text)]

    else:
        policy = secrets_mod.policy_from_config(store.config(scope).raw)
        label = "every credential"

        def finder(text: str) -> Spans:
            return redact.secret_spans(text, policy.patterns, policy.allow, honour_marker=True)

    remotes = [n for n in repo.remotes.names() if n]
    remote = remote or ("origin" if "origin" in remotes else remotes[0] if remotes else None)
    report = PurgeReport(label, apply, str(store.scopes[0] if scope is None else scope))
    _refuse_unsafe(db, remote)
    refs, annotated = _tips(repo)
    if not refs:
        return report
    order = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE
    names = sorted(refs)
    walker = repo.walk(refs[names[0]], order)
    for name in names[1:]:
        walker.push(refs[name])
    commits = list(walker)
    texts, messages, first = _collect(repo, commits)
    # The new content of each changed blob and message, and what is removed, by the commit
    # that introduced it.
    blobs: dict[pygit2.Oid, bytes] = {}
    new_messages: dict[pygit2.Oid, str] = {}
    if finder is None:
        versions: list[pygit2.Oid] = []
        for commit in commits:
            for path in drop:
                entry = tree_entry(commit.tree, path)
                if entry is not None and entry.id not in versions:
                    versions.append(entry.id)
                    report.removals.append(Removal(str(commit.id), path, "file removed"))
        if not versions:
            raise NotFoundError(f"{memory} was never in the store")
        # gitmem's commit subjects spell out the memory's titles: longest first, so a title
        # containing another is replaced whole.
        titles = {t for oid in versions if (t := _title(texts.get(oid))) and len(t) >= MIN_TITLE}
        for oid, message in messages.items():
            replaced = message
            for title in sorted(titles, key=len, reverse=True):
                replaced = replaced.replace(title, REPLACEMENT)
            if replaced != message:
                new_messages[oid] = replaced
                report.removals.append(
                    Removal(str(oid), MESSAGE_PATH, "the memory's title replaced")
                )
    else:
        for n, (key, text) in enumerate([*texts.items(), *messages.items()]):
            spans = finder(text)
            if not spans:
                continue
            kinds = sorted({kind for _, _, kind in spans if kind})
            what = f"{len(spans)} match{'es' if len(spans) > 1 else ''} replaced" + (
                f" ({', '.join(kinds)})" if kinds else ""
            )
            if n < len(texts):
                blobs[key] = _replace(text, spans).encode("utf-8", "surrogateescape")
                report.removals.append(Removal(*first[key], what))
            else:
                new_messages[key] = _replace(text, spans)
                report.removals.append(Removal(str(key), MESSAGE_PATH, what))
        position = {str(c.id): n for n, c in enumerate(commits)}
        report.removals.sort(key=lambda r: (position.get(r.commit, 0), r.path))
    if not report.removals:
        return report
    rewriter = _Rewriter(repo, drop, blobs)
    # Which commits change: their tree or message does, or a parent does.
    changed: set[pygit2.Oid] = set()
    for commit in commits:
        if (
            rewriter.touches(commit.tree)
            or commit.id in new_messages
            or any(p in changed for p in commit.parent_ids)
        ):
            changed.add(commit.id)
    report.commits_rewritten = len(changed)
    bad_tags = [
        name for name in annotated if repo.references[name].peel(pygit2.Commit).id in changed
    ]
    if bad_tags:
        raise PurgeRefusedError(
            f"annotated tag {bad_tags[0]} points into the history to rewrite",
            hint=f"delete it first (git -C {db.path} tag -d {bad_tags[0].split('/', 2)[2]}) "
            "and tag the rewritten commit again afterwards",
        )
    if not apply:
        report.refs = [(n, str(refs[n]), "") for n in names if refs[n] in changed]
        report.steps = _steps(db, remote, report, dry_run=True)
        return report
    with db.writer_lock(time.monotonic() + db.lock_timeout):
        _refuse_unsafe(db, remote)  # again, under the lock: nothing moved meanwhile
        mapping: dict[pygit2.Oid, pygit2.Oid] = {}
        for commit in commits:
            if commit.id not in changed:
                continue
            message = new_messages.get(commit.id, commit.message)
            parents = [mapping.get(p, p) for p in commit.parent_ids]
            # Author, committer and their times are kept: the history reads as before.
            mapping[commit.id] = repo.create_commit(
                None, commit.author, commit.committer, message, rewriter.tree(commit.tree), parents
            )
        old_tip = db.tip()
        for name in names:
            old = refs[name]
            new = mapping.get(old)
            if new is None:
                continue
            ref = repo.references[name]
            if ref.target != old:
                raise PurgeRefusedError(f"{name} moved during the purge; run it again")
            ref.set_target(new, "gitmem purge: history rewritten")
            report.refs.append((name, str(old), str(new)))
        new_tip = db.tip()
        if db.worktree is not None and old_tip is not None and new_tip is not None:
            changes: dict[str, bytes | None] = {}
            for delta in old_tip.tree.diff_to_tree(new_tip.tree).deltas:
                path = delta.new_file.path or delta.old_file.path
                entry = tree_entry(new_tip.tree, path)
                changes[path] = blob_data(repo, entry.id) if entry is not None else None
            db.worktree.update(new_tip, changes)
    _drop_derived(db)
    report.steps = _steps(db, remote, report, dry_run=False)
    return report


def _refuse_unsafe(db: GitDB, remote: str | None) -> None:
    repo = db.repo
    what = operation_in_progress(db.gitdir)
    if what is not None:
        raise PurgeRefusedError(
            f"{what[0]} is in progress in {db.path}; a rewrite now would lose it",
            hint=f"finish or abort it first (git {what[1]} --abort)",
        )
    if db.workdir is not None:
        dirty = sorted(repo.status(untracked_files="no"))  # changed tracked files only
        if dirty:
            raise PurgeRefusedError(
                f"{dirty[0]} has uncommitted changes"
                + (f" (and {len(dirty) - 1} more)" if len(dirty) > 1 else ""),
                hint="commit or discard them first (git -C STORE status)",
            )
    ref = repo.references.get(f"refs/remotes/{remote}/{db.branch}") if remote else None
    theirs, tip = (ref.target if ref is not None else None), db.tip()
    if (
        isinstance(theirs, pygit2.Oid)
        and tip is not None
        and theirs != tip.id
        and not repo.descendant_of(tip.id, theirs)
    ):
        raise PurgeRefusedError(
            f"{remote}/{db.branch} has commits this store has not merged; the force-push "
            "would drop them",
            hint="run gitmem sync first, then purge",
        )


def _drop_derived(db: GitDB) -> None:
    """Delete every derived copy (:data:`paths.DERIVED_COPIES`) in the state folder and those
    set aside: SQLite keeps deleted rows in free pages. A link is removed, never followed."""
    folders = [db.state_dir, *paths.set_aside_folders(db.gitdir)]
    for pattern in paths.DERIVED_COPIES:
        for path in (p for folder in folders for p in folder.glob(pattern)):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def _rm_derived(gitdir: str) -> str:
    """The shell command that deletes the derived copies of the store at ``gitdir``."""
    return "rm -rf " + " ".join(
        f"{gitdir}/{folder}/{pattern}"
        for folder in (paths.STATE_DIR, f"{paths.SET_ASIDE}*")
        for pattern in paths.DERIVED_COPIES
    )


def _gc(where: str) -> list[str]:
    """The commands that delete the unreferenced objects of the repository at ``where``."""
    return [
        f"git -C {where} reflog expire --expire=now --all",
        f"git -C {where} gc --prune=now --quiet",
    ]


def _is_local_path(url: str) -> bool:
    return url.startswith(("/", "file://", "./", "../")) or (
        "://" not in url and ":" not in url.split("/")[0]
    )


def _steps(db: GitDB, remote: str | None, report: PurgeReport, *, dry_run: bool) -> list[Step]:
    here = shlex.quote(str(db.path))
    steps: list[Step] = []
    branches = [(name, old) for name, old, _ in report.refs if name.startswith("refs/heads/")]
    if dry_run:
        steps.append(
            Step("this store", [], "first run the same purge with --apply: it rewrites history")
        )
    url: str | None = None
    lease_base: dict[str, str] = {}
    if remote is not None:
        with contextlib.suppress(KeyError, ValueError):
            url = db.repo.remotes[remote].url
        for name, _ in branches:
            tracking = db.repo.references.get(f"refs/remotes/{remote}/{name[len('refs/heads/') :]}")
            if tracking is not None:
                lease_base[name] = str(tracking.target)
    if remote is not None and lease_base:
        pushes = [
            f"git -C {here} push --force-with-lease={name}:{old} {shlex.quote(remote)} "
            f"{name}:{name}"
            for name, old in lease_base.items()
        ]
        steps.append(
            Step(
                "the hub",
                pushes,
                "the lease refuses the push if anyone pushed since this store last fetched: "
                "then sync, purge again and push again",
            )
        )
        hub = shlex.quote((url or "").removeprefix("file://"))
        local = url is not None and _is_local_path(url)
        steps.append(
            Step(
                "the hub's own copy",
                [*_gc(hub), _rm_derived(hub)] if local else [],
                "so the old objects are deleted, not only unreferenced"
                if local
                else f"{url or remote} is hosted: the host keeps unreferenced objects, cached "
                "views and pull-request refs until it collects them; ask its support to "
                "run garbage collection (GitHub, GitLab: a support request), and rotate "
                "any credential anyway",
            )
        )
    steps.append(
        Step(
            "this store",
            _gc(here),
            "after the push (the remote-tracking branch still holds the old commits until then)"
            if lease_base
            else "so the old objects are deleted, not only unreferenced",
        )
    )
    if remote is not None and lease_base:
        name, old = next(iter(lease_base.items()))
        short = name[len("refs/heads/") :]
        theirs = f"{remote}/{short}"
        steps.append(
            Step(
                "every other clone (CLONE: its path; each teammate and agent runs this)",
                [
                    f"git -C CLONE log --oneline {shlex.quote(theirs)}..{short}"
                    "  # work not pushed yet: if this prints commits, keep them (below)",
                    f"git -C CLONE fetch {shlex.quote(remote)}",
                    f"git -C CLONE reset --hard {shlex.quote(theirs)}"
                    f"  # or, to keep unpushed work: git -C CLONE rebase --onto {theirs} {old} "
                    f"{short}",
                    *_gc("CLONE"),
                    _rm_derived("CLONE/.git"),
                ],
                "or delete the clone and clone the hub again; work not pushed yet was made on "
                "the old history and may hold what was purged: check it before you keep it "
                "(gitmem secrets --history), and purge again if it does",
            )
        )
    else:
        steps.append(
            Step(
                "every copy of this store",
                [],
                "the branch is on no remote this store knows of (none configured, or never "
                "pushed): any copy made earlier still holds what was purged; replace each "
                "with a fresh clone of this store",
            )
        )
    return steps


def format_steps(steps: Iterable[Step]) -> list[str]:
    """The steps as lines to print."""
    lines: list[str] = []
    for n, step in enumerate(steps, 1):
        lines.append(f"{n}. on {step.where}:")
        lines.extend(f"     {command}" for command in step.commands)
        if step.note:
            lines.append(f"     ({step.note})")
    return lines
