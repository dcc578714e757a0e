"""The one place gitmem runs the git binary (:func:`run_git`, :func:`popen_git`): without
the variables that point git at another repository, never waiting on a terminal, in English
and, unless the store is trusted (:mod:`gitmem.git.trust`), with every repository setting
that runs a program, writes or sends a file or changes whom git trusts overridden by the
user's own value or a neutral one (docs/security.md; tests/test_trust.py).
"""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from gitmem.base.errors import StoreError
from gitmem.git import includes

REPO_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_QUARANTINE_PATH",
)
"""Variables that point git at some other repository, index or object store."""

# Always set for an untrusted store, whatever its config says.
_ALWAYS: tuple[tuple[str, str], ...] = (
    # Hooks travel with a bare store (/dev/null finds none); the fsmonitor hook runs on
    # every index read; ext:: URLs run a command (a store may allow or rewrite URLs to them).
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("protocol.ext.allow", "never"),
)

# Set for every store, trusted or not: a store has no submodules, and a pushed
# `.gitmodules` must neither stop a fetch (git parses it to recurse) nor run anything.
_NO_SUBMODULES: tuple[tuple[str, str], ...] = (
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
)

# Keys a store may not set for an untrusted store: (pattern over the lower-cased key, the
# value that runs, writes and trusts nothing of the store's choosing; ``None``: worked out
# per key below). First, keys whose value is a program git runs.
_NEUTRAL_KEYS: tuple[tuple[re.Pattern[str], str | None], ...] = tuple(
    (re.compile(pattern, re.DOTALL), neutral)
    for pattern, neutral in (
        (r"core\.sshcommand", None),  # ssh transport
        (r"core\.askpass", None),  # asked for credentials, even with GIT_TERMINAL_PROMPT=0
        (r"core\.editor", ":"),
        (r"sequence\.editor", ":"),
        (r"core\.pager", "cat"),
        (r"pager\..+", "false"),
        (r"core\.alternaterefscommand", "true"),  # fetch asks it for the alternates' tips
        (r"diff\.external", ""),  # empty: no external diff
        (r"diff\..+\.textconv", "cat"),  # cat: the file as it is, as without textconv
        # No value means "use git's own diff": an empty command fails the diff, runs nothing.
        (r"diff\..+\.command", ""),
        (r"merge\..+\.driver", None),
        (r"filter\..+\.(?:clean|smudge|process)", ""),  # empty: no filter runs
        (r"filter\..+\.required", "false"),  # ... and a missing filter is not an error
        (r"gpg\.program", "gpg"),
        (r"gpg\.openpgp\.program", "gpg"),
        (r"gpg\.x509\.program", "gpgsm"),
        (r"gpg\.ssh\.program", "ssh-keygen"),
        (r"gpg\.ssh\.defaultkeycommand", ""),
        # Files git writes (the server's cookies) or presents to a server the store names (a
        # client certificate): the user's own, else none (``http.<url>.*`` too).
        (r"http\.(?:.+\.)?cookiefile", ""),
        (r"http\.(?:.+\.)?savecookies", "false"),
        (r"http\.(?:.+\.)?sslcert", ""),
        (r"http\.(?:.+\.)?sslkey", ""),
        (r"http\.(?:.+\.)?proxysslcert", ""),
        (r"http\.(?:.+\.)?proxysslkey", ""),
        # Keys that change whom git trusts and goes through: a store's author could otherwise
        # turn off certificate checks and route the user's fetches (and credentials) through a
        # proxy they run. Neutral: git's default, or the environment's proxy.
        (r"http\.(?:.+\.)?sslverify", "true"),
        # Empty: an HTTPS fetch fails rather than trust a certificate authority of the store's.
        (r"http\.(?:.+\.)?sslcainfo", ""),
        (r"http\.(?:.+\.)?sslcapath", ""),
        (r"http\.(?:.+\.)?proxysslcainfo", ""),
        (r"http\.(?:.+\.)?sslversion", ""),  # empty: curl's default, no downgrade
        (r"http\.(?:.+\.)?sslcipherlist", ""),  # empty: curl's default ciphers
        (r"http\.(?:.+\.)?delegation", "none"),  # no Kerberos credential delegation
        (r"http\.(?:.+\.)?followredirects", "initial"),  # git's default
        (r"http\.(?:.+\.)?proxy", None),
        (r"remote\..+\.proxy", None),
    )
)
# git keeps the FIRST value of these (remote.c: "more than one uploadpack given, using the
# first"), so no later entry overrides them; the command's own option does.
_PACK_PROGRAMS: dict[str, tuple[re.Pattern[str], str]] = {
    "--upload-pack": (re.compile(r"remote\..+\.uploadpack", re.DOTALL), "git-upload-pack"),
    "--receive-pack": (re.compile(r"remote\..+\.receivepack", re.DOTALL), "git-receive-pack"),
}
_PACK_COMMANDS = {
    "fetch": "--upload-pack",
    "pull": "--upload-pack",
    "ls-remote": "--upload-pack",
    "push": "--receive-pack",
}
# Commands that reach a remote but take no such option: refused while the store names one.
_NO_PACK_OPTION = frozenset({"remote", "submodule", "clone"})
_CREDENTIAL_HELPER = re.compile(r"credential\.(?:.+\.)?helper", re.DOTALL)
_GIT_PROXY = "core.gitproxy"
_LOCAL_SCOPES = frozenset({"local", "worktree"})

