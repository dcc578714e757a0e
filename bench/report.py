"""The markdown table, and the machine it was measured on."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pygit2

import gitmem
from bench.harness import Config, Row, fmt_value

COLUMNS = (
    "scenario",
    "size",
    "metric",
    "gitmem",
    "baseline (same run)",
    "baseline",
    "gitmem vs baseline",
    "target",
    "runs",
    "notes",
)


def _command_output(*command: str) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError:
        return "unknown"
    return result.stdout.strip() or "unknown"


def machine() -> dict[str, str]:
    """What the figures depend on: cores, Python, git, pygit2 and libgit2, the gitmem commit."""
    repo_dir = Path(gitmem.__file__).resolve().parent.parent
    commit = _command_output("git", "-C", str(repo_dir), "rev-parse", "--short", "HEAD")
    return {
        "cpus": str(os.cpu_count()),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": sys.version.split()[0],
        "git": _command_output("git", "--version").removeprefix("git version "),
        "pygit2": str(getattr(pygit2, "__version__", "unknown")),
        "libgit2": str(pygit2.LIBGIT2_VERSION),
        "gitmem": f"{gitmem.__version__} (commit {commit})",
    }


def store_filesystem(path: str | os.PathLike[str]) -> str:
    """The file system ``path`` is on: its type and device from Linux's mount table (the
    longest mount point above ``path``), and for ext4 whether it has a journal: without one,
    making a file right after many deletions costs up to ~20x. "unknown" elsewhere."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best: tuple[str, str, str] | None = None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 2:
            continue
        point = fields[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(best[0])):
            best = (point, rest[0], rest[1])
    if best is None:
        return "unknown"
    point, kind, source = best
    text = f"{kind} ({source} on {point})"
    if kind == "ext4":
        journal = any(Path("/proc/fs/jbd2").glob(f"{Path(source).name}-*"))
        text += " with a journal" if journal else " **without a journal**"
    return text


def cpu_stall_total() -> float | None:
    """Seconds some task has waited for a CPU since boot (Linux PSI), or None if unknown."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("some "):
                    fields = dict(part.split("=") for part in line.split()[1:])
                    return int(fields["total"]) / 1e6
    except (OSError, KeyError, ValueError):
        return None
    return None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _target(row: Row) -> str:
    if not row.target:
        return ""
    if row.met is None:
        return row.target
    return f"{row.target}: {'met' if row.met else '**missed**'}"


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if c in {"gitmem", "baseline", "runs"} else "---" for c in COLUMNS)
        + "|",
    ]
    for row in rows:
        cells = [
            row.scenario,
            row.size,
            row.metric,
            fmt_value(row.value),
            row.baseline or "—",
            fmt_value(row.baseline_value) if row.baseline_value is not None else "—",
            row.ratio_text(),
            _target(row),
            str(row.runs) if row.runs else "—",
            row.note,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def document(
    rows: Sequence[Row],
    config: Config,
    command: str,
    seconds: float,
    load: tuple[float, float] = (0.0, 0.0),
    cpu_stall: float | None = None,
) -> str:
    info = machine()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            f"## gitmem benchmarks: {config.mode}",
            "",
            f"- command: `{command}` ({seconds:.0f} s, {when})",
            f"- machine: {info['cpus']} CPUs, {info['platform']}; Python {info['python']}, "
            f"git {info['git']}, pygit2 {info['pygit2']} (libgit2 {info['libgit2']}), "
            f"gitmem {info['gitmem']}",
            f"- scratch stores on: {store_filesystem(config.workdir or tempfile.gettempdir())}",
            f"- machine load: 1-minute load average {load[0]:.2f} at the start, {load[1]:.2f} "
            "at the end"
            + (
                f"; some task was waiting for a CPU {100 * cpu_stall:.0f}% of the run "
                "(Linux PSI)"
                if cpu_stall is not None
                else ""
            )
            + ". Other work on the machine slows every wall-clock figure; the CPU-time "
            "figures in the notes move much less",
            f"- each figure is the median of `runs` timed runs after {config.warmup} warm-up "
            "operation(s), alternating with its baseline run by run; the ratio says how many "
            "times faster gitmem is (sizes: bytes over the raw file bytes)",
            "",
            table(rows),
            "",
        ]
    )
