#!/bin/sh
# The system packages toolbridge needs: bubblewrap for the sandbox, setpriv (util-linux,
# present on every Debian/Ubuntu) for dropping to an unprivileged uid when the daemon is root,
# PostgreSQL's server binaries (Debian's `postgresql`) for the throwaway cluster the PostgreSQL
# journal's tests start in a temp dir (the system's own cluster is never used), and, for the
# web view's browser tests only (TOOLBRIDGE_BROWSER_TESTS=1, which `make test` sets), Debian's
# chromium, which Playwright drives without downloading a browser.
# `make demo` and `make test` run this first. As root it installs what is missing; otherwise it
# says what to run.
set -eu
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v setpriv >/dev/null 2>&1 || missing="$missing util-linux"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
if [ "${TOOLBRIDGE_BROWSER_TESTS:-0}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
    missing="$missing chromium"
fi
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "toolbridge: installing$missing (first time only)" >&2
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
    # The postgresql package may start a system cluster; the tests start their own.
    if command -v pg_lsclusters >/dev/null 2>&1 && command -v service >/dev/null 2>&1; then
        service postgresql stop >/dev/null 2>&1 || true
    fi
    echo "toolbridge: installed$missing" >&2
    exit 0
fi
echo "toolbridge: toolbridge needs$missing; install it:" >&2
echo "    sudo apt-get install -y$missing      (Debian, Ubuntu)" >&2
echo "    sudo dnf install -y bubblewrap postgresql-server   (Fedora; chromium for the browser tests)" >&2
exit 1
