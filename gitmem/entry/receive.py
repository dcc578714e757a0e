"""The hub's ``pre-receive`` hook: refuse a push gitmem would not write.

For each branch pushed: changed memory files must read as the store reads them and
``gitmem.yaml`` must be valid and loosen no policy (:func:`loosening`); no new object at a
memory path and no commit message may hold a credential or exceed the read bound.
Deletions and tags pass. The hub's configuration is the administrator's: git runs trusted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitmem.base.errors import GitmemError
from gitmem.format.layout import CONFIG_FILE, id_from_path
from gitmem.git.command import cat_blobs, run_git
from gitmem.git.localconfig import read_limit
from gitmem.git.objects import OVER_READ_LIMIT

if TYPE_CHECKING:
    from gitmem.entry.jobs import Out
    from gitmem.format.secrets import SecretPolicy

ZERO = "0" * 40


def _git(top: Path, *args: str, input: bytes | None = None) -> bytes:
    # keep_repo_env: the pushed objects are visible only through the quarantine variables.
    return run_git(
        list(args), cwd=top, input=input, trusted=True, keep_repo_env=True, timeout=600
    ).stdout


def _read_blobs(top: Path, specs: Sequence[str]) -> list[bytes | int | None]:
    """The blobs of ``rev:path`` specs (:func:`cat_blobs`): None where there is none, the
    size of one over the store's read bound, unread (the push is refused for it)."""
    return cat_blobs(
        lambda mode, data: _git(top, "cat-file", mode, input=data), specs, read_limit(top)
    )


def _policy(top: Path, tip: str) -> SecretPolicy:
    """The credential policy the push is scanned with: the patterns of the gitmem.yaml it
    pushes (nothing it would loosen: :func:`loosening` refuses that) and the hub's own
    settings (its entry under ``stores`` in the local configuration of the hook's user)."""
    from gitmem.format import config, secrets
    from gitmem.format.yamlio import load_yaml
    from gitmem.git import localconfig

    [blob] = _read_blobs(top, [f"{tip}:{CONFIG_FILE}"])
    data: Any = None
    if isinstance(blob, bytes):
        with contextlib.suppress(GitmemError):
            data, _ = load_yaml(blob.decode("utf-8", "replace"))
    pushed = config.StoreConfig(raw=dict(data) if isinstance(data, dict) else {})
    with config.collecting_loosened():
        return secrets.policy_from_config(localconfig.with_store_settings(pushed, top).raw)


def read_every_section(raw: Mapping[str, Any]) -> None:
    """Read every section of a gitmem.yaml mapping the way a store does: the one list of
    gitmem.yaml's readers besides StoreConfig (tests/test_policy.py walks every key they
    read). Raises what a malformed section raises in a store."""
    from gitmem.entry.jobs import DEFAULT_JOBS, jobs_for
    from gitmem.features.lifecycle import quality, rules, staleness
    from gitmem.format import secrets

    secrets.policy_from_config(raw)
    staleness.StalenessPolicy.from_config(raw)
    quality.QualityPolicy.from_config(raw)
    rules.size_limits_from_config(raw)
    registry = rules.registry_from_config(raw)
    pruned = rules.lifecycle_section(raw, "prune")
    for file_type in sorted({*registry.file_types(), *map(str, pruned)}):
        registry.options_for(file_type, raw)
    for hook in DEFAULT_JOBS:
        jobs_for(hook, raw)


def loosening(text: str) -> list[str]:
    """What a gitmem.yaml text would loosen, one line each (none: it only tightens): what
    each of its readers would ignore with a warning in a store (format.config.loosened)."""
    from gitmem.format import config

    with config.collecting_loosened() as found:
        read_every_section(config.StoreConfig.from_text(text).with_local({}, "").raw)
    return found


