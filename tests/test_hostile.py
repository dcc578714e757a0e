"""The hostile-input table of the reliability issue: every named input, end to end.

Most inputs already have a test at the level where they are refused
(tests/test_codec.py for the YAML reader, tests/test_bad_input.py for the store
API, tests/test_merge.py for file names reaching the merge driver). This file
follows the same inputs through the rest of the system: the command line, the
pre-commit hook, the index and doctor, and adds what was missing (path ids,
names that differ only by case or normalisation, links to directories,
BOM/CRLF through the store, the body bound through the CLI), plus hypothesis
properties over the codec (through the whole store), the path layout and the
command line: a clean error or a result, never a traceback.

| hostile input | where it is tested |
|---|---|
| YAML alias bombs | test_codec (reader), test_bad_input (store), here (CLI, hook, index, doctor) |
| ``!!python/object`` and other tags | same |
| deeply nested structures | same |
| duplicate keys | same |
| non-UTF-8 bytes, NUL bytes | same; bodies: test_bad_input; CLI stdin: here |
| a BOM, CRLF | test_codec (lossless), here (store update, hook, CLI) |
| huge bodies (bound configurable) | test_bad_input (API), here (CLI, committed bound) |
| front-matter that is a list or a scalar | test_codec, test_bad_input, here (CLI, hook) |
| ids with ``..``, ``/``, ``\\``, ``%2e%2e``, absolute, control chars | test_bad_input, here |
| names differing only by case or normalisation | here (fixed: case twins are refused) |
| symlinks pointing outside | test_bad_input (file links), here (directory links, bare stores) |
| hostile file names reaching the merge driver | test_merge (hostile paths inject nothing) |
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import string
import unicodedata
from pathlib import Path
from typing import Any

import pygit2
import pytest
import yaml
from clitools import Gitmem, make_runner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storetools import memory_text, plant, run_git, status_porcelain, tip
from test_bad_input import BROKEN_FILES, PLANTED

import gitmem
from gitmem import (
    AlreadyExistsError,
    GitmemError,
    InvalidIdError,
    InvalidMemoryError,
    NotFoundError,
    Store,
)
from gitmem.base.errors import EXIT_CODES
from gitmem.base.trailers import CommitSpec
from gitmem.cli import cli as gitmem_cli
from gitmem.entry import doctor as D
from gitmem.entry import hooks as gh
from gitmem.format import codec, layout
from gitmem.format.layout import memory_path
from gitmem.format.model import KNOWN_KEYS
from gitmem.format.yamlbounds import MAX_DEPTH
from gitmem.git.objects import Snapshot

DOCUMENTED_CODES = set(EXIT_CODES.values()) | {0}

# The inputs of the table that are broken files, as test_bad_input plants them.
NAMED = [
    "alias-bomb",
    "single-alias",
    "python-object-tag",
    "python-name-tag",
    "deep-nesting",
    "very-deep-nesting",
    "duplicate-key-id",
    "duplicate-key-title",
    "non-utf8-body",
    "utf16-file",
    "nul-in-body",
    "front-matter-is-a-list",
    "front-matter-is-a-scalar",
    "front-matter-is-a-number",
    "front-matter-too-large",
]


def put_raw(store: Store, path: str, data: bytes) -> None:
    """Commit raw bytes at ``path`` in-process (as a hand edit would land), no validation."""

    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        snap.put(path, data)
        return CommitSpec(subject="raw"), None

    store.db().write(plan)


def one_error_line(stderr: str) -> str:
    """The one line an error prints: ``gitmem: error: ...``, or under ``--json`` an
    ``{"error": {...}}`` object naming the problem."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    if lines[0].startswith("{"):
        error = json.loads(lines[0])["error"]
        assert error["message"] and isinstance(error["code"], int), error
        return str(error["message"])
    assert lines[0].startswith("gitmem: error: "), stderr
    return lines[0]


# -- the named broken files, through the command line, the hook, the index and doctor ---------


@pytest.mark.parametrize("name", NAMED)
def test_named_hostile_file_through_cli_index_and_doctor(
    store: Store, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    content, _error = BROKEN_FILES[name]
    plant(store, memory_path(PLANTED), content, "hostile")
    good = store.create("a good neighbour")
    run = Gitmem(store.path, make_runner())
    shown = run("show", PLANTED, code=4)
    assert shown.stdout == ""
    one_error_line(shown.stderr)
    listed = run("ls", "--json")
    assert [m["id"] for m in json.loads(listed.stdout)] == [good.id]
    assert "skipping" in listed.stderr and "Traceback" not in listed.stderr
    hits = run("search", "good", "--json")
    assert good.id in hits.stdout
    report = D.diagnose(store, checks=["schema", "index"])
    assert [(f.check, f.path) for f in report.findings] == [("schema", memory_path(PLANTED))]
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("name", NAMED)
def test_named_hostile_file_is_refused_by_the_hook(store: Store, name: str) -> None:
    gh.install(store.path, "memory")
    content, _error = BROKEN_FILES[name]
    path = store.path / memory_path(PLANTED)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    run_git(store.path, "add", "--", memory_path(PLANTED))
    before = tip(store)
    result = run_git(store.path, "commit", "-m", "hostile", check=False)
    assert tip(store) == before, result


# -- BOM and CRLF ----------------------------------------------------------------------------


def test_bom_and_crlf_survive_a_store_update_and_the_hook(store: Store) -> None:
    gh.install(store.path, "memory")
    text = "\ufeff" + memory_text(PLANTED, "line one\nline two\n").replace("\n", "\r\n")
    plant(store, memory_path(PLANTED), text.encode("utf-8"))
    memory = store.read(PLANTED)
    assert memory.body == "line one\r\nline two\r\n" or memory.body == "line one\nline two\n"
    store.update(PLANTED, title="retitled")
    data = (store.db().snapshot().read(memory_path(PLANTED)) or b"").decode("utf-8")
    assert data.startswith("\ufeff---\r\n")
    assert "\r\ntitle: retitled\r\n" in data
    assert all(line.endswith("\r") for line in data.split("\n")[:-1])
    run = Gitmem(store.path, make_runner())
    assert "retitled" in run("show", PLANTED).stdout
    assert status_porcelain(store) == ""


# -- the body bound through the command line ------------------------------------------------


def test_huge_body_through_the_cli_is_one_line_and_changes_nothing(store: Store) -> None:
    config = (store.db().snapshot().read("gitmem.yaml") or b"").decode()
    plant(store, "gitmem.yaml", config.replace("max_body_bytes: 1048576", "max_body_bytes: 1000"))
    before = tip(store)
    run = Gitmem(store.path, make_runner())
    result = run("add", "-", input=b"x" * 1001, code=4)
    line = one_error_line(result.stderr)
    assert "over the store's limit of 1000" in line and "max_body_bytes" in line
    assert tip(store) == before
    run("add", "-", input=b"x" * 1000)


@pytest.mark.parametrize(
    ("data", "what"),
    [(b"caf\xe9\n", "UTF-8"), (b"a\x00b\n", "NUL"), (b"\xff\xfe\x00a", "UTF-8")],
    ids=["latin1", "nul", "utf16-bom"],
)
def test_hostile_bytes_on_stdin(store: Store, data: bytes, what: str) -> None:
    run = Gitmem(store.path, make_runner())
    before = tip(store)
    assert what in one_error_line(run("add", "-", input=data, code=4).stderr)
    assert tip(store) == before


# -- path ids ----------------------------------------------------------------------------------

BAD_PATH_IDS = {
    "dotdot-segment": "projects/../etc/passwd",
    "dotdot-deep": "notes/a/../../x",
    "dot-segment": "notes/./x",
    "empty-segment": "notes//x",
    "trailing-slash": "notes/x/",
    "leading-slash": "/notes/x",
    "percent-dotdot": "notes/%2e%2e/x",
    "backslash": "notes/a\\..\\x",
    "mixed-separators": "notes\\x/y",
    "not-a-root": "etc/passwd",
    "too-deep": "notes/" + "/".join("a" * 9),
    "control-char": "notes/a\x1bb",
    "newline": "notes/a\nb",
    "nul": "notes/a\x00",
    "md-suffix": "notes/x.md",
    "space": "notes/a b",
    "unicode-nfc": "notes/" + unicodedata.normalize("NFC", "café"),
    "unicode-nfd": "notes/" + unicodedata.normalize("NFD", "café"),
    "fullwidth-slash": "notes/a\uff0fb",
    "hidden": "notes/.git",
    "windows-drive": "notes/C:x",
}


@pytest.mark.parametrize("bad", list(BAD_PATH_IDS.values()), ids=list(BAD_PATH_IDS))
def test_bad_path_id_is_refused_by_api_and_cli(any_store: Store, bad: str) -> None:
    before = tip(any_store)
    for call in (
        lambda: any_store.create("x", id=bad),
        lambda: any_store.read(bad),
        lambda: any_store.update(bad, "x"),
        lambda: any_store.delete(bad),
        lambda: any_store.history(bad),
    ):
        with pytest.raises((InvalidIdError, NotFoundError)):
            call()
    assert tip(any_store) == before
    if "\x00" not in bad:  # argv cannot carry a NUL
        run = Gitmem(any_store.path, make_runner())
        result = run("show", bad, code=4 if _refused_id(bad) else 3)
        one_error_line(result.stderr)


def _refused_id(value: str) -> bool:
    try:
        layout.check_id(value)
    except InvalidIdError:
        return True
    return False


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        ("mem_0123", False),
        ("a" * layout.MAX_ID_LENGTH, False),
        ("a" * (layout.MAX_ID_LENGTH + 1), True),
        ("a..b", True),
        ("a.b-c_d", False),
        ("x.MD", True),
        ("x.md", True),
        ("_x", True),
        ("-x", True),
        ("a%2e", True),
        ("a\n", True),
        ("a\u200bb", True),
        ("caf\u00e9", True),
        ("", True),
    ],
)
def test_plain_id_boundaries(value: str, refused: bool) -> None:
    # check_id settles the common plain id with one regex before its full checks: both
    # must agree at every edge (length, dots, suffix in any case, first character,
    # invisible and non-ASCII characters).
    assert _refused_id(value) is refused


