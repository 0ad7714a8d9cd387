"""Who a sandbox runs as when the daemon is root, and what of the host it is given.

Each running command gets a uid of its own from :data:`SANDBOX_UIDS` and the shared group
:data:`SANDBOX_GID`. Nothing on the host is changed for it except what the daemon owns and
the sandbox must use: the daemon's private socket directory and socket are opened to the
sandbox group, and a snippet's scratch directory is lent to the uid for the command's life.
"""

from __future__ import annotations

import contextlib
import os
import random
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from toolbridge._errors import SandboxError
from toolbridge._sandbox.launcher import LaunchSpec

SANDBOX_GID = 2_000_000_000
"""The group every sandbox runs in when the daemon is root; it is given the daemon's socket."""

SANDBOX_UIDS = range(2_000_000_001, 2_000_065_536)
"""Unprivileged uids for sandboxes of a root daemon: one per running command. They belong to
no account and sit outside the ranges distributions and container tools hand out."""

_uids_in_use: set[int] = set()


@contextlib.contextmanager
def sandbox_uid() -> Iterator[int]:
    """A uid no other running command of this daemon uses."""
    for _ in range(64):
        uid = random.choice(SANDBOX_UIDS)
        if uid not in _uids_in_use:
            break
    else:
        raise SandboxError("no free sandbox uid: too many commands are running at once")
    _uids_in_use.add(uid)
    try:
        yield uid
    finally:
        _uids_in_use.discard(uid)


def allows(st: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    """Whether ``uid``/``gid`` has all of ``bits`` (r=4, w=2, x=1) by the mode alone."""
    if st.st_uid == uid:
        shift = 6
    elif st.st_gid == gid:
        shift = 3
    else:
        shift = 0
    return (st.st_mode >> shift) & bits == bits


def socket_path(spec: LaunchSpec) -> Path:
    address = spec.env.get("TOOLBRIDGE_ADDRESS", "")
    if spec.socket_dir is None or not address.startswith("unix:"):
        raise SandboxError(
            "the bubblewrap sandbox has no network, so it can only reach the daemon on a Unix "
            "socket: open the Bridge without listen= (or with socket=PATH)"
        )
    return Path(address.removeprefix("unix:"))


def grant_socket_access(socket: Path, gid: int) -> None:
    """Let the sandbox group connect to the daemon's socket, changing only what is ours.

    The default socket directory is private to the daemon (0700); its group becomes the
    sandbox group with search permission only (0710), which gives nobody else anything.
    """
    me = os.geteuid()
    directory = socket.parent
    st = directory.stat()
    if not allows(st, -1, gid, 1):
        if st.st_uid == me and st.st_mode & 0o077 == 0:
            os.chown(directory, -1, gid)
            os.chmod(directory, stat.S_IMODE(st.st_mode) | 0o010)
        else:
            raise SandboxError(
                f"the sandbox user cannot reach the socket directory {directory}: let group "
                f"{gid} search it (chgrp {gid} {directory} && chmod g+x {directory}) or use "
                "the default socket"
            )
    try:
        st = socket.stat()
    except FileNotFoundError:
        return  # a warm sandbox's door, opened when its command comes (see BwrapLauncher.admit)
    if not allows(st, -1, gid, 2) and st.st_uid == me:
        os.chown(socket, -1, gid)
        os.chmod(socket, stat.S_IMODE(st.st_mode) | 0o060)


@dataclass
class Ownership:
    """Writable directories handed to the sandbox uid for the run, and given back after."""

    changed: list[tuple[Path, int, int]] = field(default_factory=list)

    def lend(self, path: Path, uid: int, gid: int) -> None:
        st = path.stat()
        if allows(st, uid, gid, 7):
            return
        if st.st_uid != os.geteuid():
            raise SandboxError(
                f"the sandbox user cannot write {path} and toolbridge does not own it to lend it"
            )
        os.chown(path, uid, gid)
        self.changed.append((path, st.st_uid, st.st_gid))

    def restore(self) -> None:
        for path, uid, gid in reversed(self.changed):
            with contextlib.suppress(OSError):
                os.chown(path, uid, gid)
        self.changed.clear()


def check_cwd(cwd: Path, uid: int, gid: int) -> None:
    resolved = cwd.resolve()
    if resolved == Path("/"):
        raise SandboxError("refusing to show the whole file system to a sandbox: pass cwd= a project folder")
    try:
        st = resolved.stat()
    except OSError as exc:
        raise SandboxError(f"the working directory {cwd} cannot be used: {exc.strerror}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise SandboxError(f"the working directory {cwd} is not a directory")
    if not allows(st, uid, gid, 5):
        raise SandboxError(
            f"the sandbox user (uid {uid}) cannot read the working directory {cwd}: make it "
            f"readable by others (chmod o+rx {cwd}) or pass cwd= a folder that is; the folders "
            "above it need not be"
        )
