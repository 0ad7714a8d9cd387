"""What the client tells a call when the daemon or the connection answers with a gRPC status."""

from __future__ import annotations

import grpc

from inngest_tools._errors import ToolError

__all__ = ["CORE_WRITE_FAILED", "rpc_error", "status_error"]

# gRPC status -> ToolError type, for problems the daemon reports as a status.
_STATUS_TYPES = {
    grpc.StatusCode.NOT_FOUND.value[0]: ("ToolNotFound", False),
    grpc.StatusCode.UNAUTHENTICATED.value[0]: ("Unauthenticated", False),
    grpc.StatusCode.INVALID_ARGUMENT.value[0]: ("InvalidArgument", False),
    grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]: ("RequestTooLarge", False),
    grpc.StatusCode.UNAVAILABLE.value[0]: ("Unavailable", True),
}


# RESOURCE_EXHAUSTED means two things: a call too large (final) or a command with too many
# calls in flight or streams open (try again shortly). The daemon's message names the limit.
_BUSY_LIMITS = ("(ToolOptions.max_in_flight)", "(ToolOptions.max_streams)")


def status_error(code: int, message: str) -> ToolError:
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0] and any(n in message for n in _BUSY_LIMITS):
        return ToolError(message, type="TooManyCalls", retryable=True)
    kind, retryable = _STATUS_TYPES.get(code, ("ProtocolError", False))
    return ToolError(message, type=kind, retryable=retryable)


CORE_WRITE_FAILED = "Internal error from Core"
"""What grpcio's asyncio client says (as ``INTERNAL``) when a write on a stream fails because
the stream ended meanwhile: it replaces the stream's own status, so the status the daemon or
the lost connection gave (``UNAVAILABLE``) is never seen (grpc/grpc issue 36066). Never a
daemon's answer (the daemon's ``INTERNAL`` carries an error id), so it is read as the lost
connection it almost always is: the calls go again on a new one, as after ``UNAVAILABLE``."""


def rpc_error(exc: grpc.RpcError) -> ToolError:
    code = exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    if code == grpc.StatusCode.INTERNAL and details == CORE_WRITE_FAILED:
        return ToolError(
            f"the connection to the daemon was lost as a call was sent ({details})",
            type="Unavailable",
            retryable=True,
        )
    return status_error(code.value[0], details or code.name)