def test_names_that_differ_only_by_case_are_refused(any_store: Store) -> None:
    any_store.create("lower", id="notes/acme/readme")
    before = tip(any_store)
    with pytest.raises(AlreadyExistsError, match="differs only in case from notes/acme/readme"):
        any_store.create("upper", id="notes/acme/README")
    with pytest.raises(AlreadyExistsError, match="from notes/acme,"):
        any_store.create("folder twin", id="notes/ACME/other")
    with pytest.raises(InvalidIdError):  # roots are lowercase: NOTES/ is no path id at all
        any_store.create("root twin", id="NOTES/x")
    assert tip(any_store) == before
    any_store.create("a sibling", id="notes/acme/readme-2")  # more than case differs


def test_case_twins_inside_one_transaction(store: Store) -> None:
    before = tip(store)
    with pytest.raises(AlreadyExistsError), store.transaction("two") as tx:
        tx.create("a", id="skills/deploy/Checklist")
        tx.create("b", id="skills/deploy/checklist")
    assert tip(store) == before


def test_plain_id_case_twins_collide_only_in_the_same_shard(store: Store) -> None:
    # Plain ids shard by a hash, so "Note"/"note" usually live in different folders and
    # cannot collide; find a pair that lands in the same folder (two hex digits of the
    # hash) to see the refusal.
    same = next(
        w
        for w in (f"id{n}x" for n in itertools.count())
        if layout.shard(w) == layout.shard(w.upper()) and w != w.upper()
    )
    store.create("lower", id=same)
    with pytest.raises(AlreadyExistsError, match="differs only in case"):
        store.create("upper", id=same.upper())
    other = next(
        w for w in ("Note", "Memo", "Fact") if layout.shard(w) != layout.shard(w.lower())
    )
    store.create("a", id=other)
    store.create("b", id=other.lower())


