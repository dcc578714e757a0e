"""Nothing committed runs; trust is recorded outside the store; git runs under one policy.

Every program-running git setting gitmem shuts out of an untrusted store is tried
here against the real git binary twice: trusted (the program runs: the test can
fail) and untrusted (it must not). Reproductions 1 and 2 of issue 11 are at the end.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import run_git

from gitmem.base.errors import InvalidInputError
from gitmem.git import command as gitcmd
from gitmem.git import localconfig, trust


def sh(marker: Path) -> str:
    return f"touch {shlex.quote(str(marker))}"


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def make_repo(base: Path) -> Path:
    repo = base / "repo"
    run_git(base, "init", "-q", "-b", "main", "repo")
    (repo / "a.txt").write_text("one\n")
    run_git(repo, "add", "a.txt")
    run_git(repo, "commit", "-qm", "one")
    return repo


def with_hub(repo: Path) -> Path:
    hub = repo.parent / "hub.git"
    run_git(repo.parent, "clone", "-q", "--bare", str(repo), str(hub))
    run_git(repo, "remote", "add", "origin", str(hub))
    return hub


def config(repo: Path, **values: str) -> None:
    for key, value in values.items():
        run_git(repo, "config", key.replace("__", "."), value)


@dataclass(frozen=True)
class Case:
    """Set up a repository whose own settings make ``args`` run the marker command."""

    setup: Callable[[Path, Path], tuple[Path, list[str], bytes | None]]


def _uploadpack(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    with_hub(repo)
    config(repo, remote__origin__uploadpack=f"{sh(m)}; git-upload-pack")
    return repo, ["fetch", "-q", "origin"], None


def _receivepack(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    with_hub(repo)
    config(repo, remote__origin__receivepack=f"{sh(m)}; git-receive-pack")
    return repo, ["push", "-q", "origin", "main:refs/heads/other"], None


def _ssh_command(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(repo, "remote", "add", "origin", "ssh://git.invalid/x.git")
    config(repo, core__sshCommand=f"{sh(m)}; false")
    return repo, ["fetch", "-q", "origin"], None


def _git_proxy(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(repo, "remote", "add", "origin", "git://git.invalid/x.git")
    config(repo, core__gitProxy=script(base / "proxy", sh(m)))
    return repo, ["fetch", "-q", "origin"], None


def _ext_protocol(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(repo, "remote", "add", "origin", f"ext::sh -c {sh(m).replace(' ', '% ')}")
    config(repo, protocol__allow="always", protocol__ext__allow="always")
    return repo, ["fetch", "-q", "origin"], None


def _ext_by_insteadof(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(repo, "remote", "add", "origin", "https://example.invalid/x.git")
    config(repo, protocol__allow="always")
    run_git(
        repo, "config", f"url.ext::sh -c {sh(m).replace(' ', '% ')} .insteadOf",
        "https://example.invalid/",
    )
    return repo, ["fetch", "-q", "origin"], None


def _hooks_path(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    hooks = base / "hooks"
    hooks.mkdir()
    script(hooks / "post-commit", sh(m))
    config(repo, core__hooksPath=str(hooks))
    return repo, ["commit", "-q", "--allow-empty", "-m", "x"], None


def _repository_hooks(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    """No setting at all: a hook in <gitdir>/hooks (a committed bare store carries one)."""
    repo = make_repo(base)
    with_hub(repo)
    script(repo / ".git" / "hooks" / "pre-push", sh(m))
    return repo, ["push", "-q", "origin", "main:refs/heads/other"], None


def _fsmonitor(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, core__fsmonitor=script(base / "fsmon", f"{sh(m)}; exit 1"))
    return repo, ["status", "--porcelain"], None


def _askpass(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, core__askPass=script(base / "askpass", f"{sh(m)}; echo secret"))
    return repo, ["credential", "fill"], b"protocol=https\nhost=example.invalid\n\n"


def _credential_helper(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, credential__helper=f"!{sh(m)}; echo username=u; echo password=p; true")
    return repo, ["credential", "fill"], b"protocol=https\nhost=example.invalid\n\n"


def _credential_url_helper(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(
        repo, "config", "credential.https://example.invalid.helper",
        f"!{sh(m)}; echo username=u; echo password=p; true",
    )
    return repo, ["credential", "fill"], b"protocol=https\nhost=example.invalid\n\n"


def _editor(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, core__editor=f"{sh(m)}; true")
    return repo, ["commit", "-q", "--allow-empty"], None


def _sequence_editor(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, sequence__editor=f"{sh(m)}; true")
    return repo, ["rebase", "-q", "-i", "--root"], None


def _alternate_refs(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    (base / "other").mkdir()
    other = make_repo(base / "other")
    repo = base / "repo2"
    run_git(base, "init", "-q", "-b", "main", "repo2")
    (repo / ".git" / "objects" / "info" / "alternates").write_text(
        str(other / ".git" / "objects") + "\n"
    )
    hub = with_hub(other)
    run_git(repo, "remote", "add", "origin", str(hub))
    config(repo, core__alternateRefsCommand=f"{sh(m)}; true")
    return repo, ["fetch", "-q", "origin"], None


def _changed(base: Path, attributes: str | None = None) -> Path:
    repo = make_repo(base)
    if attributes is not None:
        (repo / ".gitattributes").write_text(attributes)
    (repo / "a.txt").write_text("two\n")
    return repo


def _diff_external(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base)
    config(repo, diff__external=script(base / "ext", sh(m)))
    return repo, ["diff"], None


def _diff_command(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt diff=d\n")
    config(repo, diff__d__command=script(base / "dcmd", sh(m)))
    return repo, ["diff"], None


def _textconv(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt diff=d\n")
    config(repo, diff__d__textconv=script(base / "tc", f'{sh(m)}; cat "$1"'))
    return repo, ["diff"], None


def _merge_driver(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    (repo / ".gitattributes").write_text("a.txt merge=d\n")
    (repo / "a.txt").write_text("1\n2\n3\n")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-qm", "base")
    run_git(repo, "checkout", "-qb", "side")
    (repo / "a.txt").write_text("1\n2\nthree\n")
    run_git(repo, "commit", "-qam", "side")
    run_git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("one\n2\n3\n")
    run_git(repo, "commit", "-qam", "main")
    config(repo, merge__d__driver=f"{sh(m)}; git merge-file %A %O %B")
    return repo, ["merge", "-q", "side", "-m", "merge"], None


def _filter_clean(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt filter=f\n")
    config(repo, filter__f__clean=f"{sh(m)}; cat", filter__f__required="true")
    return repo, ["add", "a.txt"], None


def _filter_smudge(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt filter=f\n")
    config(repo, filter__f__smudge=f"{sh(m)}; cat", filter__f__clean="cat")
    config(repo, filter__f__required="true")
    return repo, ["checkout", "--", "a.txt"], None


def _filter_process(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt filter=f\n")
    config(repo, filter__f__process=f"{sh(m)}; false")
    return repo, ["add", "a.txt"], None


def _signing(fmt: str, key: str) -> Callable[[Path, Path], tuple[Path, list[str], bytes | None]]:
    def setup(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
        repo = make_repo(base)
        config(repo, commit__gpgSign="true", gpg__format=fmt, user__signingKey="dummy")
        run_git(repo, "config", key, script(base / "signer", f"{sh(m)}; exit 1"))
        return repo, ["commit", "-q", "--allow-empty", "-m", "x"], None

    return setup


def _ssh_default_key(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, commit__gpgSign="true", gpg__format="ssh")
    config(repo, gpg__ssh__defaultKeyCommand=script(base / "keycmd", f"{sh(m)}; exit 1"))
    return repo, ["commit", "-q", "--allow-empty", "-m", "x"], None


def _included(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    """A setting in a file the repository's config includes is the repository's too."""
    repo = _changed(base)
    (base / "more.cfg").write_text(f"[diff]\n\texternal = {script(base / 'ext', sh(m))}\n")
    config(repo, include__path=str(base / "more.cfg"))
    return repo, ["diff"], None


EXEC_KEYS: dict[str, Case] = {
    "include.path -> diff.external": Case(_included),
    "remote.<name>.uploadpack": Case(_uploadpack),
    "remote.<name>.receivepack": Case(_receivepack),
    "core.sshCommand": Case(_ssh_command),
    "core.gitProxy": Case(_git_proxy),
    "protocol.ext.allow": Case(_ext_protocol),
    "url.<ext::>.insteadOf": Case(_ext_by_insteadof),
    "core.hooksPath": Case(_hooks_path),
    "<gitdir>/hooks": Case(_repository_hooks),
    "core.fsmonitor": Case(_fsmonitor),
    "core.askPass": Case(_askpass),
    "credential.helper": Case(_credential_helper),
    "credential.<url>.helper": Case(_credential_url_helper),
    "core.editor": Case(_editor),
    "sequence.editor": Case(_sequence_editor),
    "core.alternateRefsCommand": Case(_alternate_refs),
    "diff.external": Case(_diff_external),
    "diff.<driver>.command": Case(_diff_command),
    "diff.<driver>.textconv": Case(_textconv),
    "merge.<driver>.driver": Case(_merge_driver),
    "filter.<driver>.clean": Case(_filter_clean),
    "filter.<driver>.smudge": Case(_filter_smudge),
    "filter.<driver>.process": Case(_filter_process),
    "gpg.program": Case(_signing("openpgp", "gpg.program")),
    "gpg.openpgp.program": Case(_signing("openpgp", "gpg.openpgp.program")),
    "gpg.x509.program": Case(_signing("x509", "gpg.x509.program")),
    "gpg.ssh.program": Case(_signing("ssh", "gpg.ssh.program")),
    "gpg.ssh.defaultKeyCommand": Case(_ssh_default_key),
}


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No editor, ssh or askpass from the test runner's environment decides anything."""
    for var in ("GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_SSH", "GIT_SSH_COMMAND",
                "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND", "GIT_EXTERNAL_DIFF"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GIT_SSH", "false")  # were ssh to run untrusted, it would fail at once


@pytest.mark.usefixtures("quiet_env")
@pytest.mark.parametrize("key", sorted(EXEC_KEYS))
def test_each_program_running_setting_runs_only_when_trusted(tmp_path: Path, key: str) -> None:
    outcomes = {}
    for trusted in (True, False):
        base = tmp_path / str(trusted)
        base.mkdir()
        marker = base / "ran"
        repo, args, stdin = EXEC_KEYS[key].setup(base, marker)
        gitcmd.run_git(args, cwd=repo, input=stdin, check=False, timeout=60, trusted=trusted)
        outcomes[trusted] = marker.exists()
    assert outcomes == {True: True, False: False}


@pytest.mark.parametrize(
    ("key", "value"),
    [("alias.fetch", "!{m}"), ("uploadpack.packObjectsHook", "{m}; git pack-objects")],
)
def test_settings_git_itself_ignores_in_a_repository(tmp_path: Path, key: str, value: str) -> None:
    """No override needed: git never lets an alias replace a command, and reads
    uploadpack.packObjectsHook only from the user's own files. Trusted, even."""
    marker = tmp_path / "ran"
    repo = make_repo(tmp_path)
    hub = with_hub(repo)
    run_git(hub, "config", key, value.format(m=sh(marker)))
    run_git(repo, "config", key, value.format(m=sh(marker)))
    (repo / "b.txt").write_text("b\n")
    run_git(hub.parent, "clone", "-q", "--bare", str(repo), "other.git")
    gitcmd.run_git(["fetch", "-q", "origin"], cwd=repo, trusted=True)
    gitcmd.run_git(["fetch", "-q", str(tmp_path / "other.git")], cwd=repo, trusted=True)
    assert not marker.exists()


def test_untrusted_keeps_the_users_own_settings(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setting the repository overrides falls back to the user's own value, not to nothing:
    the user's credential helper and ssh command still run, the store's do not."""
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    theirs, mine = tmp_path / "theirs", tmp_path / "mine"
    with (isolated_home / ".gitconfig").open("a") as fh:
        helper = f"!{sh(mine)}; echo username=u; echo password=p; true"
        fh.write(f'[credential]\n\thelper = "{helper}"\n')
    repo = make_repo(tmp_path)
    config(repo, credential__helper=f"!{sh(theirs)}; echo username=x; echo password=y; true")
    result = gitcmd.run_git(
        ["credential", "fill"], cwd=repo, trusted=False,
        input=b"protocol=https\nhost=example.invalid\n\n",
    )
    assert mine.exists() and not theirs.exists()
    assert b"username=u" in result.stdout
    entries = [("global", "core.sshcommand", "my-ssh"), ("local", "core.sshcommand", "evil")]
    assert ("core.sshcommand", "my-ssh") in gitcmd.overrides(entries, {}).config


# -- settings that name a file git writes or sends ---------------------------------------------


def _pkt(text: str) -> bytes:
    data = text.encode()
    return b"%04x" % (len(data) + 4) + data


class _CookieServer(http.server.BaseHTTPRequestHandler):
    """A smart-HTTP remote holding an empty repository, setting a cookie on every answer."""

    def do_GET(self) -> None:
        body = _pkt("# service=git-upload-pack\n") + b"0000" + b"0000"
        self.send_response(200)
        self.send_header("Set-Cookie", "session=from-the-server; Path=/")
        self.send_header("Content-Type", "application/x-git-upload-pack-advertisement")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_remote(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URL of a real HTTP remote on this machine (git reaches it through curl)."""
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CookieServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/memory.git"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("url_specific", [False, True], ids=["http.*", "http.<url>.*"])
def test_an_untrusted_store_cannot_make_git_write_a_cookie_jar(
    tmp_path: Path, http_remote: str, url_specific: bool
) -> None:
    """``http.cookieFile`` with ``http.saveCookies``: every HTTP fetch writes the server's
    cookies to a path the store's config names (a file created or overwritten anywhere the
    user can write)."""
    outcomes = {}
    for trusted in (True, False):
        base = tmp_path / str(trusted)
        base.mkdir()
        jar = base / "jar"
        repo = make_repo(base)
        run_git(repo, "remote", "add", "origin", http_remote)
        section = f"http.{http_remote}." if url_specific else "http."
        run_git(repo, "config", section + "cookieFile", str(jar))
        run_git(repo, "config", section + "saveCookies", "true")
        fetched = gitcmd.run_git(["fetch", "-q", "origin"], cwd=repo, check=False,
                                 timeout=60, trusted=trusted)
        assert fetched.returncode == 0, fetched.stderr
        outcomes[trusted] = jar.exists()
    assert outcomes == {True: True, False: False}  # trusted, the jar is written: a real test


def test_an_untrusted_stores_client_certificate_and_cookie_settings_are_neutral(
    tmp_path: Path, isolated_home: Path
) -> None:
    """What the git that gitmem starts sees: the store's file names replaced by the user's
    own (here: a cookie file in the user's ~/.gitconfig), else by none."""
    users_jar = str(isolated_home / "my-cookies")
    with (isolated_home / ".gitconfig").open("a") as fh:
        fh.write(f"[http]\n\tcookieFile = {users_jar}\n")
    repo = make_repo(tmp_path)
    url = "https://memory.example/team.git"
    theirs = {
        "http.cookieFile": str(tmp_path / "theirs-jar"),
        "http.saveCookies": "true",
        "http.sslCert": str(isolated_home / ".ssh" / "client.pem"),
        "http.sslKey": str(isolated_home / ".ssh" / "client.key"),
        f"http.{url}.sslKey": str(isolated_home / ".ssh" / "other.key"),
    }
    for key, value in theirs.items():
        run_git(repo, "config", key, value)

    def seen(trusted: bool, *args: str) -> str:
        done = gitcmd.run_git(["config", *args], cwd=repo, check=False, trusted=trusted)
        return done.stdout.decode().strip()

    for key, value in theirs.items():
        if ".memory.example/" not in key:
            assert seen(True, "--get", key) == value  # trusted: the store's own, as before
    assert seen(False, "--get", "http.cookieFile") == users_jar
    assert seen(False, "--bool", "--get", "http.saveCookies") == "false"
    assert seen(False, "--get", "http.sslCert") == ""
    assert seen(False, "--get", "http.sslKey") == ""
    assert seen(True, "--get-urlmatch", "http.sslKey", url) == theirs[f"http.{url}.sslKey"]
    assert seen(False, "--get-urlmatch", "http.sslKey", url) == ""


class _RecordingProxy(http.server.BaseHTTPRequestHandler):
    """An HTTP proxy that forwards nothing: it records what reached it and answers 502."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize("key", ["http.proxy", "remote.origin.proxy", "http.<url>.proxy"])
def test_an_untrusted_store_cannot_route_git_through_its_proxy(
    tmp_path: Path, http_remote: str, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    """A proxy the store names sees every plain-HTTP request, the credential the user's
    own helper adds included: untrusted, git goes straight to the hub."""
    for var in ("https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    _RecordingProxy.seen = []
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RecordingProxy)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        outcomes = {}
        for trusted in (True, False):
            base = tmp_path / str(trusted)
            base.mkdir()
            repo = make_repo(base)
            run_git(repo, "remote", "add", "origin", http_remote)
            name = key.replace("<url>", http_remote)
            run_git(repo, "config", name, f"http://127.0.0.1:{proxy.server_address[1]}")
            before = len(_RecordingProxy.seen)
            fetched = gitcmd.run_git(["fetch", "-q", "origin"], cwd=repo, check=False,
                                     timeout=60, trusted=trusted)
            outcomes[trusted] = (fetched.returncode == 0, len(_RecordingProxy.seen) > before)
    finally:
        proxy.shutdown()
        proxy.server_close()
    # Trusted: the store's proxy is used (so the test can fail) and, forwarding nothing,
    # fails the fetch; untrusted: the proxy sees nothing and the fetch succeeds.
    assert outcomes == {True: (False, True), False: (True, False)}


def test_an_untrusted_stores_network_settings_are_gits_defaults_or_the_users(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Certificate checks, certificate authorities, TLS version and ciphers, Kerberos
    delegation and redirects: the store's values replaced by git's defaults, or by the
    user's own (here a proxy in ~/.gitconfig, which a URL-specific entry of the store's
    must not outrank)."""
    for var in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    with (isolated_home / ".gitconfig").open("a") as fh:
        fh.write("[http]\n\tproxy = http://proxy.mine.example:3128\n")
    repo = make_repo(tmp_path)
    url = "https://memory.example/team.git"
    theirs = {
        "http.sslVerify": "false",
        f"http.{url}.sslVerify": "false",
        "http.sslCAInfo": str(tmp_path / "their-ca.pem"),
        "http.sslCAPath": str(tmp_path / "their-cas"),
        "http.sslVersion": "tlsv1.0",
        "http.sslCipherList": "NULL",
        "http.delegation": "always",
        "http.followRedirects": "true",
        f"http.{url}.proxy": "http://theirs.example:8080",
        "remote.origin.proxy": "http://theirs.example:8080",
    }
    for key, value in theirs.items():
        run_git(repo, "config", key, value)

    def seen(trusted: bool, *args: str) -> str:
        done = gitcmd.run_git(["config", *args], cwd=repo, check=False, trusted=trusted)
        return done.stdout.decode().strip()

    assert seen(True, "--get", "http.sslVerify") == "false"  # trusted: the store's own
    assert seen(True, "--get-urlmatch", "http.proxy", url) == "http://theirs.example:8080"
    assert seen(False, "--bool", "--get", "http.sslVerify") == "true"
    assert seen(False, "--bool", "--get-urlmatch", "http.sslVerify", url) == "true"
    assert seen(False, "--get", "http.sslCAInfo") == ""
    assert seen(False, "--get", "http.sslCAPath") == ""
    assert seen(False, "--get", "http.sslVersion") == ""
    assert seen(False, "--get", "http.sslCipherList") == ""
    assert seen(False, "--get", "http.delegation") == "none"
    assert seen(False, "--get", "http.followRedirects") == "initial"
    mine = "http://proxy.mine.example:3128"
    assert seen(False, "--get-urlmatch", "http.proxy", url) == mine
    assert seen(False, "--get", "remote.origin.proxy") == mine


def test_a_proxy_from_the_environment_stays_in_use() -> None:
    """With no proxy in the user's files, the neutral value is the environment's, which
    git would have used had the store set none."""
    entries = [("local", "http.proxy", "http://theirs.example:8080")]
    policy = gitcmd.overrides(entries, {"https_proxy": "http://corp.example:3128"})
    assert ("http.proxy", "http://corp.example:3128") in policy.config
    assert ("http.proxy", "") in gitcmd.overrides(entries, {}).config


def test_a_trusted_repository_runs_git_unchanged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)

    def command_keys(trusted: bool) -> set[str]:
        listed = gitcmd.run_git(["config", "--list", "--show-scope"], cwd=repo, trusted=trusted)
        lines = listed.stdout.decode().splitlines()
        return {line.split("\t")[1].split("=")[0] for line in lines if line.startswith("command")}

    # Only what holds for every store: no submodules (tests/test_hostile_hub.py).
    trusted = {"submodule.recurse", "fetch.recursesubmodules", "push.recursesubmodules"}
    assert command_keys(True) == trusted
    assert {"core.hookspath", "core.fsmonitor", "protocol.ext.allow"} <= command_keys(False)


def test_a_commands_own_settings_beat_the_repositorys_and_never_the_policys(
    tmp_path: Path,
) -> None:
    """``config=``: one command's ``git -c``, written nowhere; an untrusted store's
    program-running keys still get the policy's value, which git reads after them."""
    repo = make_repo(tmp_path)
    run_git(repo, "config", "core.packedGitLimit", "1g")
    given = [("core.packedGitLimit", "64m"), ("core.fsmonitor", "true")]
    for trusted in (True, False):
        out = gitcmd.run_git(
            ["config", "--get-all", "core.packedGitLimit"], cwd=repo, trusted=trusted, config=given
        )
        assert out.stdout.decode().split() == ["1g", "64m"]  # git uses the last one
        monitor = gitcmd.run_git(
            ["config", "--get", "core.fsmonitor"], cwd=repo, trusted=trusted, config=given
        )
        assert monitor.stdout.decode().strip() == ("true" if trusted else "false")
    assert run_git(repo, "config", "--local", "--get-all", "core.packedGitLimit").split() == ["1g"]


def test_repository_variables_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIT_DIR from an enclosing git (a hook) never points gitmem's git elsewhere."""
    repo = make_repo(tmp_path)
    other = tmp_path / "other"
    run_git(tmp_path, "init", "-q", "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    out = gitcmd.run_git(["rev-parse", "--absolute-git-dir"], cwd=repo, trusted=True)
    assert Path(out.stdout.decode().strip()) == (repo / ".git").resolve()


def test_missing_git_and_failures_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.base.errors import StoreError

    repo = make_repo(tmp_path)
    with pytest.raises(StoreError, match=r"^git cat-file failed: fatal: "):
        gitcmd.run_git(["cat-file", "blob", "nope"], cwd=repo, trusted=True)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(StoreError, match="the git binary is not on PATH"):
        gitcmd.run_git(["status"], cwd=repo, trusted=True)


def test_popen_variant_runs_under_the_same_policy(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    marker = tmp_path / "ran"
    config(repo, core__fsmonitor=script(tmp_path / "fsmon", f"{sh(marker)}; exit 1"))
    process = gitcmd.popen_git(["status", "--porcelain"], cwd=repo, trusted=False)
    process.communicate(timeout=60)
    assert process.returncode == 0 and not marker.exists()


STARTS_A_PROCESS = ("subprocess.run(", "Popen(", "os.system(", "check_output(")


def test_every_git_call_goes_through_git_command() -> None:
    """No module but gitmem/git/command.py starts git (the one policy has no way around it);
    a module that starts Python does so with -I or -P (nothing importable from the
    current directory)."""
    root = Path(__file__).resolve().parent.parent / "gitmem"
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root) == Path("git", "command.py"):
            continue
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if not any(needle in line for needle in STARTS_A_PROCESS):
                continue
            call = " ".join(lines[number : number + 6])
            python = "sys.executable" in call and ('"-I"' in call or '"-P"' in call)
            if not python:
                offenders.append(f"{path.relative_to(root)}:{number + 1}: {line.strip()}")
    assert offenders == []


# -- trust: recorded outside the store ---------------------------------------------------


def gitmem_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gitmem", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_init_records_trust_in_the_users_config_not_the_store(tmp_path: Path) -> None:
    import gitmem

    store = gitmem.init(tmp_path / "mine")
    bare = gitmem.init(tmp_path / "mine.git", bare=True)
    assert trust.is_trusted(store.path) and trust.is_trusted(bare.path)
    assert str((tmp_path / "mine" / ".git").resolve()) in trust.trusted()
    config_text = localconfig.config_path().read_text()
    assert "trusted_stores" in config_text
    assert localconfig.config_path().stat().st_mode & 0o077 == 0
    committed = run_git(store.path, "ls-tree", "-r", "--name-only", "HEAD")
    assert "trusted" not in committed
    assert "trusted" not in (store.path / ".git" / "config").read_text()
    # A store that only gets opened is not recorded.
    run_git(tmp_path, "clone", "-q", str(store.path), "theirs")
    gitmem.open(tmp_path / "theirs")
    assert not trust.is_trusted(tmp_path / "theirs")


def test_trust_command_adds_lists_and_removes(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q", "--bare", "other.git")
    other = tmp_path / "other.git"
    assert not trust.is_trusted(other)
    added = gitmem_cli(tmp_path, "trust", str(other))
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == f"trusted: {other.resolve()}"
    assert trust.is_trusted(other)
    listed = gitmem_cli(tmp_path, "--json", "trust", "--list")
    assert json.loads(listed.stdout)["trusted"] == [str(other.resolve())]
    removed = gitmem_cli(tmp_path, "trust", "--remove", str(other))
    assert removed.stdout.strip() == f"no longer trusted: {other.resolve()}"
    assert not trust.is_trusted(other)
    again = gitmem_cli(tmp_path, "trust", "--remove", str(other))
    assert again.stdout.strip().startswith("was not trusted")
    missing = gitmem_cli(tmp_path, "trust", str(tmp_path / "nothing"))
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines() == [
        f"gitmem: error: no git repository at {tmp_path / 'nothing'}"
    ]


def test_trust_star_and_a_malformed_list(tmp_path: Path) -> None:
    path = localconfig.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("trusted_stores: ['*']\n")
    assert trust.is_trusted(tmp_path / "anything")
    path.write_text("trusted_stores: yes\n")
    with pytest.raises(InvalidInputError, match="trusted_stores must be a list of store paths"):
        trust.is_trusted(tmp_path)


# -- issue 11, reproduction 1: code pushed with a gitmem.yaml naming it ------------------


def test_reproduction_1_pushed_code_named_by_gitmem_yaml_never_runs(tmp_path: Path) -> None:
    """evilmod.py + gitmem.yaml naming ``lifecycle.rules.decisions: "evilmod:rule"`` and
    ``lifecycle.jobs.post-merge: [prune]``, pushed; a real ``git pull`` in a clone with the
    hooks installed runs the post-merge hook, which imports nothing from the store (also no
    ``gitmem/`` package planted at its top: the hook's Python runs with -P)."""
    import gitmem
    from gitmem.entry import hooks

    origin = gitmem.init(tmp_path / "origin")
    origin.create("## Decision\n\nuse git\n", id="projects/acme/decisions")
    run_git(tmp_path, "clone", "-q", "--bare", str(origin.path), "hub.git")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), "victim")
    victim = tmp_path / "victim"
    hooks.install(victim, "memory")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), "attacker")
    attacker = tmp_path / "attacker"
    imported = tmp_path / "imported"
    planted = f"open({str(imported)!r}, 'a').write(__name__ + '\\n')\n"
    (attacker / "evilmod.py").write_text(planted + "def rule(ctx):\n    return None\n")
    (attacker / "gitmem").mkdir()
    (attacker / "gitmem" / "__init__.py").write_text(planted)
    (attacker / "gitmem" / "__main__.py").write_text(planted)
    config = attacker / "gitmem.yaml"
    config.write_text(
        config.read_text()
        + 'lifecycle:\n  rules:\n    decisions: "evilmod:rule"\n  jobs:\n    post-merge: [prune]\n'
    )
    run_git(attacker, "add", ".")
    run_git(attacker, "commit", "-qm", "helpful rules")
    run_git(attacker, "push", "-q", "origin", "main")

    pulled = subprocess.run(
        ["git", "pull", "--no-rebase", "origin", "main"],
        cwd=victim,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert pulled.returncode == 0, pulled.stderr
    assert (victim / "evilmod.py").is_file()  # the pull landed it ...
    assert "gitmem: prune:" in pulled.stderr  # ... and the hook ran the job it names
    assert not imported.exists()  # ... and nothing was imported
    assert "never imports code a store names" in pulled.stderr
    assert "rules: {decisions:" in pulled.stderr  # the warning names the local opt-in


# -- issue 11, reproduction 2: a bare store committed in a cloned project -----------------


def _hostile_project(tmp_path: Path, marker: Path) -> Path:
    """A project committing a bare store as .gitmem/ whose config runs a command on fetch,
    with a pre-push hook for good measure; cloned by the victim."""
    import gitmem

    author = tmp_path / "author"
    run_git(tmp_path, "init", "-q", "-b", "main", "author")
    store = gitmem.init(author / ".gitmem", bare=True)
    store.create("project memory\n")
    run_git(tmp_path, "clone", "-q", "--bare", str(author / ".gitmem"), "hub.git")
    run_git(author / ".gitmem", "remote", "add", "origin", str(tmp_path / "hub.git"))
    bare = author / ".gitmem"
    run_git(bare, "config", "remote.origin.uploadpack", f"{sh(marker)}; git-upload-pack")
    run_git(bare, "config", "remote.origin.receivepack", f"{sh(marker)}; git-receive-pack")
    script(author / ".gitmem" / "hooks" / "pre-push", sh(marker))
    run_git(author, "add", ".gitmem")
    run_git(author, "commit", "-qm", "project with its memory")
    run_git(tmp_path, "clone", "-q", str(author), "victim")
    trust.untrust(author / ".gitmem")  # the victim's machine never trusted it
    return tmp_path / "victim"


def test_reproduction_2_committed_store_is_not_used_by_walking_up(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    victim = _hostile_project(tmp_path, marker)
    (victim / "src").mkdir()
    result = gitmem_cli(victim / "src", "sync")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    store = victim.resolve() / ".gitmem"
    assert lines[0].startswith(f"gitmem: error: {store} is committed in the project at ")
    assert f"--store {store}" in lines[0] and f"gitmem trust {store}" in lines[0]
    assert not marker.exists()


def test_reproduction_2_named_untrusted_store_syncs_without_its_programs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    victim = _hostile_project(tmp_path, marker)
    store = victim / ".gitmem"
    result = gitmem_cli(victim, "--store", str(store), "sync")
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    # Trusted, the same store's settings do run: the test above could fail.
    assert gitmem_cli(victim, "trust", str(store)).returncode == 0
    (victim / "src").mkdir()
    assert gitmem_cli(victim / "src", "ls").returncode == 0  # walking up is allowed now
    gitmem_cli(victim, "--store", str(store), "sync")
    assert marker.exists()


def test_an_untrusted_stores_core_worktree_is_not_followed(tmp_path: Path) -> None:
    """libgit2 honours core.worktree, and gitmem writes memory files into the work tree:
    a store's config must not send those writes to a directory of its choosing."""
    import gitmem
    from gitmem.base.errors import StoreError

    store = gitmem.init(tmp_path / "theirs.git", bare=True)
    store.create("x\n")
    elsewhere = tmp_path / "home-of-the-user"
    elsewhere.mkdir()
    run_git(store.path, "config", "core.bare", "false")
    run_git(store.path, "config", "core.worktree", str(elsewhere))
    trust.untrust(store.path)
    with pytest.raises(StoreError, match=r"core\.worktree"):
        gitmem.open(store.path).create("y\n")
    assert list(elsewhere.iterdir()) == []
    trust.trust(store.path)  # the user's own setting: followed
    gitmem.open(store.path).create("z\n")
    assert (elsewhere / "memories").is_dir()


def test_an_untrusted_stores_alternates_are_not_followed(tmp_path: Path) -> None:
    """``objects/info/alternates`` in a store's git directory makes git and libgit2 read
    objects from another repository: a ref could name a private project's commit, and a
    sync would push it. A store the user has not trusted is refused, one line, exit 7."""
    import gitmem
    from gitmem.base.errors import StoreError

    (tmp_path / "private").mkdir()
    private = make_repo(tmp_path / "private")
    secret_commit = run_git(private, "rev-parse", "HEAD").strip()
    store = gitmem.init(tmp_path / "theirs.git", bare=True)
    store.create("x\n")
    alternates = store.db().gitdir / "objects" / "info" / "alternates"
    alternates.parent.mkdir(parents=True, exist_ok=True)
    alternates.write_text(f"# the other repository\n{private / '.git' / 'objects'}\n")
    run_git(store.path, "update-ref", "refs/heads/theirs", secret_commit)
    trust.untrust(store.path)
    with pytest.raises(StoreError, match="reads objects from another repository"):
        gitmem.open(store.path)
    result = gitmem_cli(tmp_path, "--store", str(store.path), "ls")
    assert result.returncode == 7 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "gitmem trust" in result.stderr
    alternates.write_text("# only a comment: nothing is read from elsewhere\n")
    assert [m.body for m in gitmem.open(store.path).list()] == ["x\n"]
    alternates.unlink()
    os.mkfifo(alternates)  # never read: opening it would wait for a writer forever
    with pytest.raises(StoreError, match="reads objects from another repository"):
        gitmem.open(store.path)
    alternates.unlink()
    alternates.write_text(f"{private / '.git' / 'objects'}\n")
    trust.trust(store.path)  # the user's own (git clone --shared): followed
    assert [m.body for m in gitmem.open(store.path).list()] == ["x\n"]


def test_jobs_come_from_gitmem_installed_packages_or_the_users_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gitmem.yaml names jobs; code comes from an entry point or the user's own file. A
    'module:function' named by the store is an unknown job whose warning says how to opt in."""
    import gitmem
    from gitmem.entry.jobs import run_jobs

    ran = tmp_path / "ran"
    (tmp_path / "myjobs_for_test.py").write_text(
        f"def note(store, out):\n    open({str(ran)!r}, 'a').write('local\\n')\n"
        f"def plugin(store, out):\n    open({str(ran)!r}, 'a').write('plugin\\n')\n"
    )
    dist = tmp_path / "myjobs_for_test-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myjobs-for-test\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[gitmem.jobs]\nplugin = myjobs_for_test:plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    store = gitmem.init(tmp_path / "store")
    config = store.path / "gitmem.yaml"
    config.write_text(
        config.read_text()
        + "lifecycle:\n  jobs:\n    post-merge: [note, plugin, 'myjobs_for_test:note']\n"
    )
    run_git(store.path, "commit", "-qam", "jobs")
    lines: list[str] = []
    assert run_jobs(gitmem.open(store.path), "post-merge", lines.append) == ["staleness", "plugin"]
    assert not ran.read_text().count("local")
    assert any("unknown lifecycle job 'note'" in line for line in lines)
    hint = next(line for line in lines if "'myjobs_for_test:note'" in line)
    assert "never imports code a store names" in hint and str(localconfig.config_path()) in hint
    localconfig.update(lambda data: data.update(jobs={"note": "myjobs_for_test:note"}))
    assert run_jobs(gitmem.open(store.path), "post-merge", lines.append) == [
        "staleness", "note", "plugin"
    ]
    assert ran.read_text().splitlines() == ["plugin", "local", "plugin"]


def test_a_committed_embedder_endpoint_is_never_used(tmp_path: Path) -> None:
    """Where memory text is sent comes from the user's own file only: an endpoint named in
    the store's gitmem.yaml is not read (the user's own section is)."""
    import gitmem
    from gitmem.store.embed import get_embedder

    store = gitmem.init(tmp_path / "store")
    config = store.path / "gitmem.yaml"
    config.write_text(
        config.read_text()
        + "embedder: {provider: openai, url: 'http://127.0.0.1:9/v1/embeddings', model: x}\n"
    )
    run_git(store.path, "commit", "-qam", "send my memories elsewhere")
    chosen = get_embedder(str(store.db().gitdir))
    assert chosen is None or not chosen.name.startswith(("openai", "ollama", "http"))
    localconfig.update(lambda data: data.update(embedder="none"))
    assert get_embedder(str(store.db().gitdir)) is None  # the user's own choice is read


def test_project_hooks_leave_a_committed_untrusted_store_alone(tmp_path: Path) -> None:
    """In the cloned project, gitmem's project hooks refuse the committed store with one
    warning line; the user's git command succeeds and nothing the store names runs."""
    from gitmem.entry import hooks

    marker = tmp_path / "ran"
    victim = _hostile_project(tmp_path, marker)
    hooks.install(victim, "project")
    committed = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "work"],
        cwd=victim,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert committed.returncode == 0, committed.stderr
    warnings = [line for line in committed.stderr.splitlines() if line.startswith("gitmem:")]
    assert len(warnings) == 1 and "is committed in the project" in warnings[0], committed.stderr
    assert not marker.exists()