# The text merge git does without a driver, for drivers a store names but gitmem does not know.
_TEXT_MERGE = "git merge-file --marker-size=%L %A %O %B"


def gitmem_command(python: str | None = None) -> str:
    """The shell words that start gitmem from git (hooks, the merge driver). ``-P``: no
    work-tree directory on ``sys.path``; not ``-I``, which drops user site-packages."""
    return f"{shlex.quote(python or sys.executable)} -P -m gitmem"


def _append_config(env: dict[str, str], entries: Sequence[tuple[str, str]]) -> None:
    """Add command-line configuration entries after any the environment already has."""
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0") or "0")
    except ValueError:
        count = 0
    for key, value in entries:
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)


def _config_entries(
    env: Mapping[str, str], gitdir: Path | None, cwd: Path | None
) -> list[tuple[str, str, str]]:
    """(scope, key, value) of every configuration entry git reads for the repository."""
    command = ["git", *([f"--git-dir={gitdir}"] if gitdir else [])]
    command += ["config", "--list", "--show-scope", "-z"]
    try:
        result = subprocess.run(
            command, cwd=cwd, env=dict(env), capture_output=True, check=False, timeout=60
        )
    except FileNotFoundError:
        raise StoreError("the git binary is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise StoreError("git config took more than 60 s to list the store's settings") from None
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise StoreError(
            "cannot read the store's git configuration: "
            + (message[-1] if message else f"git config exited with {result.returncode}")
        )
    fields = result.stdout.decode("utf-8", "surrogateescape").split("\0")
    items = (item.partition("\n") for item in fields[1::2])
    return [(scope, key, value) for scope, (key, _, value) in zip(fields[::2], items, strict=False)]


def _neutral(key: str, pattern_value: str | None, env: Mapping[str, str]) -> str:
    lowered = key.lower()
    if pattern_value is not None:
        return pattern_value
    if lowered == "core.sshcommand":
        # What git runs without the setting: $GIT_SSH (a program, no shell words), else ssh.
        ssh = env.get("GIT_SSH")
        return shlex.quote(ssh) if ssh else "ssh"
    if lowered == "core.askpass":
        return env.get("SSH_ASKPASS", "")  # git's next choice without core.askPass
    if lowered.endswith(".proxy"):
        # The environment's, as git takes it with no ``http.proxy`` (one value cannot say
        # both, so the HTTPS one is preferred: hubs are HTTPS), else none.
        names = ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "http_proxy")
        return next((value for name in names if (value := env.get(name))), "")
    if lowered.startswith("merge.") and lowered.endswith(".driver"):
        name = key[len("merge.") : -len(".driver")]
        if name == "gitmem":  # gitmem's own driver, whatever the store says
            return f"{gitmem_command()} merge-driver %O %A %B %P"
        return _TEXT_MERGE
    return ""


def _users_value(key: str, user_values: Mapping[str, str]) -> str | None:
    """The user's own value for ``key``; for ``http.<url>.<name>``, their ``http.<name>``
    when they set no URL-specific one (what git would use without the store's entry)."""
    mine = user_values.get(key)
    if mine is not None:
        return mine
    lowered = key.lower()
    if lowered.startswith("http.") and lowered.count(".") >= 2:
        plain = "http." + lowered.rsplit(".", 1)[1]
        return user_values.get(plain)
    if lowered.startswith("remote.") and lowered.endswith(".proxy"):
        return user_values.get("http.proxy")
    return None


@dataclass
class Policy:
    """What :func:`run_git` adds for an untrusted repository."""

    config: list[tuple[str, str]] = field(default_factory=list)
    """Command-line configuration entries (``GIT_CONFIG_KEY_<n>``/``VALUE_<n>``)."""
    env: dict[str, str] = field(default_factory=dict)
    options: dict[str, str] = field(default_factory=dict)
    """``--upload-pack``/``--receive-pack`` values for the commands that take them."""


