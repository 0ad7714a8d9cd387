"""The bubblewrap launcher (being built; see issue 6)."""

from __future__ import annotations

from toolbridge._errors import SandboxError
from toolbridge._launch import LaunchSpec, ProcessOutcome, StopSignal


class BwrapLauncher:
    """Runs commands under bubblewrap."""

    name = "bwrap"

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        raise SandboxError("the bubblewrap sandbox is not available in this build yet")
