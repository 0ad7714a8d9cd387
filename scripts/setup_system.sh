#!/bin/sh
# The system packages the tests need: bubblewrap for the sandbox, setpriv (util-linux, present
# on every Debian/Ubuntu) for dropping to an unprivileged uid when the daemon is root, and
# PostgreSQL's server binaries (Debian's `postgresql`) for the throwaway cluster the PostgreSQL
# journal's tests start in a temp dir (the system's own cluster is never used).
# `make demo` and `make test` run this first. As root it installs what is missing; otherwise it
# says what to run.
set -eu
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v setpriv >/dev/null 2>&1 || missing="$missing util-linux"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
    # The package starts a system cluster; the tests start their own and need none.
    if command -v pg_lsclusters >/dev/null 2>&1 && command -v service >/dev/null 2>&1; then
        service postgresql stop >/dev/null 2>&1 || true
    fi
    exit 0
fi
echo "toolbridge: the tests need:$missing; install them:" >&2
echo "    sudo apt-get install -y$missing      (Debian, Ubuntu)" >&2
echo "    sudo dnf install -y bubblewrap postgresql-server          (Fedora)" >&2
exit 1
