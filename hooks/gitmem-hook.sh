#!/bin/sh
# gitmem-hook: @HOOK@ (@ROLE@ repository)
# Installed by `gitmem hooks install`; `gitmem hooks uninstall` removes it and puts
# back the hook it replaced (kept beside it as @HOOK@.pre-gitmem, and still run first).
hook='@HOOK@'
role='@ROLE@'
python='@PYTHON@'
here=$(dirname "$0")
status=0
# git feeds pre-receive its ref lines on stdin, once: kept to hand to both hooks.
refs=
if [ "$hook" = pre-receive ]; then refs=$(cat); fi
if [ -x "$here/$hook.pre-gitmem" ]; then
    if [ "$hook" = pre-receive ]; then
        printf '%s\n' "$refs" | "$here/$hook.pre-gitmem" "$@" || status=$?
    else
        "$here/$hook.pre-gitmem" "$@" || status=$?
    fi
    # A commit or a push the existing hook refused stays refused.
    case "$hook" in pre-commit|pre-receive) [ "$status" -ne 0 ] && exit "$status" ;; esac
fi
if [ "$role" = project ]; then
    # The memory store is a repository of its own: never let the project's git
    # environment point gitmem at the project repository.
    unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_PREFIX GIT_OBJECT_DIRECTORY \
        GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_COMMON_DIR
fi
run_gitmem() {
    if [ -x "$python" ]; then
        # -P: nothing from the current directory (the work tree, which others write) is
        # importable; a store holding gitmem/ or a module its config names runs nothing.
        "$python" -P -m gitmem hook-run --role "$role" "$hook" "$@"
    elif command -v gitmem >/dev/null 2>&1; then
        gitmem hook-run --role "$role" "$hook" "$@"
    else
        echo "gitmem: warning: gitmem is not installed; the $hook hook did nothing" >&2
    fi
}
if [ "$hook" = pre-commit ]; then
    run_gitmem "$@" || exit $?
    exit "$status"
fi
if [ "$hook" = pre-receive ]; then
    printf '%s\n' "$refs" | run_gitmem "$@" || exit $?
    exit "$status"
fi
run_gitmem "$@" || echo "gitmem: warning: the gitmem $hook hook failed; git is unaffected" >&2
exit "$status"
