"""A store's committed gitmem.yaml only tightens policy (docs/security.md).

Whoever can push to a store writes its gitmem.yaml. It may add secret patterns, lower
limits and add rules; a value that would allow a credential, raise a limit or switch a
check off is ignored with one warning in every clone, and the hub's pre-receive hook
refuses the push that brings it. The user's own configuration (``GITMEM_CONFIG``, a
section per store) may loosen. Real stores, a real hub and real pushes.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_git

import gitmem
from gitmem import Store
from gitmem.entry.jobs import DEFAULT_JOBS, jobs_for
from gitmem.entry.receive import read_every_section
from gitmem.features.lifecycle.quality import QualityPolicy
from gitmem.features.lifecycle.rules import (
    DEFAULT_REGISTRY,
    DEFAULT_SIZE_LIMITS,
    registry_from_config,
    size_limits_from_config,
)
from gitmem.features.lifecycle.staleness import StalenessPolicy
from gitmem.format import secrets
from gitmem.format.config import (
    DEFAULT_MAX_BODY_BYTES,
    FORMAT,
    StoreConfig,
    collecting_loosened,
)
from gitmem.format.model import Scope

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dBjftJeZ4CVPmB92K27uhbUJU1p1rwW"
ACME = "acme_" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2"


def _finds(config: StoreConfig, text: str) -> bool:
    return bool(secrets.policy_from_config(config.raw).scan(text))


def _staleness(name: str) -> Callable[[StoreConfig], Any]:
    return lambda c: getattr(StalenessPolicy.from_config(c.raw), name)


def _quality(name: str) -> Callable[[StoreConfig], Any]:
    return lambda c: getattr(QualityPolicy.from_config(c.raw), name)


def _size(file_type: str) -> Callable[[StoreConfig], Any]:
    return lambda c: size_limits_from_config(c.raw).get(
        file_type, size_limits_from_config(c.raw)["default"]
    )


def _option(file_type: str, name: str) -> Callable[[StoreConfig], Any]:
    return lambda c: registry_from_config(c.raw).options_for(file_type, c.raw).get(name)


def _rule(file_type: str) -> Callable[[StoreConfig], Any]:
    """Which built-in rule prunes ``file_type`` (None: no rule)."""

    def read(config: StoreConfig) -> str | None:
        rule = registry_from_config(config.raw).get(file_type)
        names = DEFAULT_REGISTRY.file_types()
        return next((n for n in names if DEFAULT_REGISTRY.get(n) is rule), None)

    return read


def _jobs(hook: str) -> Callable[[StoreConfig], Any]:
    return lambda c: jobs_for(hook, c.raw)


@dataclasses.dataclass(frozen=True)
class Key:
    """A key gitmem reads from gitmem.yaml: a value of it that would loosen policy (None
    when there is none: it can only tighten), one that tightens (None when there is
    none), and what a store makes of the file (``read``)."""

    key: str
    path: str  # where the values go (``<type>`` spelled as a file type)
    loosen: Any
    tighten: Any
    read: Callable[[StoreConfig], Any]

    def config(self, value: Any) -> dict[str, Any]:
        out: Any = value
        for part in reversed(self.path.split(".")):
            out = {part: out}
        return dict(out)


NONE = object()
"""A value no key takes: this key has no loosening (or tightening) value."""

KEYS = [
    Key("format", "format", NONE, NONE, lambda c: c.format),
    Key("scope", "scope", NONE, NONE, lambda c: c.scope),
    Key("limits.max_body_bytes", "limits.max_body_bytes", 2 * DEFAULT_MAX_BODY_BYTES, 4096,
        lambda c: c.max_body_bytes),
    Key("secrets.patterns", "secrets.patterns", NONE,
        [{"kind": "acme-token", "regex": "acme_[A-Za-z0-9]{32}"}], lambda c: _finds(c, ACME)),
    Key("secrets.allow", "secrets.allow", [".*"], NONE, lambda c: _finds(c, TOKEN)),
    Key("secrets.disable", "secrets.disable", ["jwt", "github-token"], NONE,
        lambda c: _finds(c, f"{JWT} {TOKEN}")),
    Key("lifecycle.staleness.fresh_days", "lifecycle.staleness.fresh_days", 31, 7,
        _staleness("fresh_days")),
    Key("lifecycle.staleness.aging_days", "lifecycle.staleness.aging_days", 91, 60,
        _staleness("aging_days")),
    Key("lifecycle.quality.max_unspecific_ratio", "lifecycle.quality.max_unspecific_ratio",
        0.9, 0.1, _quality("max_unspecific_ratio")),
    Key("lifecycle.quality.growth_window", "lifecycle.quality.growth_window", 6, 3,
        _quality("growth_window")),
    Key("lifecycle.quality.accuracy_every_writes", "lifecycle.quality.accuracy_every_writes",
        6, 2, _quality("accuracy_every_writes")),
    Key("lifecycle.quality.accuracy_claims", "lifecycle.quality.accuracy_claims", 2, 5,
        _quality("accuracy_claims")),
    Key("lifecycle.size_limits.default", "lifecycle.size_limits.default", 501, 400,
        _size("default")),
    Key("lifecycle.size_limits.project_overview", "lifecycle.size_limits.project_overview",
        201, 150, _size("project_overview")),
    Key("lifecycle.size_limits.review_history", "lifecycle.size_limits.review_history",
        301, 250, _size("review_history")),
    Key("lifecycle.size_limits.<type>", "lifecycle.size_limits.decisions", 501, 100,
        _size("decisions")),
    Key("lifecycle.prune.review_history.max_reviews",
        "lifecycle.prune.review_history.max_reviews", 11, 5,
        _option("review_history", "max_reviews")),
    Key("lifecycle.prune.known_issues.remove_resolved_after_days",
        "lifecycle.prune.known_issues.remove_resolved_after_days", 31, 7,
        _option("known_issues", "remove_resolved_after_days")),
    Key("lifecycle.prune.known_issues.verify_status_after_days",
        "lifecycle.prune.known_issues.verify_status_after_days", 91, 30,
        _option("known_issues", "verify_status_after_days")),
    Key("lifecycle.prune.test_results_history.max_sessions",
        "lifecycle.prune.test_results_history.max_sessions", 16, 5,
        _option("test_results_history", "max_sessions")),
    Key("lifecycle.prune.common_patterns.verify_every_writes",
        "lifecycle.prune.common_patterns.verify_every_writes", 6, 2,
        _option("common_patterns", "verify_every_writes")),
    # An option of a rule gitmem does not know here: which way it loosens is unknown.
    Key("lifecycle.prune.<type>.<option>", "lifecycle.prune.decisions.level", 1, NONE,
        _option("decisions", "level")),
    # A rule switched off, a rule replaced by another, a rule given to a type without one.
    Key("lifecycle.rules.<type>", "lifecycle.rules.review_history", None, NONE,
        _rule("review_history")),
    Key("lifecycle.rules.<type>", "lifecycle.rules.known_issues", "common_patterns", NONE,
        _rule("known_issues")),
    Key("lifecycle.rules.<type>", "lifecycle.rules.decisions", NONE, "known_issues",
        _rule("decisions")),
    Key("lifecycle.jobs.post-merge", "lifecycle.jobs.post-merge", [], ["staleness", "prune"],
        _jobs("post-merge")),
    Key("lifecycle.jobs.post-checkout", "lifecycle.jobs.post-checkout", NONE, ["validate"],
        _jobs("post-checkout")),
]


def test_the_walk_names_every_key_gitmem_reads() -> None:
    """Every key of the code's own defaults is walked, and nothing the readers of
    gitmem.yaml look up is missing from the walk (a new key must be added here, with its
    loosening and tightening values)."""
    walked = {k.key for k in KEYS}
    expected = {"format", "scope", "limits.max_body_bytes"}
    expected |= {f"secrets.{k}" for k in ("patterns", "allow", "disable")}
    expected |= {f"lifecycle.staleness.{f.name}" for f in dataclasses.fields(StalenessPolicy)}
    expected |= {f"lifecycle.quality.{f.name}" for f in dataclasses.fields(QualityPolicy)}
    expected |= {f"lifecycle.size_limits.{k}" for k in DEFAULT_SIZE_LIMITS}
    expected |= {"lifecycle.size_limits.<type>", "lifecycle.rules.<type>"}
    expected |= {"lifecycle.prune.<type>.<option>"}
    expected |= {
        f"lifecycle.prune.{t}.{o}"
        for t in DEFAULT_REGISTRY.file_types()
        for o in DEFAULT_REGISTRY.get(t).defaults  # type: ignore[union-attr]
    }
    expected |= {f"lifecycle.jobs.{hook}" for hook in DEFAULT_JOBS}
    assert walked == expected
    # What the readers look up, with every walked key present.
    looked_up: set[str] = set()

    class Recording(dict[str, Any]):
        def __init__(self, data: dict[str, Any], at: str = "") -> None:
            super().__init__(data)
            self.at = at

        def _path(self, key: object) -> str:
            path = f"{self.at}.{key}" if self.at else str(key)
            looked_up.add(path)
            return path

        def get(self, key: str, default: Any = None) -> Any:
            path = self._path(key)
            value = super().get(key, default)
            return Recording(value, path) if isinstance(value, dict) else value

        def __getitem__(self, key: str) -> Any:
            return self.get(key) if key in self else super().__getitem__(key)

    everything: dict[str, Any] = {}
    for key in KEYS:
        if key.tighten is not NONE:
            merge(everything, key.config(key.tighten))
    read_every_section(Recording(everything))
    for path in looked_up:
        parts = path.split(".")
        # A file type of the walk's own choosing is spelled <type>.
        if parts[:2] == ["lifecycle", "rules"] and len(parts) > 2:
            parts[2] = "<type>"
        if parts[:2] == ["lifecycle", "size_limits"] and len(parts) > 2:
            parts[2] = parts[2] if parts[2] in DEFAULT_SIZE_LIMITS else "<type>"
        if parts[:2] == ["lifecycle", "prune"] and len(parts) > 2:
            parts[2] = parts[2] if parts[2] in DEFAULT_REGISTRY.file_types() else "<type>"
        spelled = ".".join(parts)
        assert any(k == spelled or k.startswith(spelled + ".") for k in walked), path


def merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


def commit_config(store: Store, extra: dict[str, Any]) -> None:
    path = store.path / "gitmem.yaml"
    data = yaml.safe_load(path.read_text())
    merge(data, extra)
    path.write_text(yaml.safe_dump(data))
    run_git(store.path, "commit", "-q", "--no-verify", "-am", "policy")


def _read(store: Store, key: Key) -> tuple[Any, list[str]]:
    with collecting_loosened() as found:
        value = key.read(gitmem.open(store.path).config())
    return value, found


@pytest.mark.parametrize("key", KEYS, ids=[k.path for k in KEYS])
def test_a_committed_value_only_tightens(
    key: Key, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built_in, none = _read(store, key)
    assert none == []
    if key.tighten is not NONE:
        commit_config(store, key.config(key.tighten))
        value, found = _read(store, key)
        assert value != built_in and found == [], (value, found)
        run_git(store.path, "reset", "-q", "--hard", "HEAD~1")
    if key.loosen is not NONE:
        commit_config(store, key.config(key.loosen))
        value, found = _read(store, key)
        assert value == built_in, value
        assert [f for f in found if f.startswith(f"gitmem.yaml {key.path} ")], found
        # The user's own settings for the store may loosen (prune rules: their own section).
        run_git(store.path, "reset", "-q", "--hard", "HEAD~1")
        if not key.key.startswith("lifecycle.rules."):
            local = tmp_path / "mine.yaml"
            gitdir = str(store.db().gitdir.resolve())
            local.write_text(yaml.safe_dump({"stores": {gitdir: key.config(key.loosen)}}))
            monkeypatch.setenv("GITMEM_CONFIG", str(local))
            value, found = _read(store, key)
            assert value != built_in and found == [], (value, found)
    if key.key in ("format", "scope"):  # structural, not policy: read as committed
        commit_config(store, {"format": FORMAT, "scope": "repo"})
        value, found = _read(store, key)
        assert value in (FORMAT, Scope.REPO) and found == []


# -- the reproduction in a clone (the hub's: tests/test_receive.py) ----------------------------


@pytest.mark.slow
def test_reproduction_a_pushed_allow_list_lets_no_credential_through(tmp_path: Path) -> None:
    """A teammate's gitmem.yaml with ``secrets: {allow: ['.*']}``, synced without a word,
    let the next ``gitmem add`` of a real token through, and ``sync`` pushed it."""
    gitmem.init(tmp_path / "seed").create("a fact")
    run_git(tmp_path, "clone", "-q", "--bare", str(tmp_path / "seed"), "hub.git")
    hub = tmp_path / "hub.git"  # without the hook: it takes the allow-list
    run_git(tmp_path, "clone", "-q", str(hub), "teammate")
    teammate = tmp_path / "teammate"
    with (teammate / "gitmem.yaml").open("a") as fh:
        fh.write("secrets:\n  allow: ['.*']\n")
    run_git(teammate, "commit", "-q", "-am", "tidy the config")
    run_git(teammate, "push", "-q", "origin", "main")
    run_git(tmp_path, "clone", "-q", str(hub), "me")
    me = tmp_path / "me"
    env = {**os.environ, "GITMEM_DIR": str(me)}

    def gm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gitmem", *args], capture_output=True, text=True, env=env
        )

    assert gm("sync").returncode == 0
    added = gm("add", f"deploy with {TOKEN}")
    assert added.returncode == 4, added.stderr
    assert "looks like it holds a secret: github-token" in added.stderr
    warnings = [
        line
        for line in added.stderr.splitlines()
        if line.startswith("gitmem: warning: ") and "secrets.allow" in line
    ]
    assert len(warnings) == 1 and "ignored" in warnings[0] and str(me) in warnings[0]
    assert TOKEN not in added.stderr
    assert gm("sync").returncode == 0
    assert TOKEN not in run_git(hub, "log", "-p", "--all")
    # The user's own allow-list for this store is the way to let it through.
    local = tmp_path / "mine.yaml"
    gitdir = str((me / ".git").resolve())
    local.write_text(yaml.safe_dump({"stores": {gitdir: {"secrets": {"allow": ["^ghp_"]}}}}))
    env["GITMEM_CONFIG"] = str(local)
    assert gm("add", f"deploy with {TOKEN}").returncode == 0