def test_unicode_normalisation_twins_cannot_exist(store: Store) -> None:
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        with pytest.raises(InvalidIdError):
            store.create("x", id=unicodedata.normalize(form, "caf\u00e9"))


# -- symbolic links ------------------------------------------------------------------------


def test_a_linked_directory_in_the_work_tree_is_never_written_through(
    store: Store, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.path / "projects").symlink_to(outside, target_is_directory=True)
    run_git(store.path, "add", "projects")
    run_git(store.path, "commit", "-qm", "a link to a folder outside")
    before = tip(store)
    with pytest.raises(GitmemError):
        store.create("through the link", id="projects/acme/notes")
    with pytest.raises(NotFoundError):
        store.read("projects/acme/notes")
    assert store.documents("projects", recursive=True) == []
    assert list(outside.iterdir()) == []
    assert tip(store) == before


def test_a_link_committed_in_a_bare_store_is_never_followed(
    bare_store: Store, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "acme").mkdir(parents=True)
    (outside / "acme" / "x.md").write_text(memory_text("projects/acme/x", "outside\n"))

    repo = bare_store.db().repo
    link = repo.create_blob(str(outside).encode())
    builder = repo.TreeBuilder(repo[repo.head.target].tree)
    builder.insert("projects", link, pygit2.enums.FileMode.LINK)
    tree = builder.write()
    sig = pygit2.Signature("t", "t@example.com")
    repo.create_commit("refs/heads/main", sig, sig, "link", tree, [repo.head.target])
    with pytest.raises(NotFoundError):
        bare_store.read("projects/acme/x")
    assert bare_store.list() == []
    with contextlib.suppress(GitmemError):  # refused, or stored in git beside nothing
        bare_store.create("beside the link", id="projects/acme/y")
    assert sorted(p.name for p in (outside / "acme").iterdir()) == ["x.md"]
    run_git(bare_store.db().gitdir, "fsck", "--strict", "--no-progress")


