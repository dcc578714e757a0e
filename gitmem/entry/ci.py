"""CI recipes that review memory changes on every pull request (``gitmem ci init``).

Each recipe runs ``gitmem review BASE...HEAD --strict`` in the store's own repository on a
hosted CI, posts the report as one comment cut to the host's limit (problems first, then what
fits, then a count of what was left out), keeps the whole report as a job artifact, and fails
the job when the review found problems (exit 8) or gitmem itself failed (any other code).

The recipes are plain files the user reviews and commits; nothing here talks to a host.
The review step of each is a shell script of its own (:data:`GITHUB_REVIEW_STEP`,
:data:`GITLAB_SCRIPT`), so the test suite runs exactly what CI runs, on a local clone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gitmem.base.errors import AlreadyExistsError, InvalidInputError

__all__ = ["HOSTS", "Recipe", "Written", "recipe", "write_recipe"]

GITHUB_LIMIT = 65_536
"""GitHub's limit on a pull-request comment, in characters."""
GITLAB_LIMIT = 1_000_000
"""GitLab's limit on a merge-request note, in characters."""


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in text.splitlines(True))


GITHUB_REVIEW_STEP = f"""\
set +e
gitmem --store . review "origin/${{GITHUB_BASE_REF}}...HEAD" --strict \\
  --max-chars {GITHUB_LIMIT} --full-report gitmem-review-full.md > gitmem-review.md
status=$?
echo "status=$status" >> "$GITHUB_OUTPUT"
# 0: clean; 8: the review found problems (the comment says which); anything else: gitmem failed.
if [ "$status" != 0 ] && [ "$status" != 8 ]; then exit "$status"; fi
exit 0
"""

GITHUB_WORKFLOW = (
    f"""\
# gitmem: review memory changes on every pull request (written by `gitmem ci init --host github`).
# Posts one comment (cut to GitHub's {GITHUB_LIMIT:,}-character limit, problems first), keeps
# the whole report as an artifact, and fails when the review finds problems (exit 8).
name: gitmem review
on: pull_request
permissions:
  contents: read
  pull-requests: write
jobs:
  review:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0            # the whole history: the review reads the range
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - run: pip install gitmem-store
      - name: review
        id: review
        run: |
"""
    + _indent(GITHUB_REVIEW_STEP, 10)
    + """\
      - name: artifact
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: gitmem-review
          path: gitmem-review-full.md
      - name: comment
        if: always() && hashFiles('gitmem-review.md') != ''
        env:
          GH_TOKEN: ${{ github.token }}
        run: gh pr comment "${{ github.event.pull_request.number }}" --body-file gitmem-review.md
      - name: gate
        if: steps.review.outputs.status != '0'
        run: |
          echo "gitmem review found problems (exit ${{ steps.review.outputs.status }})"
          exit 1
"""
)

GITLAB_SCRIPT = f"""\
git fetch -q origin "$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
status=0
gitmem --store . review "origin/${{CI_MERGE_REQUEST_TARGET_BRANCH_NAME}}...HEAD" --strict \\
  --max-chars {GITLAB_LIMIT} --full-report gitmem-review-full.md > gitmem-review.md || status=$?
# A project access token with the api scope, as a masked CI/CD variable, lets the job comment.
if [ -n "${{GITMEM_REVIEW_TOKEN:-}}" ] && [ -s gitmem-review.md ]; then
  curl --fail -sS -X POST -H "PRIVATE-TOKEN: $GITMEM_REVIEW_TOKEN" \\
    --data-urlencode "body@gitmem-review.md" \\
    "$CI_API_V4_URL/projects/$CI_PROJECT_ID/merge_requests/$CI_MERGE_REQUEST_IID/notes" > /dev/null
fi
# 0: clean; 8: the review found problems; anything else: gitmem failed.
exit "$status"
"""

GITLAB_JOB = (
    """\
# gitmem: review memory changes on every merge request (written by `gitmem ci init --host gitlab`).
# Include it from .gitlab-ci.yml:   include: [{local: .gitlab/gitmem-review.yml}]
gitmem-review:
  image: python:3.12
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
  variables:
    GIT_DEPTH: "0"                  # the whole history: the review reads the range
  before_script:
    - pip install gitmem-store
  script:
    - |
"""
    + _indent(GITLAB_SCRIPT, 6)
    + """\
  artifacts:
    when: always
    paths:
      - gitmem-review.md
      - gitmem-review-full.md
"""
)

GITLAB_INCLUDE = "include:\n  - local: .gitlab/gitmem-review.yml\n"


@dataclass(frozen=True)
class Recipe:
    host: str
    path: str
    """Where the file goes, relative to the repository root."""
    text: str
    script: str
    """The review step as a shell script: what the suite runs locally."""


HOSTS: dict[str, Recipe] = {
    "github": Recipe(
        "github", ".github/workflows/gitmem-review.yml", GITHUB_WORKFLOW, GITHUB_REVIEW_STEP
    ),
    "gitlab": Recipe("gitlab", ".gitlab/gitmem-review.yml", GITLAB_JOB, GITLAB_SCRIPT),
}


def recipe(host: str) -> Recipe:
    try:
        return HOSTS[host]
    except KeyError:
        raise InvalidInputError(
            f"no CI recipe for {host!r}; known hosts: {', '.join(HOSTS)}"
        ) from None


@dataclass(frozen=True)
class Written:
    files: list[Path]
    todo: str | None = None
    """What is left for the user to do by hand, if anything."""


def write_recipe(root: str | Path, host: str, *, force: bool = False) -> Written:
    """Write ``host``'s recipe under ``root``; returns the files written and what is left.

    An existing file is refused unless ``force``. For GitLab, a missing ``.gitlab-ci.yml``
    is created with the include; an existing one is left alone (the caller prints the
    include line to add), since rewriting someone's pipeline is not ours to do.
    """
    chosen = recipe(host)
    base = Path(root)
    if not base.is_dir():
        raise InvalidInputError(f"{base} is not a directory")
    target = base / chosen.path
    if target.exists() and not force:
        raise AlreadyExistsError(
            f"{target} already exists", hint="look at it, then rerun with --force to replace it"
        )
    written: list[Path] = []
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(chosen.text, encoding="utf-8")
    written.append(target)
    todo = None
    if host == "gitlab":
        pipeline = base / ".gitlab-ci.yml"
        if not pipeline.exists():
            pipeline.write_text(GITLAB_INCLUDE, encoding="utf-8")
            written.append(pipeline)
        elif chosen.path not in pipeline.read_text(encoding="utf-8", errors="replace"):
            todo = f"add to .gitlab-ci.yml:  include: [{{local: {chosen.path}}}]"
    return Written(written, todo)
