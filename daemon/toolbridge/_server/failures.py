"""What the sandbox is told when something goes wrong at the gRPC edge: one table, every RPC.

=====================  ====================  ============================================
raised                 status                message
=====================  ====================  ============================================
``ProtocolError``      its ``code``          its message (bad input, unknown tool, ...)
``JournalError``       ``UNAVAILABLE``       the journal could not write, with an error id
anything else          ``INTERNAL``          an error id only, never the exception's text
=====================  ====================  ============================================
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc

from toolbridge._durable.boundary import new_error_id
from toolbridge._errors import JournalError, ProtocolError

__all__ = ["FAILURES", "Status", "status_of"]

log = logging.getLogger("toolbridge")


@dataclass(frozen=True)
class Status:
    code: grpc.StatusCode
    message: str


FAILURES: tuple[tuple[type[Exception], grpc.StatusCode, str], ...] = (
    # Any JournalError on the way (a full disk, a closed journal, a lost run lease): nothing
    # of the call is lost that a retry would not redo, so the sandbox may try again.
    (
        JournalError,
        grpc.StatusCode.UNAVAILABLE,
        "the host's journal could not write, so the call's outcome was not recorded "
        "(error id {error_id}); try again later",
    ),
    (
        Exception,
        grpc.StatusCode.INTERNAL,
        "the host failed unexpectedly (error id {error_id}); the host's log has the detail",
    ),
)
"""Unexpected failures at the edge, most specific first: the status and the message the
sandbox gets. The exception's own text only goes to the host's log, under the error id."""


def status_of(exc: Exception, rpc: str) -> Status:
    """The one translation of an exception at this edge into a status."""
    if isinstance(exc, ProtocolError):
        return Status(getattr(grpc.StatusCode, exc.code), exc.message)
    error_id = new_error_id()
    for kind, code, message in FAILURES:
        if isinstance(exc, kind):
            if code is grpc.StatusCode.INTERNAL:
                log.error("%s failed (%s)", rpc, error_id, exc_info=exc)
            else:
                log.error("%s failed (%s): %s: %s", rpc, error_id, type(exc).__name__, exc)
            return Status(code, message.format(error_id=error_id))
    raise AssertionError("the table ends with Exception")  # pragma: no cover