# -- properties ----------------------------------------------------------------------------

_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
_ID_PARTS = st.text(alphabet=string.ascii_letters + string.digits + "._-/\\%:~ \x00\n", max_size=30)


@given(value=st.one_of(_TEXT, _ID_PARTS, st.sampled_from(list(BAD_PATH_IDS.values()))))
@settings(max_examples=400, deadline=None)
def test_property_layout_maps_ids_and_paths_both_ways(value: str) -> None:
    try:
        memory_id = layout.check_id(value)
    except InvalidIdError as exc:
        assert str(exc)
        return
    path = layout.memory_path(memory_id)
    parts = path.split("/")
    assert parts[0] in layout.MEMORY_ROOTS
    assert all(p and p not in {".", ".."} and "\\" not in p for p in parts)
    assert not path.startswith("/") and path.endswith(".md")
    assert layout.id_from_path(path) == memory_id
    assert Path("/store", path).resolve().is_relative_to("/store")


@given(path=st.one_of(_TEXT, _ID_PARTS.map(lambda s: f"notes/{s}.md")))
@settings(max_examples=300, deadline=None)
def test_property_any_path_names_at_most_one_id(path: str) -> None:
    memory_id = layout.id_from_path(path)
    if memory_id is not None:
        assert layout.memory_path(memory_id) == path


_FRONT = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=8,
)


@given(
    raw=st.one_of(
        st.binary(max_size=300),
        _TEXT.map(lambda t: f"---\n{t}\n---\nbody\n".encode()),
        st.dictionaries(_TEXT, _FRONT, max_size=5).map(
            lambda d: b"---\n" + yaml.safe_dump(d).encode() + b"---\nbody\n"
        ),
    )
)
@_SETTINGS
def test_property_any_file_in_the_store_reads_or_fails_cleanly(
    bare_store: Store, raw: bytes
) -> None:
    """Random bytes committed at a memory path: every reader ends in a result or a GitmemError."""
    path = memory_path(PLANTED)
    put_raw(bare_store, path, raw)
    try:
        bare_store.read(PLANTED)
    except GitmemError as exc:
        assert str(exc)
    listed = {m.id for m in bare_store.list(include_superseded=True, include_archived=True)}
    problems = {p.path for p in bare_store.problems()}
    assert (PLANTED in listed) != (path in problems)  # a memory, or a named problem
    bare_store.search("body")
    report = D.diagnose(bare_store, checks=["index", "schema", "links", "chains"])
    assert not [f for f in report.findings if f.check == "index"]


@given(
    metadata=st.dictionaries(
        st.sampled_from(["title", "category", "agent", "notes", "x-custom"]), _TEXT, max_size=4
    ),
    body=_TEXT,
)
@_SETTINGS
def test_property_what_the_store_writes_it_reads_back(
    bare_store: Store, metadata: dict[str, str], body: str
) -> None:
    fields: dict[str, Any] = {
        k: v for k, v in metadata.items() if k in {"title", "category", "agent"}
    }
    extra = {k: v for k, v in metadata.items() if k not in fields}
    try:
        with bare_store.secrets_allowed():
            memory = bare_store.create(body, extra=extra or None, **fields)
    except GitmemError as exc:
        assert str(exc)
        return
    again = bare_store.read(memory.id)
    assert again.body == memory.body and again.to_dict() == memory.to_dict()
    data = bare_store.db().snapshot().read(memory.path or "")
    assert data is not None
    assert codec.parse(data.decode("utf-8")).body == memory.body


_COMMANDS = [
    "add",
    "show",
    "update",
    "append",
    "rm",
    "restore",
    "history",
    "ls",
    "search",
    "log",
    "supersede",
    "stale",
    "doctor",
    "secrets",
    "gc",
    "reindex",
]
_ARG = st.one_of(
    st.sampled_from(
        [
            "--json",
            "--title",
            "--tag",
            "--related",
            "--status",
            "-m",
            "--at",
            "--scope",
            "--regex",
            "--limit",
            "-",
            "--check",
            "--all",
            "archived",
            "mem_x",
            "notes/a",
            "../x",
            "%2e%2e",
            "",
            "0",
            "-1",
            "99999999999999999999",
        ]
    ),
    _TEXT.filter(lambda t: "\x00" not in t),
)


