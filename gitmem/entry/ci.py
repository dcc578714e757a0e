"""CI recipes for pull requests (``gitmem ci init``): files the user commits.

The review recipe runs ``gitmem review BASE...HEAD --strict``, posts the report as one
comment, keeps the whole as an artifact and fails on problems (exit 8); the update-branch
recipe merges the base into a pull request's branch with gitmem's merge when plain git
cannot. Their steps are shell scripts of their own, which the tests run on a local clone.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from gitmem.base.errors import AlreadyExistsError, InvalidInputError

GITHUB_LIMIT = 65_536
"""GitHub's limit on a pull-request comment, in characters."""
GITLAB_LIMIT = 1_000_000
"""GitLab's limit on a merge-request note, in characters."""


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
    + textwrap.indent(GITHUB_REVIEW_STEP, " " * 10)
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
    + textwrap.indent(GITLAB_SCRIPT, " " * 6)
    + """\
  artifacts:
    when: always
    paths:
      - gitmem-review.md
      - gitmem-review-full.md
"""
)

GITHUB_UPDATE_STEP = """\
set -eu
# Never a fork's branch (the job's `if:` says so too): see the top of this file.
if [ "${GITMEM_HEAD_REPO:-}" != "$GITHUB_REPOSITORY" ]; then
  echo "gitmem: the pull request comes from ${GITMEM_HEAD_REPO:-another repository}: left alone"
  exit 0
fi
git config user.name "github-actions[bot]"
git config user.email "41898282+github-actions[bot]@users.noreply.github.com"
git fetch --no-tags --quiet origin \\
  "+refs/heads/${GITHUB_BASE_REF}:refs/remotes/origin/${GITHUB_BASE_REF}"
before=$(git rev-parse HEAD)
gitmem --store . update-branch "origin/${GITHUB_BASE_REF}" --head "${GITHUB_HEAD_REF}" \\
  --if-conflicting
# Nothing merged (already in, or plain git merges it): nothing to push, and so no new run.
if [ "$(git rev-parse HEAD)" = "$before" ]; then exit 0; fi
# Never forced: a branch that moved since the checkout refuses it, and the run its new
# commit started does the work.
git push origin "HEAD:refs/heads/${GITHUB_HEAD_REF}"
"""

GITHUB_UPDATE_WORKFLOW = (
    """\
# gitmem: bring the base into each pull request's branch with gitmem's memory-aware merge,
# when plain git cannot (written by `gitmem ci init --host github --update-branch`), so the
# merge button sees a clean merge. pull_request_target: GitHub starts no pull_request
# workflow for a pull request with conflicts. Forks are skipped: this token can write here.
# For the review to run on the merge commit, set a token with contents read and write as the
# secret GITMEM_PUSH_TOKEN. gitmem's docs/collaboration.md explains each choice.
name: gitmem update branch
on:
  pull_request_target:
    types: [opened, synchronize, reopened]
permissions:
  contents: write
concurrency:
  group: gitmem-update-branch-${{ github.event.pull_request.number }}
jobs:
  update-branch:
    if: github.event.pull_request.head.repo.full_name == github.repository
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.ref }}   # the branch, not a merge commit
          fetch-depth: 0
          token: ${{ secrets.GITMEM_PUSH_TOKEN || github.token }}
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - run: pip install gitmem-store
      - name: update branch
        env:
          GITMEM_HEAD_REPO: ${{ github.event.pull_request.head.repo.full_name }}
        run: |
"""
    + textwrap.indent(GITHUB_UPDATE_STEP, " " * 10)
)

GITLAB_UPDATE_SCRIPT = """\
set -eu
# Never a fork's branch (the rule says so too): see the top of this file.
if [ "$CI_MERGE_REQUEST_SOURCE_PROJECT_ID" != "$CI_MERGE_REQUEST_PROJECT_ID" ]; then
  echo "gitmem: the merge request comes from a fork: left alone"
  exit 0
fi
base="$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
head="$CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"
git config user.name "${GITLAB_USER_NAME:-gitmem CI}"
git config user.email "${GITLAB_USER_EMAIL:-gitmem-ci@gitlab.invalid}"
git fetch --no-tags --quiet origin "+refs/heads/$base:refs/remotes/origin/$base"
before=$(git rev-parse HEAD)
# The runner checks out a detached HEAD; --head names the branch to attach it to.
gitmem --store . update-branch "origin/$base" --head "$head" --if-conflicting
# Nothing merged (already in, or plain git merges it): nothing to push, and so no new run.
if [ "$(git rev-parse HEAD)" = "$before" ]; then exit 0; fi
if [ -z "${GITMEM_PUSH_TOKEN:-}" ]; then
  echo "gitmem: merged $base into $head, but cannot push it: set GITMEM_PUSH_TOKEN" >&2
  exit 1
fi
# The job token cannot push; the project access token can. Never forced.
push_url=$(printf '%s' "$CI_REPOSITORY_URL" | sed "s#://[^@/]*@#://oauth2:${GITMEM_PUSH_TOKEN}@#")
git push "$push_url" "HEAD:refs/heads/$head"
"""

