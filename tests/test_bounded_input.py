"""Input of any size is refused in the memory of the store's limit: stdin and --jsonl files
are read up to the bound and one byte more, then refused (issue 40, item 5)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner, one_line_error

import gitmem
from gitmem import Store

MB = 1024 * 1024
HUGE = 200 * MB  # what `head -c 200M /dev/zero | tr '\0' a | gitmem add -` sends
PEAK_KB = 200 * 1024  # ru_maxrss is in KiB on Linux; reading it whole peaked near 1 GB


# Runs gitmem as its child and prints the child's peak RSS: measured from a small parent, as
# a child forked from the test's (a worker grown to hundreds of MB) would start at its size.
MEASURE = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "gitmem", *sys.argv[1:]])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(done.returncode)
"""


def _feed(args: list[str], chunks: Iterator[bytes]) -> tuple[int, str, int]:
    """Run ``gitmem ARGS`` with ``chunks`` on its stdin, as a generator pipe would send them
    (stopping when gitmem closes the pipe); its exit code, stderr and peak RSS in KiB."""
    with subprocess.Popen(
        [sys.executable, "-c", MEASURE, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            for chunk in chunks:
                proc.stdin.write(chunk)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        err, out = proc.stderr.read(), proc.stdout.read()  # a line each
    return proc.returncode, err.decode(), int(out.split()[-1])


def _as(total: int, first: bytes = b"") -> Iterator[bytes]:
    yield first
    block = b"a" * MB
    for _ in range(total // MB):
        yield block


@pytest.mark.parametrize(
    "args, first",
    [
        (["add", "-"], b""),
        (["add", "-", "--title", "big"], b""),
        (["add", "--jsonl", "-"], b'{"body": "'),
        (["layer", "create", "project", "notes", "-p", "big", "--content", "-"], b""),
    ],
    ids=["add", "add-titled", "jsonl", "layer"],
)
def test_huge_stdin_is_refused_in_flat_memory(
    store: Store, args: list[str], first: bytes
) -> None:
    code, err, peak_kb = _feed(["--store", str(store.path), *args], _as(HUGE, first))
    assert code == 4, err
    line = one_line_error(err)
    assert "over" in line and "limits.max_body_bytes" in line
    assert "mem_" not in line  # no id is named: nothing was stored
    assert peak_kb < PEAK_KB, f"peak RSS {peak_kb} KiB"
    assert store.list() == []


def test_a_huge_jsonl_file_is_refused_in_flat_memory(store: Store, tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:
        for chunk in _as(HUGE, b'{"body": "'):
            fh.write(chunk)
    code, err, peak_kb = _feed(["--store", str(store.path), "add", "--jsonl", str(big)], iter(()))
    assert code == 4, err
    assert "line 1 of " in one_line_error(err)
    assert peak_kb < PEAK_KB, f"peak RSS {peak_kb} KiB"


def test_the_limit_itself_is_taken_and_one_byte_more_is_not(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    limit = store.config().max_body_bytes
    gm = Gitmem(store.path, make_runner())
    gm("add", "-", input=b"a" * limit)
    line = gm.fails(4, "add", "-", input=b"a" * (limit + 1))
    assert f"limit of {limit} bytes" in line and "mem_" not in line
    assert len(store.list()) == 1


def test_the_library_names_no_new_id_over_the_limit(store: Store) -> None:
    limit = store.config().max_body_bytes
    with pytest.raises(gitmem.TooLargeError) as err:
        store.create("a" * (limit + 1))
    assert "mem_" not in err.value.message
    assert f"is {limit + 1} bytes, over the store's limit of {limit}" in err.value.message