def overrides(entries: Sequence[tuple[str, str, str]], env: Mapping[str, str]) -> Policy:
    """What shuts out the program-running settings among ``entries`` (scope, key, value)."""
    policy = Policy(config=list(_ALWAYS))
    user_values: dict[str, str] = {}
    first_user_values: dict[str, str] = {}
    for scope, key, value in entries:
        if scope not in _LOCAL_SCOPES:
            user_values[key] = value  # the last one read wins, as in git
            first_user_values.setdefault(key, value)
    helpers = False
    for key in dict.fromkeys(key for scope, key, _ in entries if scope in _LOCAL_SCOPES):
        lowered = key.lower()
        if _CREDENTIAL_HELPER.fullmatch(lowered):
            helpers = True
            continue
        if lowered == _GIT_PROXY:
            # Several values, the first that matches wins: a later entry cannot override
            # it, but GIT_PROXY_COMMAND (even empty) makes git skip core.gitProxy.
            if "GIT_PROXY_COMMAND" not in env:
                policy.env["GIT_PROXY_COMMAND"] = ""
            continue
        for option, (pattern, default) in _PACK_PROGRAMS.items():
            if pattern.fullmatch(lowered):
                # The store's value is read first (repository files come before the
                # command line), so only the command's option can replace it.
                policy.options[option] = first_user_values.get(key, default)
                break
        else:
            for pattern, neutral in _NEUTRAL_KEYS:
                if pattern.fullmatch(lowered):
                    mine = _users_value(key, user_values)
                    value = mine if mine is not None else _neutral(key, neutral, env)
                    policy.config.append((key, value))
                    break
    if helpers:
        # An empty helper empties the list read so far; then the user's own helpers again,
        # in their order.
        policy.config.append(("credential.helper", ""))
        policy.config += [
            (key, value)
            for scope, key, value in entries
            if scope not in _LOCAL_SCOPES and _CREDENTIAL_HELPER.fullmatch(key.lower())
        ]
    return policy


def _policy(
    gitdir: str | os.PathLike[str] | None,
    cwd: str | os.PathLike[str] | None,
    trusted: bool | None,
    keep_repo_env: bool,
    config: Sequence[tuple[str, str]] = (),
) -> tuple[dict[str, str], Policy]:
    env = {k: v for k, v in os.environ.items() if keep_repo_env or k not in REPO_ENV}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANGUAGE="C")
    # The caller's settings go before the policy's, so that for a key both name (the
    # caller has no reason to) the policy's value, read last, is the one git uses.
    _append_config(env, [*config, *_NO_SUBMODULES])
    from gitmem.git import trust

    # Another user's store the user named or trusted.
    _append_config(env, [("safe.directory", d) for d in trust.safe_directories(gitdir)])
    where = gitdir if gitdir is not None else cwd
    if where is not None:
        # git reads the config (and what it includes) before anything else: an include of
        # a FIFO would block every command, whatever its timeout does afterwards.
        includes.check(where)
    if trusted is None:
        if gitdir is not None:
            trusted = trust.is_trusted(gitdir)
        else:
            trusted = trust.is_trusted_repository_at(cwd if cwd is not None else Path.cwd())
    if trusted:
        return env, Policy()
    git_dir = Path(gitdir) if gitdir is not None else None
    work = Path(cwd) if cwd is not None else None
    policy = overrides(_config_entries(env, git_dir, work), env)
    _append_config(env, policy.config)
    env.update(policy.env)
    return env, policy


def _command(
    args: Sequence[str], gitdir: str | os.PathLike[str] | None, policy: Policy
) -> list[str]:
    name = args[0] if args else ""
    option = _PACK_COMMANDS.get(name)
    pack = [f"{option}={policy.options[option]}"] if option in policy.options else []
    if name in _NO_PACK_OPTION and policy.options:
        raise StoreError(
            f"this store's git config names its own {' and '.join(sorted(policy.options))} "
            f"program; gitmem will not run git {name} on it",
            hint="if you trust the store's author: gitmem trust <store>",
        )
    # --no-pager: output is captured, but a pager named by the store must never start.
    prefix = ["git", "--no-pager", *([f"--git-dir={os.fspath(gitdir)}"] if gitdir else [])]
    return [*prefix, *args[:1], *pack, *args[1:]]