GITLAB_UPDATE_JOB = (
    """\
# gitmem: bring the target branch into each merge request's branch with gitmem's
# memory-aware merge, when plain git cannot (written by `gitmem ci init --host gitlab
# --update-branch`). Include it from .gitlab-ci.yml:
#   include: [{local: .gitlab/gitmem-update-branch.yml}]
# Pushing needs a project access token with the write_repository scope as the masked CI/CD
# variable GITMEM_PUSH_TOKEN. Forks are skipped. gitmem's docs/collaboration.md explains more.
gitmem-update-branch:
  image: python:3.12
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
        && $CI_MERGE_REQUEST_SOURCE_PROJECT_ID == $CI_MERGE_REQUEST_PROJECT_ID
  variables:
    GIT_DEPTH: "0"                  # the whole history: the merge needs the merge base
    GIT_STRATEGY: clone             # a fresh clone: no branch left behind by an earlier job
  before_script:
    - pip install gitmem-store
  script:
    - |
"""
    + textwrap.indent(GITLAB_UPDATE_SCRIPT, " " * 6)
)


@dataclass(frozen=True)
class Recipe:
    path: str
    """Where the file goes, relative to the repository root."""
    text: str


HOSTS = {
    "github": Recipe(".github/workflows/gitmem-review.yml", GITHUB_WORKFLOW),
    "gitlab": Recipe(".gitlab/gitmem-review.yml", GITLAB_JOB),
}
UPDATE_BRANCH = {
    "github": Recipe(".github/workflows/gitmem-update-branch.yml", GITHUB_UPDATE_WORKFLOW),
    "gitlab": Recipe(".gitlab/gitmem-update-branch.yml", GITLAB_UPDATE_JOB),
}
"""The recipes ``--update-branch`` adds: bring the base into a pull request's branch."""


@dataclass(frozen=True)
class Written:
    files: list[Path]
    todo: str | None = None
    """What is left for the user to do by hand, if anything."""
    unchanged: list[Path] = field(default_factory=list)
    """Recipes already there word for word: left as they are."""


def _gitlab_include(paths: list[str]) -> str:
    return "include:\n" + "".join(f"  - local: {path}\n" for path in paths)


def write_recipe(
    root: str | Path, host: str, *, force: bool = False, update_branch: bool = False
) -> Written:
    """Write ``host``'s recipes under ``root``: a file that differs is refused unless
    ``force``. GitLab's ``.gitlab-ci.yml`` is written only when missing or holding only our
    includes; otherwise the include lines to add are returned as ``todo``."""
    chosen = [HOSTS[host]] + ([UPDATE_BRANCH[host]] if update_branch else [])
    base = Path(root)
    if not base.is_dir():
        raise InvalidInputError(f"{base} is not a directory")
    targets = [(base / r.path, r) for r in chosen]
    for target, r in targets:
        if target.exists() and not force and _read(target) != r.text:
            raise AlreadyExistsError(
                f"{target} already exists", hint="look at it, then rerun with --force to replace it"
            )
    written: list[Path] = []
    unchanged: list[Path] = []
    for target, r in targets:
        if target.exists() and _read(target) == r.text:
            unchanged.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(r.text, encoding="utf-8")
        written.append(target)
    todo = None
    if host == "gitlab":
        pipeline = base / ".gitlab-ci.yml"
        ours = [HOSTS[host].path, UPDATE_BRANCH[host].path]
        wanted = [r.path for r in chosen]
        current = _read(pipeline) if pipeline.exists() else None
        keep = [p for p in ours if current is not None and p in current]
        # Missing, or holding only includes this command wrote before: ours to extend.
        if current is None or current == _gitlab_include(keep):
            text = _gitlab_include(keep + [p for p in wanted if p not in keep])
            if text != current:
                pipeline.write_text(text, encoding="utf-8")
                written.append(pipeline)
        elif missing := [f"{{local: {p}}}" for p in wanted if p not in current]:
            todo = f"add to .gitlab-ci.yml:  include: [{', '.join(missing)}]"
    return Written(written, todo, unchanged)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")
