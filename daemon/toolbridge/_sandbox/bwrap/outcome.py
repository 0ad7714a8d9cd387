"""What a bubblewrap sandbox's end means: the command's outcome, or bwrap's own failure to set up.

bwrap reports a setup failure on stderr with exit code 1, and a command killed by signal N
as 128 + N; both are turned into what the process launcher would say.
"""

from __future__ import annotations

from toolbridge._errors import SandboxError
from toolbridge._sandbox.launcher import LaunchSpec, ProcessOutcome

__all__ = ["USERNS_HINT", "describe_setup_error", "finish", "setup_error"]

USERNS_HINT = (
    "bubblewrap needs unprivileged user namespaces: allow them (`sysctl -w "
    "kernel.unprivileged_userns_clone=1` on older Debian, `sysctl -w "
    "user.max_user_namespaces=15000`, and on Ubuntu 24.04+ `sysctl -w "
    "kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for bwrap)"
)


def setup_error(stderr: bytes) -> str | None:
    """What went wrong, if the output is bwrap's or setpriv's own complaint."""
    lines = stderr.decode(errors="replace").strip().splitlines()
    if not lines or not all(line.startswith(("bwrap: ", "setpriv: ")) for line in lines):
        return None
    return lines[-1]


def describe_setup_error(message: str, spec: LaunchSpec) -> str:
    if message.startswith("bwrap: execvp ") and "No such file or directory" in message:
        program = message.removeprefix("bwrap: execvp ").split(":", 1)[0]
        return f"cannot start {program!r}: not found on the sandbox PATH {spec.env.get('PATH', '')!r}"
    if "Can't chdir" in message:
        return f"the sandbox cannot enter its working directory {spec.cwd} ({message})"
    if any(
        marker in message
        for marker in ("namespace", "uid map", "setting up uid", "unshare", "Operation not permitted")
    ):
        return f"bubblewrap could not create the sandbox ({message}); {USERNS_HINT}"
    return f"bubblewrap could not set up the sandbox ({message})"


def finish(outcome: ProcessOutcome, spec: LaunchSpec, *, started: bool, notes: list[str]) -> ProcessOutcome:
    """The command's outcome as the process launcher would report it, or bwrap's own failure
    to set the sandbox up raised as a :class:`SandboxError` that says what to change.

    Args:
        started: Whether the sandbox got as far as running the command.
        notes: Limits the command's cgroups say it hit, added to its stderr.
    """
    failed = setup_error(outcome.stderr) if outcome.exit_code == 1 else None
    if not started or failed is not None:
        if outcome.stopped is not None and not started:
            raise SandboxError(f"the sandbox was stopped ({outcome.stopped}) before the command started")
        message = failed or setup_error(outcome.stderr) or outcome.stderr.decode(errors="replace")
        raise SandboxError(describe_setup_error(message.strip(), spec))
    exit_code = outcome.exit_code
    # bwrap's pid 1 reports a command killed by signal N as 128 + N, as shells do; report it
    # the way the process launcher does (-N). A command that exits with 128 + N itself is
    # indistinguishable from that.
    if 128 < exit_code <= 128 + 64:
        exit_code = 128 - exit_code
    stderr = outcome.stderr
    if notes:
        stderr += "".join(f"\ntoolbridge: {note}" for note in notes).encode() + b"\n"
    return ProcessOutcome(
        exit_code=exit_code,
        stdout=outcome.stdout,
        stderr=stderr,
        stopped=outcome.stopped,
        stdout_truncated=outcome.stdout_truncated,
        stderr_truncated=outcome.stderr_truncated,
    )
