"""The prune rules of the layered documents by file type, and their size limits. Rules come
from gitmem, installed entry points or the user's own configuration; the committed gitmem.yaml
only chooses among them (whoever can push must not run code on every clone).
"""

from __future__ import annotations

import datetime as dt
import functools
import pkgutil
import re
from collections.abc import Mapping
from typing import Any

from gitmem.base import logs
from gitmem.base.errors import InvalidInputError
from gitmem.features.lifecycle.prune import (
    REVIEW_ARCHIVE,
    LifecycleConfigError,
    PruneRule,
    RuleContext,
    RuleFunction,
    RuleResult,
    prune_common_patterns,
    prune_known_issues,
    prune_review_history,
    prune_test_results_history,
    whole_number,
)
from gitmem.format.config import committed_limit, local_part, loosened
from gitmem.format.schema import is_number

log = logs.get("gitmem")

_FILE_TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check_file_type(file_type: str) -> str:
    if not isinstance(file_type, str) or not _FILE_TYPE_RE.match(file_type):
        raise InvalidInputError(
            f"file type {file_type!r} is not a plain name (letters, digits, '.', '_', '-')"
        )
    return file_type


class RuleRegistry(dict[str, PruneRule]):
    """File type -> :class:`PruneRule`."""

    def register(self, file_type: str, rule: PruneRule | RuleFunction) -> None:
        """Add or replace the rule of ``file_type`` (a plain callable: no defaults, no
        archive); the archive's file type is checked as any file type."""
        if not callable(rule):
            raise InvalidInputError(f"a prune rule must be callable, not {type(rule).__name__}")
        rule = rule if isinstance(rule, PruneRule) else PruneRule(rule)
        if rule.archive is not None:
            _check_file_type(rule.archive)
        self[_check_file_type(file_type)] = rule

    def file_types(self) -> list[str]:
        return sorted(self)

    def options_for(self, file_type: str, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """The rule's defaults overridden by ``lifecycle.prune.<file_type>``: committed, only
        lowering a number; the user's own settings as given; unknown keys refused."""
        rule = self.get(file_type)
        defaults = dict(rule.defaults) if rule is not None else {}
        merged = dict(defaults)
        committed = lifecycle_section(config, "prune").get(file_type)
        local = local_part(config, "lifecycle", "prune", file_type)
        for raw, trusted in ((committed, False), (local, True)):
            if raw is None:
                continue
            if not isinstance(raw, Mapping):
                raise LifecycleConfigError(
                    f"gitmem.yaml lifecycle.prune.{file_type} must be a mapping"
                )
            for key, value in raw.items():
                name = f"lifecycle.prune.{file_type}.{key}"
                if defaults and key not in defaults:
                    known = ", ".join(sorted(defaults))
                    raise LifecycleConfigError(
                        f"gitmem.yaml {name}: unknown option (known: {known})"
                    )
                if key in defaults and not _same_kind(defaults[key], value):
                    kind = type(defaults[key]).__name__
                    raise LifecycleConfigError(
                        f"gitmem.yaml {name} must be a {kind}, not {value!r}"
                    )
                if trusted:
                    merged[key] = value
                elif key in defaults and is_number(defaults[key]):
                    merged[key] = committed_limit(config, name, value, defaults[key])
                else:
                    loosened(config, name, "sets an option gitmem cannot tell is stricter")
        return merged


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def lifecycle_section(config: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    """``lifecycle.<key>`` of a raw gitmem.yaml mapping ({} when absent)."""
    lifecycle: Any = (config or {}).get("lifecycle")
    if lifecycle is None:
        return {}
    if not isinstance(lifecycle, Mapping):
        raise LifecycleConfigError("gitmem.yaml 'lifecycle' must be a mapping")
    section: Any = lifecycle.get(key)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise LifecycleConfigError(f"gitmem.yaml lifecycle.{key} must be a mapping")
    return section


def lifecycle_settings(
    config: Mapping[str, Any] | None,
    key: str,
    defaults: Mapping[str, Any],
    higher_is_tighter: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """``lifecycle.<key>`` over ``defaults``: committed values only on the strict side of
    them, the user's own settings as given; an unknown option is refused."""
    section = lifecycle_section(config, key)
    local = local_part(config, "lifecycle", key)
    unknown = sorted(str(k) for k in (*section, *local) if k not in defaults)
    if unknown:
        raise LifecycleConfigError(
            f"gitmem.yaml lifecycle.{key}.{unknown[0]}: unknown option "
            f"(known: {', '.join(sorted(defaults))})"
        )
    committed = {
        str(k): committed_limit(
            config, f"lifecycle.{key}.{k}", v, defaults[k], higher_is_tighter=k in higher_is_tighter
        )
        for k, v in section.items()
    }
    return {**defaults, **committed, **{str(k): v for k, v in local.items()}}


def load_callable(spec: str, what: str = "prune rule") -> Any:
    """The callable named ``"package.module:attribute"``; ``what`` names it in errors."""
    module_name, sep, attr = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not sep or not module_name or not attr:
        raise LifecycleConfigError(f"{what} {spec!r} must be written 'package.module:function'")
    try:
        target = pkgutil.resolve_name(spec)
    except (ImportError, AttributeError, ValueError) as exc:
        raise LifecycleConfigError(f"{what} {spec!r}: {exc}") from exc
    if not callable(target):
        raise LifecycleConfigError(f"{what} {spec!r} is not callable")
    return target


DEFAULT_REGISTRY = RuleRegistry(
    {
        "review_history": PruneRule(prune_review_history, {"max_reviews": 10}, REVIEW_ARCHIVE),
        "known_issues": PruneRule(
            prune_known_issues, {"remove_resolved_after_days": 30, "verify_status_after_days": 90}
        ),
        "test_results_history": PruneRule(prune_test_results_history, {"max_sessions": 15}),
        "common_patterns": PruneRule(prune_common_patterns, {"verify_every_writes": 5}),
    }
)


ENTRY_POINT_GROUP = "gitmem.rules"


@functools.cache
def _warn_once(message: str) -> None:
    log.warning("%s", message)


def _install_rules(registry: RuleRegistry) -> None:
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            registry.register(point.name, point.load())
        except Exception as exc:  # one broken plugin must not stop every prune
            _warn_once(f"installed prune rule {point.name!r} ({point.value}) not loaded: {exc}")


def _committed_rule(
    registry: RuleRegistry, file_type: str, spec: Any, config: Mapping[str, Any] | None
) -> None:
    if spec is None or spec is False:
        if registry.get(file_type) is not None:
            loosened(
                config,
                f"lifecycle.rules.{file_type}",
                "switches a prune rule off",
                local_key=f"rules: {{{file_type}: null}}",
            )
        return
    if not isinstance(spec, str):
        raise LifecycleConfigError(
            f"gitmem.yaml lifecycle.rules.{file_type} must be the name of a rule or null"
        )
    if ":" in spec or ("." in spec and registry.get(spec) is None):
        from gitmem.git import localconfig

        _warn_once(
            f"gitmem.yaml lifecycle.rules.{file_type} names Python code ({spec!r}); gitmem "
            "never imports code a store names, so it is ignored. To run it, opt in on this "
            f"machine: add 'rules: {{{file_type}: \"{spec}\"}}' to "
            f"{localconfig.config_path()} (or install it as a '{ENTRY_POINT_GROUP}' entry point)"
        )
        return
    rule = registry.get(spec)
    if rule is None:
        raise LifecycleConfigError(
            f"gitmem.yaml lifecycle.rules.{file_type}: no rule named {spec!r} "
            f"(known: {', '.join(registry.file_types())})"
        )
    current = registry.get(file_type)
    if current is not None and current is not rule:
        loosened(
            config,
            f"lifecycle.rules.{file_type}",
            f"replaces its prune rule by {spec}'s",
            local_key=f"rules: {{{file_type}: {spec}}}",
        )
        return
    registry.register(file_type, rule)


def registry_from_config(
    config: Mapping[str, Any] | None, *, gitdir: str | None = None
) -> RuleRegistry:
    """:data:`DEFAULT_REGISTRY` plus the installed rules, ``lifecycle.rules`` of gitmem.yaml
    (only naming an existing rule for a type without one) and the user's own ``rules``."""
    from gitmem.git import localconfig

    registry = RuleRegistry(DEFAULT_REGISTRY)
    _install_rules(registry)
    for file_type, spec in lifecycle_section(config, "rules").items():
        _committed_rule(registry, _check_file_type(str(file_type)), spec, config)
    local = localconfig.load_cached().section("rules", gitdir=gitdir) or {}
    if not isinstance(local, Mapping):
        raise LifecycleConfigError(
            f"{localconfig.config_path()}: 'rules' must map file types to 'module:function'"
        )
    for name, spec in local.items():
        file_type = _check_file_type(str(name))
        if spec is None or spec is False:
            registry.pop(file_type, None)
        elif isinstance(spec, str):  # a rule's name, else the Python code to run
            named = registry.get(spec) if ":" not in spec else None
            registry.register(file_type, named if named is not None else load_callable(spec))
        else:
            raise LifecycleConfigError(
                f"rules.{file_type} in your gitmem configuration must be "
                "'package.module:function' or null"
            )
    return registry


def apply_rule(
    file_type: str,
    body: str,
    *,
    today: dt.date,
    write_count: int = 0,
    archive_text: str | None = None,
    config: Mapping[str, Any] | None = None,
    registry: RuleRegistry | None = None,
) -> RuleResult:
    """Run the rule of ``file_type`` with options from ``config`` (raw gitmem.yaml)."""
    reg = registry if registry is not None else registry_from_config(config)
    rule = reg.get(file_type)
    if rule is None:
        return RuleResult(body)
    ctx = RuleContext(
        file_type=file_type,
        body=body,
        today=today.date() if isinstance(today, dt.datetime) else today,
        write_count=write_count,
        options=reg.options_for(file_type, config),
        archive_text=archive_text if rule.archive else None,
        archive_name=rule.archive,
    )
    result = rule.apply(ctx)
    if not isinstance(result, RuleResult):
        raise LifecycleConfigError(
            f"the prune rule of {file_type} returned {type(result).__name__}, not a RuleResult"
        )
    if result.archive_text is not None and rule.archive is None:
        raise LifecycleConfigError(
            f"the prune rule of {file_type} wrote an archive but declares none"
        )
    return result


DEFAULT_SIZE_LIMITS: Mapping[str, int] = {
    "default": 500,
    "project_overview": 200,
    "review_history": 300,
}


def size_limits_from_config(config: Mapping[str, Any] | None) -> dict[str, int]:
    """``DEFAULT_SIZE_LIMITS`` overridden by ``lifecycle.size_limits`` (committed: lower only)."""
    limits = dict(DEFAULT_SIZE_LIMITS)
    local = local_part(config, "lifecycle", "size_limits")
    for section, trusted in ((lifecycle_section(config, "size_limits"), False), (local, True)):
        for key, value in section.items():
            whole_number(value, f"lifecycle.size_limits.{key}", 1)
            if not trusted:
                built_in = DEFAULT_SIZE_LIMITS.get(str(key), DEFAULT_SIZE_LIMITS["default"])
                value = committed_limit(config, f"lifecycle.size_limits.{key}", value, built_in)
            limits[str(key)] = value
    return limits


def size_warning(file_type: str, line_count: int, limits: Mapping[str, int]) -> str | None:
    """A warning (never an error) for a document over its type's line limit, else ``default``'s
    (``limits`` as :func:`size_limits_from_config` gives them)."""
    if file_type in limits and file_type != "default":
        limit, which = limits[file_type], f"the {file_type} limit"
    else:
        limit, which = limits["default"], "the limit for any file"
    if line_count <= limit:
        return None
    return (
        f"{file_type} has {line_count} lines, more than {which} of {limit}; "
        "consider pruning or splitting it"
    )
