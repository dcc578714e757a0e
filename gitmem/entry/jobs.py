"""Lifecycle jobs the memory repository's git hooks run after a merge or checkout.

``lifecycle.jobs`` in gitmem.yaml names them per hook; it may add jobs, never drop a
default, and never names code: jobs come from :func:`register_job`, ``gitmem.jobs`` entry
points or the user's own configuration. A job never raises into the hook.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gitmem.base.errors import InvalidMemoryError

if TYPE_CHECKING:
    from gitmem.store.core import Store

Out = Callable[[str], None]
Job = Callable[["Store", Out], None]

DEFAULT_JOBS: Mapping[str, tuple[str, ...]] = {
    "post-merge": ("staleness",),
    "post-checkout": (),
}


def _staleness(store: Store, out: Out) -> None:
    from gitmem.features.lifecycle.staleness import store_staleness

    report = store_staleness(store)
    out(
        f"gitmem: staleness: {len(report.fresh)} fresh, {len(report.aging)} aging, "
        f"{len(report.stale)} stale"
    )


def _prune(store: Store, out: Out, *, dry_run: bool = False) -> None:
    from gitmem.features.layered import LayeredStore, PrunePolicy

    report = LayeredStore(store, agent="gitmem-hook").prune(PrunePolicy(dry_run=dry_run))
    verb = "would prune" if dry_run else "pruned"
    where = f" (commit {report.commit[:10]})" if report.commit else ""
    out(f"gitmem: prune: {verb} {len(report.pruned)} section(s){where}")
    for item in report.pruned:
        out(f"gitmem:   {item.action}: {item.id}: {item.reason}")
    for warning in report.warnings:
        out(f"gitmem: size: {warning}")


def _validate(store: Store, out: Out) -> None:
    from gitmem.features.layered import LayeredStore

    results = LayeredStore(store).validate_all()
    flagged = [r for r in results if r["suggestions"]]
    out(f"gitmem: validate: {len(flagged)} of {len(results)} document(s) have suggestions")


_JOBS: dict[str, Job] = {
    "staleness": _staleness,
    "prune": _prune,
    "prune-dry-run": lambda store, out: _prune(store, out, dry_run=True),
    "validate": _validate,
}


def register_job(name: str, job: Job) -> None:
    """Add (or replace) a job that ``lifecycle.jobs`` in gitmem.yaml can name."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise InvalidMemoryError(f"job name {name!r} must be letters, digits, '-' and '_'")
    _JOBS[name] = job


def available_jobs(gitdir: str | None = None) -> dict[str, Job | str]:
    """Every job a hook may run: built-in, installed (entry points), then the user's own
    (``jobs`` in the local configuration). A job that failed to load maps to the reason."""
    from importlib.metadata import entry_points

    from gitmem.features.lifecycle.rules import load_callable
    from gitmem.git import localconfig

    jobs: dict[str, Job | str] = dict(_JOBS)
    for point in entry_points(group="gitmem.jobs"):
        try:
            jobs[point.name] = point.load()
        except Exception as exc:  # one broken plugin must not stop the other jobs
            jobs[point.name] = f"installed job {point.value} not loaded: {exc}"
    local = localconfig.load_cached().section("jobs", gitdir=gitdir)
    if isinstance(local, Mapping):
        for name, spec in local.items():
            try:
                jobs[str(name)] = load_callable(str(spec), "job")
            except Exception as exc:
                jobs[str(name)] = f"{localconfig.config_path()}: job {spec!r}: {exc}"
    elif local is not None:
        raise InvalidMemoryError(f"{localconfig.config_path()}: 'jobs' must be a mapping")
    return jobs


def jobs_for(hook: str, config: Mapping[str, Any] | None) -> list[str]:
    """The job names configured for ``hook``: the defaults and the jobs gitmem.yaml adds
    (leaving a default out is ignored with one warning); the user's own settings for the
    store (``lifecycle.jobs.<hook>``) give the whole list."""
    from gitmem.format.config import local_part, loosened

    defaults = list(DEFAULT_JOBS.get(hook, ()))
    local = local_part(config, "lifecycle", "jobs")
    lifecycle = (config or {}).get("lifecycle") or {}
    if not isinstance(lifecycle, Mapping):
        raise InvalidMemoryError("gitmem.yaml 'lifecycle' must be a mapping")
    own = hook in local  # the user's own list for the store: the whole list
    jobs, where = (
        (local, "your gitmem configuration's") if own else (lifecycle.get("jobs"), "gitmem.yaml")
    )
    if jobs is None:
        return defaults
    if not isinstance(jobs, Mapping):
        raise InvalidMemoryError(f"{where} lifecycle.jobs must map hook names to job lists")
    names = jobs.get(hook, defaults)
    if names is None:
        names = []
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise InvalidMemoryError(f"{where} lifecycle.jobs.{hook} must be a list of job names")
    if own:
        return list(names)
    dropped = [name for name in defaults if name not in names]
    if dropped:
        loosened(config, f"lifecycle.jobs.{hook}", f"leaves out {', '.join(dropped)}")
    return dropped + list(names)


def run_jobs(store: Store, hook: str, out: Out) -> list[str]:
    """Run the jobs configured for ``hook``; returns the names that ran. An unknown name
    or a failing job becomes one warning line and the next job still runs."""
    ran: list[str] = []
    try:
        names = jobs_for(hook, store.config().raw)
        jobs = available_jobs(str(store.db().gitdir))
    except InvalidMemoryError as exc:
        out(f"gitmem: warning: {exc}")
        return ran
    for name in names:
        job = jobs.get(name)
        if job is None:
            known = ", ".join(sorted(jobs))
            hint = ""
            if ":" in name:
                from gitmem.git import localconfig

                hint = (
                    "; gitmem never imports code a store names: to run it, add "
                    f"'jobs: {{<name>: \"{name}\"}}' to {localconfig.config_path()} "
                    "and name <name> here"
                )
            out(f"gitmem: warning: unknown lifecycle job {name!r} (known: {known}){hint}")
            continue
        if isinstance(job, str):
            out(f"gitmem: warning: lifecycle job {name}: {job}")
            continue
        try:
            job(store, out)
        except Exception as exc:  # a job must never turn a finished merge into a failure
            message = " ".join(str(exc).split()) or type(exc).__name__
            out(f"gitmem: warning: lifecycle job {name}: {message}")
            continue
        ran.append(name)
    return ran
