"""Directories built once into the runtime cache, atomically, shared by concurrent daemons."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

READY = "ready"
"""The marker a finished directory holds; a directory without it is never used."""


def link_or_copy(source: Path, target: Path) -> None:
    """Hard-link ``source`` to ``target`` where the file system allows, else copy it.

    Only for installed files, which an upgrade replaces with new ones: a file someone may
    edit in place (a checkout's) is copied (:func:`copy`), or the edit would reach every
    runtime already built from it, under the fingerprint of what it was.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def copy(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` (a file that may be edited in place where it is)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)


def publish_once(cache_dir: Path, root: Path, build: Callable[[Path], None]) -> None:
    """Make ``root`` exist, built by ``build(scratch)`` in a scratch directory and renamed.

    Safe to call from several processes at once: the first rename wins and the others' work is
    thrown away, so nobody ever sees a half-built directory.
    """
    if (root / READY).exists():
        return
    cache_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".building-", dir=cache_dir))
    try:
        build(scratch)
        (scratch / READY).write_text("")
        scratch.chmod(0o755)
        try:
            scratch.rename(root)
        except OSError:
            # Another process finished the same directory first; theirs is as good.
            if not (root / READY).exists():
                raise
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