def cat_blobs(
    cat_file: Callable[[str, bytes], bytes], specs: Sequence[str], limit: int
) -> list[bytes | int | None]:
    """The blobs ``specs`` name (ids or ``rev:path``) through ``cat_file(mode, input)``
    (``git cat-file``): bytes, None where there is no blob, or the size of one over ``limit``."""
    if not specs:
        return []
    checked = cat_file("--batch-check", "".join(f"{s}\n" for s in specs).encode())
    lines = checked.decode("utf-8", "replace").splitlines()[: len(specs)]
    sizes = [int(p[2]) if len(p) == 3 and p[1] == "blob" else None for p in map(str.split, lines)]
    wanted = [s for s, n in zip(specs, sizes, strict=True) if n is not None and n <= limit]
    data = cat_file("--batch", "".join(f"{s}\n" for s in wanted).encode()) if wanted else b""
    out: list[bytes | int | None] = []
    pos = 0
    for size in sizes:
        if size is None or size > limit:
            out.append(size)
            continue
        pos = data.index(b"\n", pos) + 1
        out.append(data[pos : pos + size])
        pos += size + 1
    return out


def run_git(
    args: Sequence[str],
    *,
    gitdir: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: bytes | None = None,
    check: bool = True,
    timeout: float | None = None,
    trusted: bool | None = None,
    keep_repo_env: bool = False,
    extra_env: Mapping[str, str] | None = None,
    stderr_lines: Callable[[str], None] | None = None,
    config: Sequence[tuple[str, str]] = (),
    stdout: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git <args>`` on the repository at ``gitdir`` (else the one at ``cwd``);
    ``check``: a non-zero exit raises :class:`StoreError` with git's last line. ``config``:
    as ``git -c``; ``trusted``: None asks :mod:`gitmem.git.trust`; ``keep_repo_env``: for a
    hook; ``stderr_lines`` gets each stderr line as it comes, with its ``\r`` or ``\n``."""
    env, policy = _policy(gitdir, cwd, trusted, keep_repo_env, config)
    if extra_env:
        if any(key in REPO_ENV for key in extra_env):
            raise ValueError("extra_env may not point git at another repository")
        env.update(extra_env)
    command = _command(args, gitdir, policy)
    try:
        if stderr_lines is not None:
            result = _run_streaming(command, cwd, env, timeout, stderr_lines)
        else:
            result = subprocess.run(
                command,
                cwd=cwd,
                input=input,
                stdout=subprocess.PIPE if stdout is None else stdout,
                stderr=subprocess.PIPE,
                env=env,
                check=False,
                timeout=timeout,
            )
            if stdout is not None:
                result.stdout = b""
    except FileNotFoundError:
        raise StoreError("the git binary is not on PATH") from None
    if check and result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        name = args[0] if args else "git"
        raise StoreError(f"git {name} failed: {message[-1] if message else result.returncode}")
    return result


def _run_streaming(
    command: list[str],
    cwd: str | os.PathLike[str] | None,
    env: dict[str, str],
    timeout: float | None,
    stderr_lines: Callable[[str], None],
) -> subprocess.CompletedProcess[bytes]:
    """``subprocess.run`` with captured output, handing each stderr line on as it comes."""
    err: list[str] = []

    def pump(stream: IO[bytes]) -> None:
        # newline="": a line ends at "\r" too (git's progress), and keeps its ending.
        for line in io.TextIOWrapper(stream, "utf-8", "replace", newline=""):
            err.append(line)
            stderr_lines(line)

    with (
        tempfile.TemporaryFile() as out,
        subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, env=env
        ) as proc,
    ):
        reader = threading.Thread(target=pump, args=(proc.stderr,), daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout)
        finally:
            proc.kill()  # after a timeout or an interrupt; nothing once git has ended
            reader.join()
        out.seek(0)
        return subprocess.CompletedProcess(command, code, out.read(), "".join(err).encode())


def popen_git(
    args: Sequence[str],
    *,
    gitdir: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    trusted: bool | None = None,
    config: Sequence[tuple[str, str]] = (),
    stdout: int | IO[bytes] = subprocess.PIPE,
    stderr: int | IO[bytes] = subprocess.PIPE,
    pass_fds: Sequence[int] = (),
    detached: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``git <args>`` in the background under the same policy; ``pass_fds``: a lock git
    holds while it runs; ``detached``: out of reach of the caller's process group."""
    env, policy = _policy(gitdir, cwd, trusted, False, config)
    try:
        return subprocess.Popen(
            _command(args, gitdir, policy),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=env,
            pass_fds=pass_fds,
            start_new_session=detached,
        )
    except FileNotFoundError:
        raise StoreError("the git binary is not on PATH") from None
