"""Your own launcher: a class with a ``name`` and ``async run(spec, stop)``, given as ``sandbox=``."""

import asyncio
import os
import signal

from toolbridge import Bridge, LaunchSpec, ProcessOutcome, StopSignal


# --8<-- [start:launcher]
class LoggingLauncher:
    """Runs each command as a plain child process (no isolation), and logs what it ran."""

    name = "logging"

    def __init__(self) -> None:
        self.ran: list[list[str]] = []

    async def run(self, spec: LaunchSpec, stop: StopSignal) -> ProcessOutcome:
        self.ran.append(list(spec.argv))
        process = await asyncio.create_subprocess_exec(
            *spec.argv,
            env=dict(spec.env),  # exactly the spec's: the daemon's address and token are in it
            cwd=spec.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, killed whole below
        )
        output = asyncio.ensure_future(process.communicate())
        stopped = asyncio.ensure_future(stop.event.wait())  # the daemon stops it (max_calls, ...)
        clock = asyncio.ensure_future(stop.elapse(spec.timeout))  # paused while a call waits
        done, _ = await asyncio.wait({output, stopped, clock}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        clock.cancel()
        if output not in done:
            if clock in done:
                stop.stop("timeout")
            os.killpg(process.pid, signal.SIGKILL)  # nothing it started outlives it
        stdout, stderr = await output
        limit = spec.output_limit
        return ProcessOutcome(
            exit_code=process.returncode if process.returncode is not None else -signal.SIGKILL,
            stdout=stdout[:limit],
            stderr=stderr[:limit],
            stopped=stop.reason if stop.reason != "cancelled" else None,
            stdout_truncated=len(stdout) > limit,
            stderr_truncated=len(stderr) > limit,
        )


# --8<-- [end:launcher]

AGENT = "import asyncio\nfrom inngest_tools import tools\nprint(asyncio.run(tools.add(2, 3)))"


async def main() -> None:
    # --8<-- [start:use]
    launcher = LoggingLauncher()
    async with Bridge(journal="toolbridge.db", sandbox=launcher) as bridge, bridge.run("own-1") as step:
        result = await step.sandbox.commands.run(
            "add", ["python3", "-c", AGENT], tools={"add": lambda a, b: a + b}
        )
        assert result.stdout.strip() == "5"
        slow = await step.sandbox.commands.run(
            "slow", ["python3", "-c", "import time; time.sleep(60)"], timeout=0.5
        )
        assert slow.stopped == "timeout"
    assert launcher.ran[0][:2] == ["python3", "-c"]
    # --8<-- [end:use]


asyncio.run(main())
