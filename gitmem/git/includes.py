"""A repository's config may include files (``include.path``, ``includeIf.*.path``); a FIFO,
a terminal or ``/proc/kmsg`` never ends, so every command on the store would hang. Before git
reads the config its includes are followed, and a target that is not a regular file
(``/dev/null`` aside) or lies under ``/proc``, ``/sys`` or ``/dev`` is refused by name.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

from gitmem.base.errors import StoreError

MAX_BYTES = 1 << 20
"""How much of one config file is scanned for includes (a config is a few KiB)."""
MAX_SECONDS = 2.0
"""How long reading one config file may take before it is refused (a local one: microseconds)."""
KERNEL_ROOTS = ("/proc", "/sys", "/dev")
"""Where the kernel's files are (some block their reader), ``/dev/null`` and ``/dev/shm`` aside."""

_MAX_DEPTH = 10  # git's own limit on nested includes (config.c, MAX_INCLUDE_DEPTH)

_SECTION = re.compile(r'\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"(?:[^"\\]|\\.)*")?\s*\]')
_PATH_KEY = re.compile(r"\s*path\s*=\s*(.*)", re.IGNORECASE)


def _value(raw: str) -> str:
    """A config value as git reads it: quotes removed, escapes undone, comment cut."""
    out: list[str] = []
    quoted = False
    chars = iter(raw)
    for c in chars:
        if c == '"':
            quoted = not quoted
        elif c == "\\":
            escaped = next(chars, c)
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(escaped, escaped))
        elif c in "#;" and not quoted:
            break
        else:
            out.append(c)
    return "".join(out).strip()


def _include_paths(text: str) -> list[str]:
    """The ``path`` values of the ``[include]``/``[includeIf ...]`` sections in ``text``."""
    found: list[str] = []
    section = ""
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            line = line[header.end() :]
        if section in ("include", "includeif"):
            match = _PATH_KEY.match(line)
            if match:
                found.append(_value(match.group(1)))
    return found


def _blocks(mode: int, target: Path) -> bool:
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return False  # a directory fails to parse at once; it does not block
    try:
        return not target.samefile(os.devnull)
    except OSError:
        return True


def _kernel_file(path: Path) -> str | None:
    """The kernel's folder ``path`` leads to, links followed (:data:`KERNEL_ROOTS`), or None."""
    real = os.path.realpath(path)
    if real == os.devnull or real.startswith("/dev/shm/"):
        return None
    return next((root for root in KERNEL_ROOTS if (real + "/").startswith(root + "/")), None)


def _refuse(config: Path, target: Path, why: str) -> StoreError:
    return StoreError(
        f"{config} includes {target}, which is {why}: git and gitmem would block reading it "
        "as configuration",
        hint=f"remove that include from {config}",
    )


_NOT_REGULAR = "not a regular file (a pipe, device or socket)"


def _read_head(path: Path, limit: int = MAX_BYTES) -> bytes | None:
    """The first ``limit`` bytes of the regular file at ``path``, read without ever blocking
    (within :data:`MAX_SECONDS`); None when there is none to read (git skips it too),
    :class:`StoreError` when it is one that would block a reader."""
    where = _kernel_file(path)
    if where is not None:
        raise StoreError(f"{path} is a file of the kernel's ({where}), not configuration")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            if _blocks(mode, path):
                raise StoreError(f"{path} is {_NOT_REGULAR}")
            return None
        deadline = time.monotonic() + MAX_SECONDS
        chunks: list[bytes] = []
        got = 0
        while got < limit:
            chunk = os.read(fd, min(1 << 16, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if time.monotonic() > deadline:
                raise StoreError(f"{path} took over {MAX_SECONDS:g} s to read")
        return b"".join(chunks)
    except BlockingIOError:
        raise StoreError(f"{path} would block its reader") from None
    except OSError:
        return None
    finally:
        os.close(fd)


def _check_file(config: Path, depth: int) -> None:
    try:
        data = _read_head(config)
    except StoreError as exc:
        raise StoreError(
            f"{exc.message}: git and gitmem would block reading it as configuration",
            hint=f"replace {config} with a regular file",
        ) from None
    if data is None:
        return  # none: nothing is read
    text = data.decode("utf-8", "replace")
    for value in _include_paths(text):
        if not value:
            continue
        home = value == "~" or value.startswith("~/")
        target = Path(value).expanduser() if home else config.parent / value  # absolute: as is
        kernel = _kernel_file(target)
        if kernel is not None:
            raise _refuse(config, target, f"a file of the kernel's ({kernel})")
        try:
            mode = target.stat().st_mode
        except OSError:
            continue  # missing (or unreadable): git and libgit2 skip it
        if _blocks(mode, target):
            raise _refuse(config, target, _NOT_REGULAR)
        if stat.S_ISREG(mode) and depth + 1 < _MAX_DEPTH:
            _check_file(target, depth + 1)


def _read_pointer(path: Path) -> str | None:
    """The first line of a small regular file (``.git`` files, ``commondir``)."""
    try:
        data = _read_head(path, 4096)
    except StoreError:
        return None
    lines = data.decode("utf-8", "replace").splitlines() if data else []
    return lines[0].strip() if lines else None


def config_files(path: str | os.PathLike[str]) -> list[Path]:
    """The config files git and libgit2 read for the repository (or work tree) at ``path``."""
    root = Path(path)
    gitdir = root / ".git" if (root / ".git").is_dir() else root
    pointer = _read_pointer(root / ".git")  # a work tree's .git file (None for a folder)
    if pointer and pointer.startswith("gitdir:"):
        gitdir = root / pointer.removeprefix("gitdir:").strip()
    common = _read_pointer(gitdir / "commondir")
    return [(gitdir / common if common else gitdir) / "config", gitdir / "config.worktree"]


def check(path: str | os.PathLike[str]) -> None:
    """StoreError if the config at ``path``, or a file it includes, would block a reader."""
    for config in config_files(path):
        _check_file(config, 0)