def test_hooks_from_an_older_gitmem_show_as_outdated_and_install_adds_p(tmp_path: Path) -> None:
    import gitmem
    from gitmem.entry import hooks

    store = gitmem.init(tmp_path / "store")
    hooks.install(store.path, "memory")
    script_path = hooks.hooks_dir(store.path) / "post-merge"
    text = script_path.read_text()
    assert '"$python" -P -m gitmem hook-run' in text
    script_path.write_text(text.replace(" -P -m gitmem", " -m gitmem"))  # as 0.x installed it
    states = {h.name: h for h in hooks.status(store.path).hooks}
    assert states["post-merge"].installed and states["post-merge"].outdated
    assert not states["pre-commit"].outdated
    assert hooks.install(store.path, "memory").changed == ["post-merge"]
    assert not any(h.outdated for h in hooks.status(store.path).hooks)
    assert '"$python" -P -m gitmem hook-run' in script_path.read_text()


def test_a_device_as_local_config_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GITMEM_CONFIG=/dev/null means "no local configuration". Recording a new store's
    trust used to rename a temporary file over it: as root, /dev/null became a regular
    file of YAML and every later program writing there filled it. A null device made
    here (not the machine's own) stands in for it."""
    import stat

    import gitmem

    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    device = tmp_path / "etc" / "null"
    device.parent.mkdir()
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    monkeypatch.setenv("GITMEM_CONFIG", str(device))
    store = gitmem.init(tmp_path / "store")
    store.create("kept\n")
    assert stat.S_ISCHR(device.stat().st_mode)
    assert sorted(p.name for p in device.parent.iterdir()) == ["null"]  # no .lock, no temp
    assert localconfig.load().data == {}
    # Anything else that is not a regular file is refused by name, and left as it was.
    monkeypatch.setenv("GITMEM_CONFIG", str(tmp_path))
    with pytest.raises(InvalidInputError, match="not a regular file"):
        trust.trust(tmp_path / "store")
    assert tmp_path.is_dir()
