#!/bin/sh
# The system packages the bubblewrap sandbox needs: bubblewrap itself, and setpriv (util-linux,
# present on every Debian/Ubuntu) for dropping to an unprivileged uid when the daemon is root.
# `make demo` and `make test` run this first. As root it installs what is missing; otherwise it
# says what to run.
set -eu
if command -v bwrap >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap util-linux
    exit 0
fi
echo "toolbridge: the bubblewrap sandbox needs bubblewrap; install it:" >&2
echo "    sudo apt-get install -y bubblewrap      (Debian, Ubuntu)" >&2
echo "    sudo dnf install -y bubblewrap          (Fedora)" >&2
exit 1