@given(
    command=st.sampled_from(_COMMANDS),
    args=st.lists(_ARG, max_size=4),
    stdin=st.binary(max_size=40),
)
@_SETTINGS
def test_property_the_command_line_never_shows_a_traceback(
    bare_store: Store,
    command: str,
    args: list[str],
    stdin: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path argument names nothing outside the test
    if command in {"doctor", "gc", "reindex"} and "--fix" in args:
        return
    runner = make_runner()
    result = runner.invoke(
        gitmem_cli, ["--store", str(bare_store.path), command, *args], input=stdin
    )
    assert result.exit_code in DOCUMENTED_CODES, (command, args, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        command,
        args,
        repr(result.exception),
    )
    assert "Traceback" not in result.stderr + result.stdout
    if result.exit_code not in (0, 1, 2):
        one_error_line(result.stderr)


def test_gitmem_open_on_hostile_store_paths(tmp_path: Path) -> None:
    for bad in (tmp_path / "missing", tmp_path / "file.txt"):
        if bad.name.endswith(".txt"):
            bad.write_text("not a store")
        with pytest.raises(GitmemError):
            gitmem.open(bad)


@pytest.mark.parametrize("agent", [":", "<>", "..", "a<b>c", "'\"", "<ada@example.com>"])
def test_any_agent_text_makes_a_valid_commit(any_store: Store, agent: str) -> None:
    """git refuses author names that are only punctuation or hold angle brackets; the agent
    is kept exactly in the front-matter and the Gitmem-Agent trailer, the author is derived."""
    memory = any_store.create("x", agent=agent)
    assert any_store.read(memory.id).agent == agent
    entry = any_store.log(limit=1)[0]
    assert entry.agent == agent
    run_git(any_store.db().gitdir, "fsck", "--strict", "--no-progress")


# -- reproduction 7: writes refuse whatever reads cannot read ----------------------------------


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [31, 32, 40, 5000])
def test_a_value_nested_deeper_than_the_reader_takes_is_refused_on_write(
    bare_store: Store, depth: int
) -> None:
    """``extra={"a": <list nested 40 deep>}`` was stored, then every read and update failed."""
    before = tip(bare_store)
    if depth <= MAX_DEPTH - 1:
        memory = bare_store.create("deep but readable", extra={"a": _nested(depth)})
        assert bare_store.read(memory.id).extra == {"a": _nested(depth)}
        bare_store.update(memory.id, title="still readable")
        return
    with pytest.raises(InvalidMemoryError, match="field 'a' is nested more than 31 levels"):
        bare_store.create("too deep", extra={"a": _nested(depth)})
    assert tip(bare_store) == before
    memory = bare_store.create("shallow")
    with pytest.raises(InvalidMemoryError, match="field 'a' is nested"):
        bare_store.update(memory.id, extra={"a": _nested(depth)})
    assert bare_store.read(memory.id).extra == {}


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.dates(),
    st.datetimes(timezones=st.none() | st.just(dt.UTC)),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=40,
)
_EXTRA_KEYS = st.text(min_size=1, max_size=12).filter(lambda k: k not in KNOWN_KEYS)


def _deepen(value: Any, times: int) -> Any:
    for _ in range(times):
        value = [value]
    return value


@given(
    extra=st.dictionaries(
        _EXTRA_KEYS,
        st.tuples(_VALUES, st.integers(0, 36)).map(lambda t: _deepen(*t)),
        min_size=1,
        max_size=3,
    ),
    title=st.text(max_size=40),
    body=st.text(max_size=80),
)
@pytest.mark.slow
@_SETTINGS
def test_property_anything_create_accepts_read_returns_equal(
    bare_store: Store, extra: dict[str, Any], title: str, body: str
) -> None:
    try:
        with bare_store.secrets_allowed():
            memory = bare_store.create(body, title=title or None, extra=extra)
    except GitmemError as exc:
        assert str(exc) and "unexpected" not in str(exc)
        return
    again = bare_store.read(memory.id)
    assert again.body == memory.body
    assert again.title == memory.title
    assert codec.same(again.extra, memory.extra) or again.extra == memory.extra
    with bare_store.secrets_allowed():
        bare_store.update(memory.id, title="updated")
    assert bare_store.read(memory.id).title == "updated"
