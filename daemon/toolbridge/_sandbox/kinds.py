"""The launchers a bridge can be asked for by name: ``"process"`` and ``"bwrap"``."""

from __future__ import annotations

from typing import Literal

from toolbridge._sandbox.launcher import Launcher
from toolbridge._sandbox.process import ProcessLauncher

__all__ = ["SandboxKind", "launcher_for"]

SandboxKind = Literal["process", "bwrap"]


def launcher_for(sandbox: SandboxKind | Launcher) -> Launcher:
    """The launcher a ``sandbox=`` argument names, or the launcher object itself.

    Raises:
        ValueError: for an unknown name.
    """
    if sandbox == "process":
        return ProcessLauncher()
    if sandbox == "bwrap":
        from toolbridge._sandbox.bwrap.launcher import BwrapLauncher  # only when asked for

        return BwrapLauncher()
    if isinstance(sandbox, str):
        raise ValueError(f"unknown sandbox {sandbox!r}: use 'process' or 'bwrap'")
    return sandbox
