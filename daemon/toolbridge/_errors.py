"""Every exception toolbridge raises, in one tree.

::

    ToolbridgeError                 root of everything raised by toolbridge
    ├── ToolError                   a tool call failed; this is what the sandboxed code receives
    │   └── NonRetriableError       raised by a tool: fail this call now, do not retry it
    ├── SandboxError                a command could not be started in the chosen sandbox
    ├── SnippetError                a runner snippet (step.sandbox.python/typescript) failed
    ├── StepError                   a durable step (step.run) failed after its attempts
    ├── RunWaiting                  a run stopped to wait for a person's decision; enter it again
    ├── ApprovalError               a request cannot be decided as asked (unknown, already decided)
    └── JournalError                the journal cannot be used as asked
        ├── ReplayMismatchError     a replay asks for another step under a recorded step's key
        ├── RunBusyError            another daemon holds the run's lease: it is running it now
        └── RunLeaseLostError       another daemon took the run over; this one's writes are refused

One warning, not an error: ``DefinitionWarning`` (a ``UserWarning``, in ``_definitions``) says
that ``tool_definitions`` left out constraints a model API's format cannot express.

Arguments refused at declaration time raise the built-in ``ValueError`` or ``TypeError`` (an
invalid tool name, an unusable schema), before anything runs.

Retryability is data on the error (``ToolError.retryable``), never inferred from a message.
Any other exception a tool raises is unexpected: it is retried, journaled with its detail, and
reaches the sandbox only as a generic ``InternalError`` carrying an error id.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any, Literal

__all__ = [
    "ApprovalError",
    "JournalError",
    "NonRetriableError",
    "ProtocolError",
    "ReplayMismatchError",
    "RunBusyError",
    "RunLeaseLostError",
    "RunWaiting",
    "SandboxError",
    "SnippetError",
    "StepError",
    "ToolError",
    "ToolbridgeError",
]


class ToolbridgeError(Exception):
    """Root of every exception raised by toolbridge."""


class ToolError(ToolbridgeError):
    """A tool call failed, for a reason that is safe to show to the sandboxed code.

    Raise it from a tool to fail the call with your own message; the sandbox receives it as
    its own ``ToolError`` with the same ``type``, ``message`` and ``retryable``.

    Args:
        message: What went wrong, in words for the code (or model) that made the call.
        type: A short machine-readable kind; defaults to the class name.
        retryable: Whether calling again may succeed. A retryable ``ToolError`` raised by a
            tool is retried within the call's attempts before the sandbox sees it.
        error_id: Points at the journal entry with the detail of an unexpected failure.
    """

    default_retryable = False

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        retryable: bool | None = None,
        error_id: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.type = type or self.__class__.__name__
        self.retryable = self.default_retryable if retryable is None else retryable
        self.error_id = error_id

    def to_dict(self) -> dict[str, Any]:
        """The error as the journal and the wire carry it."""
        return {
            "type": self.type,
            "message": self.message,
            "retryable": self.retryable,
            "error_id": self.error_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolError:
        """Rebuild an error recorded with :meth:`to_dict`."""
        return cls(
            str(data.get("message", "")),
            type=str(data.get("type") or "ToolError"),
            retryable=bool(data.get("retryable", False)),
            error_id=str(data.get("error_id", "")),
        )

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(type={self.type!r}, message={self.message!r})"


class NonRetriableError(ToolError):
    """Raised by a tool to fail the call at once: it is never retried."""

    def __init__(self, message: str, *, type: str | None = None) -> None:
        super().__init__(message, type=type, retryable=False)


class SandboxError(ToolbridgeError):
    """A command could not be started in the chosen sandbox.

    The message says what to install or change. toolbridge never falls back to running a
    command outside the sandbox that was asked for.
    """


class SnippetError(ToolbridgeError):
    """A runner snippet raised, exited non-zero, or returned a value that failed validation.

    Args:
        message: What went wrong.
        exit_code: The snippet process's exit code.
        stderr: The tail of what the snippet wrote to stderr.
    """

    def __init__(self, message: str, *, exit_code: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr


class StepError(ToolbridgeError):
    """A durable step failed after all its attempts, now or when it was recorded.

    Attributes:
        type: The kind of failure, as recorded.
        message: What went wrong, as recorded.
    """

    def __init__(self, step_id: str, error: dict[str, Any]) -> None:
        self.type = str(error.get("type", "Error"))
        self.message = str(error.get("message", ""))
        super().__init__(f"step {step_id!r} failed: {self.type}: {self.message}")


class RunWaiting(ToolbridgeError):  # noqa: N818 (the name is part of the public contract)
    """A run stopped because calls wait for a person's decision (``ToolOptions.approval_hold``).

    The run is left open in the journal (``toolbridge runs`` shows it ``waiting``). Decide the
    requests (``bridge.approvals``, ``toolbridge approvals``), then enter the run again: its
    completed calls are replayed from the journal and the approved ones run.

    Attributes:
        run_id: The run that waits.
        requests: The pending requests (``ApprovalRequest``), oldest first.
    """

    def __init__(self, run_id: str, requests: Sequence[Any]) -> None:
        self.run_id = run_id
        self.requests = list(requests)
        shown = ", ".join(f"{req.id} ({req.summary})" for req in self.requests[:5]) or "none left"
        super().__init__(f"run {run_id!r} waits for a person's decision on: {shown}")


class ApprovalError(ToolbridgeError):
    """A request cannot be decided as asked: unknown, of another kind, already decided or
    expired, or given an answer that does not validate.

    Attributes:
        request: The request as it stands (``ApprovalRequest``), when there is one.
    """

    def __init__(self, message: str, *, request: Any = None) -> None:
        super().__init__(message)
        self.request = request


class JournalError(ToolbridgeError):
    """The journal cannot be used as asked (for example, it was written by a newer version)."""


class ReplayMismatchError(JournalError):
    """On replay, the step recorded under a key is not the step being asked for.

    Another kind of step, or the same kind with another identity: another command line or
    other tools for a command, other code for a snippet, another function for ``step.run``.
    The message names the step and what changed. The run's code changed between
    executions: give the changed step a new step id (or start a new run id) to run it.
    """


class RunBusyError(JournalError):
    """The run is held by another daemon (another process, or another ``Bridge``) right now.

    Entering a run takes its lease; the holder renews it while the run is open. Enter again
    once the holder has left, or once its lease has expired (a holder that was killed stops
    renewing it), and the run is taken over and replayed.

    Attributes:
        run_id: The run that is busy.
        owner: Who holds it (``host:pid:random:machine:start``, one per ``Bridge``).
        expires_at: When its lease runs out unless renewed (seconds since the epoch).
    """

    def __init__(self, run_id: str, owner: str, expires_at: float) -> None:
        when = datetime.datetime.fromtimestamp(expires_at, tz=datetime.UTC).isoformat(timespec="milliseconds")
        super().__init__(
            f"run {run_id!r} is held by {owner} (lease until {when} unless renewed): another "
            "daemon is running it; enter it again after that daemon leaves or its lease expires"
        )
        self.run_id = run_id
        self.owner = owner
        self.expires_at = expires_at


class RunLeaseLostError(JournalError):
    """This daemon's lease on a run ran out and another daemon took the run over.

    Every write of a run is fenced by its lease: once the run is taken over, what this daemon
    still writes for it is refused, so a late write never overwrites the new holder's.

    Attributes:
        run_id: The run that was taken over.
        owner: Who holds it now, if anyone.
    """

    def __init__(self, run_id: str, owner: str | None) -> None:
        super().__init__(
            f"run {run_id!r} was taken over by {owner or 'another daemon'} after this daemon's "
            "lease on it expired; this daemon's writes for it are refused"
        )
        self.run_id = run_id
        self.owner = owner


StatusCode = Literal[
    "NOT_FOUND",
    "INVALID_ARGUMENT",
    "RESOURCE_EXHAUSTED",
    "UNAUTHENTICATED",
    "UNAVAILABLE",
    "FAILED_PRECONDITION",
]


class ProtocolError(Exception):
    """A call the protocol refuses; ``code`` names the gRPC status to answer with."""

    def __init__(self, code: StatusCode, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code: StatusCode = code
        self.message = message
        self.retry_after = retry_after
        """Seconds after which the same call may succeed (a busy limit), if it may."""