def _check_ref(top: Path, old: str, new: str, ref: str) -> list[str]:
    from gitmem.format import memfile, secrets
    from gitmem.format.config import StoreConfig

    problems: list[str] = []
    configs: list[bytes] = []  # each gitmem.yaml the push brings: none may loosen policy
    policy = _policy(top, new)
    # What the tip changes must read as the store reads it.
    command, *trees = (
        ["ls-tree", new] if old == ZERO else ["diff-tree", "--diff-filter=AMR", old, new]
    )
    raw = _git(top, command, "-r", "-z", "--name-only", *trees).split(b"\0")
    changed = [path.decode("utf-8", "surrogateescape") for path in raw if path]
    paths = [p for p in changed if id_from_path(p) is not None or p == CONFIG_FILE]
    for path, data in zip(paths, _read_blobs(top, [f"{new}:{p}" for p in paths]), strict=True):
        if data is None:
            continue
        if isinstance(data, int):
            problems.append(f"{ref}: {path}: {data} bytes, {OVER_READ_LIMIT} of {read_limit(top)}")
            continue
        try:
            if path == CONFIG_FILE:
                # A newer format than this hub's gitmem knows: it cannot check it.
                StoreConfig.from_text(data.decode("utf-8")).check_supported(CONFIG_FILE)
                configs.append(data)
            else:
                memfile.decode(data, path)
        except (GitmemError, UnicodeDecodeError, ValueError) as exc:
            problems.append(f"{ref}: {path}: {' '.join(str(exc).split())}")
    # Credentials anywhere the push adds to history: new blobs at memory paths, messages.
    listed = _git(top, "rev-list", "--objects", new, "--not", "--all").decode(
        "utf-8", "surrogateescape"
    )
    objects = (line.partition(" ") for line in listed.splitlines())
    blobs = [(o, p) for o, _, p in objects if id_from_path(p) is not None or p == CONFIG_FILE]
    for (oid, path), data in zip(blobs, _read_blobs(top, [o for o, _ in blobs]), strict=True):
        if isinstance(data, int):
            problems.append(f"{ref}: {path} (blob {oid[:10]}): {data} bytes, {OVER_READ_LIMIT}")
            continue
        if path == CONFIG_FILE and data is not None:
            configs.append(data)
        found = secrets.scan_memory_bytes(data, policy) if data is not None else []
        if found:
            kinds = ", ".join(sorted({f.kind for f in found}))
            problems.append(f"{ref}: {path} (blob {oid[:10]}) holds a credential ({kinds})")
    for pushed in dict.fromkeys(configs):
        try:
            problems += [f"{ref}: {line}" for line in loosening(pushed.decode("utf-8"))]
        except (GitmemError, UnicodeDecodeError) as exc:
            problems.append(f"{ref}: {CONFIG_FILE}: {' '.join(str(exc).split())}")
    for commit in _git(top, "rev-list", new, "--not", "--all").decode().split():
        message = _git(top, "cat-file", "commit", commit).decode("utf-8", "replace")
        findings = policy.scan(message.partition("\n\n")[2])
        if findings:
            kinds = ", ".join(sorted({f.kind for f in findings}))
            problems.append(f"{ref}: commit {commit[:10]}'s message holds a credential ({kinds})")
    return problems


def pre_receive(top: Path, lines: Iterable[str], out: Out) -> int:
    """Check each pushed ``<old> <new> <ref>`` line; 1 (refuse the push) on any problem."""
    problems: list[str] = []
    for line in lines:
        parts = line.split()
        if len(parts) != 3:
            continue
        old, new, ref = parts
        if new == ZERO or not ref.startswith("refs/heads/"):
            continue  # a deletion, a tag: nothing to read
        try:
            problems += _check_ref(top, old, new, ref)
        except GitmemError as exc:
            problems.append(f"{ref}: cannot be checked: {exc}")
    for problem in problems:
        out(f"gitmem: refused: {problem}")
    if problems:
        out("gitmem: the push was refused; fix the memories (gitmem validate, gitmem secrets)")
        return 1
    return 0
