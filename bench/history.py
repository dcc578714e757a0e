"""What ``gitmem history`` and ``gitmem log`` cost on a memory with many versions:
``python -m bench.history [VERSIONS]`` (default 100,000).

The versions are written with ``git fast-import`` (one commit each, as gitmem writes
them); each command then runs in a process of its own, after ``ls`` caught the index up,
and its wall time and peak RSS (of the process and its git children) are printed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gitmem

PROBE = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "gitmem", *sys.argv[1:]], stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def build(root: Path, versions: int) -> str:
    store = gitmem.init(root)
    memory_id = store.create("version 0", title="many").id
    path = f"memories/{memory_id[4:6]}/{memory_id}.md"
    tip = subprocess.run(
        ["git", "rev-parse", "main"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    chunks = [f"reset refs/heads/main\nfrom {tip}\n\n".encode()]
    for n in range(1, versions + 1):
        body = (
            f"---\nid: {memory_id}\ntitle: many\ncreated_at: 2026-11-22T09:00:00Z\n---\n\n"
            f"version {n}\n"
        ).encode()
        message = f"update: many\n\nGitmem-Op: update\nGitmem-Id: {memory_id}\n".encode()
        chunks.append(
            b"commit refs/heads/main\ncommitter b <b@b> %d +0000\ndata %d\n%s\n"
            b"M 100644 inline %s\ndata %d\n%s\n"
            % (1795000000 + n, len(message), message, path.encode(), len(body), body)
        )
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=b"".join(chunks),
                   check=True)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=root, check=True)
    return memory_id


def run(root: Path, *args: str) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, "--store", str(root), *args],
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - start, int(done.stdout)


def main() -> None:
    versions = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        memory_id = build(root, versions)
        run(root, "ls")
        for args in (["history", memory_id], ["history", memory_id, "--page", "500"],
                     ["log", "-n", "100"]):
            seconds, kib = run(root, *args)
            print(f"{' '.join(args[:1] + args[2:]):<24} {seconds:7.2f} s {kib / 1024:7.1f} MiB")


if __name__ == "__main__":
    main()
