"""The Python a single create runs besides writing objects, in CPU per create (issue 17).

``bench.createcpu`` compares whole creates with the bare-pygit2 floor, and on a loaded
machine the system time of the object writes moves its figures more than a change to
gitmem's own Python can. This times only that Python, in one process, with
``time.process_time``: the caller's fields checked (``Store._fields``, ``Store._body``), the
``Memory`` built, the file encoded under the built-in secret policy (``memfile.encode``:
depth, secrets, schema, YAML, the read-back check), the commit message scanned, and the
author and committer read from git's config, as ``Store.create`` and the commit do::

    python -m bench.createpy --ops 5000

``--policy`` adds a ``secrets`` section to the store's ``gitmem.yaml`` (a custom pattern and
an allow-list), whose policy the store then compiles.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import pygit2

from bench.fixtures import fields_for, populate

_POLICY = """secrets:
  patterns:
    - kind: acme-token
      regex: 'acme_[A-Za-z0-9]{32}'
  allow: ['AKIA[A-Z0-9]{12}EXAMPLE']
"""


def _commit_policy(path: Path) -> None:
    """Commit ``_POLICY`` at the end of the store's gitmem.yaml, with bare pygit2."""
    repo = pygit2.Repository(str(path))
    ref = repo.lookup_reference("refs/heads/main")
    parent = repo[ref.target].peel(pygit2.Commit)
    blob = repo[parent.tree["gitmem.yaml"].id].peel(pygit2.Blob)
    builder = repo.TreeBuilder(parent.tree)
    new = repo.create_blob(blob.data + _POLICY.encode())
    builder.insert("gitmem.yaml", new, pygit2.enums.FileMode.BLOB)
    who = pygit2.Signature("bench", "bench@bench.invalid")
    commit = repo.create_commit(None, who, who, "secrets policy", builder.write(), [parent.id])
    ref.set_target(commit, "bench: secrets policy")


def main(argv: list[str] | None = None) -> int:
    import gitmem
    from gitmem.base.clock import SystemClock
    from gitmem.format import memfile, secrets
    from gitmem.format.layout import memory_path, new_id
    from gitmem.format.model import Memory
    from gitmem.store.checks import memory_fields

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--policy", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    kind = "custom" if args.policy else "built-in"
    print(f"load average {os.getloadavg()[0]:.2f}; secret policy: {kind}")
    with tempfile.TemporaryDirectory(prefix="gitmem-createpy-") as tmp:
        path = Path(tmp) / "store.git"
        populate(path, 100, bare=True, rng=rng)
        if args.policy:
            _commit_policy(path)
        store = gitmem.open(path)
        backend = store._backend(None)
        db = backend.db
        pool = [fields_for(5000 + i, rng) for i in range(200)]
        names = ("title", "category", "tags", "related", "agent", "session_id")
        now = SystemClock().now()

        def create(n: int) -> None:
            given = pool[n % len(pool)].create_kwargs()
            fields = store._fields({k: given.get(k) for k in names})
            memory_id = new_id()
            memory = Memory(
                id=memory_id,
                body=store._body(pool[n % len(pool)].body),
                created_at=now,
                updated_at=now,
                version=1,
                scope=backend.scope,
                path=memory_path(memory_id),
                store_scope=backend.scope,
                **memory_fields(fields),
            )
            policy = store._secret_policy(backend)
            memfile.encode(memory, max_body_bytes=backend.config.max_body_bytes, policy=policy)
            secrets.refuse_commit_message(
                f"create: {memory.title}",
                None,
                [("Gitmem-Op", "create"), ("Gitmem-Id", memory_id)],
                store._secret_policy(backend),
            )
            db.default_author()
            db.committer()

        for n in range(len(pool)):  # warm: imports, compiled patterns and schema
            create(n)
        per = []
        each = max(1, args.ops // args.repeat)
        for _ in range(args.repeat):
            start = time.process_time()
            for n in range(each):
                create(n)
            per.append((time.process_time() - start) / each * 1e6)
    print(
        f"µs CPU per create (gitmem's Python besides object writes): "
        f"min {min(per):,.1f}, median {statistics.median(per):,.1f} "
        f"({args.repeat} repeats of {each}); load average at the end {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
