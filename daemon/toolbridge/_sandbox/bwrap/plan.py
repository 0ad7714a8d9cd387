"""What a bubblewrap sandbox sees, turned into bwrap arguments.

The sandbox's file system is a fresh tmpfs holding only:

- ``/usr`` (and the ``/bin``, ``/lib*``, ``/sbin`` links or directories next to it) and the
  few ``/etc`` files the dynamic linker needs, read-only: programs and libraries, no
  configuration and no user data;
- the read-only paths of the spec (the sandbox runtime, the Python installation it points at
  with that installation's own ``site-packages`` hidden, the Node client), at their own paths;
- the daemon's socket directory, read-only, so the socket in it (even one made again by a
  restarted server) can be connected to;
- the command's working directory, read-only, and the spec's writable paths, read-write;
  with the daemon's own state inside them hidden (its journal and key files behind an empty
  read-only ``/dev/null``, a state directory behind an empty tmpfs);
- a private ``/tmp`` (tmpfs of bounded size), ``/proc`` of its own pid namespace, a minimal
  ``/dev``, and a generated ``/etc/passwd`` and ``/etc/group`` naming the sandbox user.

When the daemon runs as root, the sandbox runs as an unprivileged uid that cannot walk the
paths the host keeps private (``/root`` is 0700). bwrap resolves every bind source with the
permissions of the user running it, even a ``--ro-bind-fd`` one, so a first, privileged bwrap
makes a private mount namespace in which each source is bound under a staging directory that
uid may traverse; ``setpriv`` then drops to the uid and the second bwrap builds the sandbox
from the staged paths. Nothing is mounted in the host's own namespace, and the staging
disappears with the command.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

STAGE_DIR = "/tmp/.toolbridge-stage"
"""Where the privileged first stage binds sources, inside its own mount namespace."""

SYSTEM_DIRS = ("/usr",)
ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
)

BindMode = Literal["ro", "rw"]


@dataclass(frozen=True)
class Bind:
    """One host path shown in the sandbox at the same path."""

    path: Path
    mode: BindMode


@dataclass(frozen=True, kw_only=True)
class SandboxView:
    """Everything the sandbox shows, decided before any argument is written.

    Attributes:
        binds: Host paths bound in, in order (later ones may sit inside earlier ones).
        masks: Directories hidden behind an empty read-only tmpfs.
        hidden_files: Files hidden behind ``/dev/null``, read-only.
        cwd: The working directory inside.
        tmp_size: Bytes the private ``/tmp`` may hold.
        passwd_fd: A pipe holding the generated ``/etc/passwd``.
        group_fd: A pipe holding the generated ``/etc/group``.
    """

    binds: Sequence[Bind]
    masks: Sequence[Path] = ()
    hidden_files: Sequence[Path] = ()
    cwd: Path
    tmp_size: int
    passwd_fd: int
    group_fd: int


def hidden_inside(binds: Sequence[Bind], hidden: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Where each hidden path shows inside the binds, as files and as directories to mask.

    Compared by real path (a bind reached through a symlink shows its target's files), and
    named by the path the sandbox sees. Only what exists now can be covered: the daemon's
    journal and its ``-wal``/``-shm`` exist while it runs.
    """
    files: list[Path] = []
    dirs: list[Path] = []
    for path in hidden:
        real = Path(os.path.realpath(path))
        if not real.exists():
            continue
        for bind in binds:
            root = Path(os.path.realpath(bind.path))
            if real == root or root not in real.parents:
                continue  # a bind that *is* hidden state is the caller's choice, not shown inside
            target = bind.path / real.relative_to(root)
            (dirs if real.is_dir() else files).append(target)
    return sorted(set(files)), sorted(set(dirs))


def hidden_site_packages(prefix: Path) -> list[Path]:
    """The ``site-packages`` of a Python installation (not of a virtual environment).

    A virtual environment's own packages are what the sandbox is meant to import; an
    installation's are the host's packages, which the sandbox has no business seeing.
    """
    if (prefix / "pyvenv.cfg").exists():
        return []
    return sorted(p for p in prefix.glob("lib/python3*/site-packages") if p.is_dir())


def _system_args() -> list[str]:
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        args += ["--ro-bind", directory, directory]
    for name in ROOT_LINKS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    for name in ETC_FILES:
        args += ["--ro-bind-try", name, name]
    return args


@dataclass
class Stage:
    """Sources bound under :data:`STAGE_DIR` by the privileged first stage."""

    args: list[str] = field(default_factory=list)
    count: int = 0

    def add(self, source: Path, mode: BindMode) -> str:
        staged = f"{STAGE_DIR}/{self.count}"
        self.count += 1
        self.args += ["--ro-bind" if mode == "ro" else "--bind", str(source), staged]
        return staged


def sandbox_args(view: SandboxView, stage: Stage | None) -> list[str]:
    """The inner bwrap's options (everything before ``--`` and the command).

    Args:
        view: What to show.
        stage: Collects the first stage's binds when running as root; ``None`` when bwrap
            runs as the daemon's own user and can reach every source itself.
    """
    args = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        *_system_args(),
        "--perms",
        "0644",
        "--ro-bind-data",
        str(view.passwd_fd),
        "/etc/passwd",
        "--perms",
        "0644",
        "--ro-bind-data",
        str(view.group_fd),
        "/etc/group",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(view.tmp_size),
        "--tmpfs",
        "/tmp",
    ]
    for bind in view.binds:
        source = str(bind.path) if stage is None else stage.add(bind.path, bind.mode)
        args += ["--ro-bind" if bind.mode == "ro" else "--bind", source, str(bind.path)]
    for mask in view.masks:
        args += ["--perms", "0555", "--tmpfs", str(mask), "--remount-ro", str(mask)]
    for hidden in view.hidden_files:
        # /dev/null is readable by every uid in the stage's tree: no staging needed.
        args += ["--ro-bind", "/dev/null", str(hidden)]
    # The sandbox's own root (the tmpfs holding the mount points) is read-only too.
    args += ["--remount-ro", "/", "--chdir", str(view.cwd)]
    return args


def stage_args(stage: Stage) -> list[str]:
    """The privileged first stage's options: the host's tree plus the staged sources.

    Its ``/tmp`` is a fresh tmpfs (sticky and world-writable, as the second bwrap makes its
    own mount point there) that holds the staging directory, which the sandbox uid may
    traverse but not list.
    """
    return [
        "--dev-bind",
        "/",
        "/",
        # A pid namespace of its own, whose pid 1 dies with this bwrap (and the kernel then
        # kills everything in it): the inner bwrap's own --die-with-parent does not fire when
        # this stage dies, so without it a killed daemon left the sandbox running.
        "--unshare-pid",
        "--die-with-parent",
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        "--perms",
        "0711",
        "--dir",
        STAGE_DIR,
        *stage.args,
    ]


def passwd_text(uid: int, gid: int) -> str:
    return f"root:x:0:0:root:/:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:/tmp:/usr/sbin/nologin\n"


def group_text(gid: int) -> str:
    return f"root:x:0:\nsandbox:x:{gid}:\n"
