"""The one place where an exception from user code becomes a :class:`ToolError`.

User code is a tool, a hook (``on_start`` / ``on_finish``), a durable function, a
``step.run`` body, or a tool's output conversion. Whatever unexpected exception it raises,
the sandbox must learn only that the call failed and where the host keeps the detail, never
the exception's text (it may hold secrets); the journal must keep everything. Both halves are
built here, from one table, so that every failure has the same journal shape::

    {"type", "message", "retryable", "error_id", "exception", "traceback"}

The first four are what the sandbox receives (:meth:`ToolError.to_dict`); ``exception`` and
``traceback`` stay in the journal. No other module makes an error id: the gRPC edge asks
:func:`new_error_id` for the id it logs an unexpected server failure under.
"""

from __future__ import annotations

import logging
import secrets
import traceback
from dataclasses import dataclass
from typing import Any, Literal

from toolbridge._errors import ToolError

__all__ = ["Caught", "Kind", "catch", "new_error_id"]

log = logging.getLogger("toolbridge")

Kind = Literal["InternalError", "Refused", "OutputValidationError"]
"""What the sandbox is told went wrong; the message says where the detail is."""

_MESSAGES: dict[Kind, str] = {
    # A tool, a function or a step body raised something other than a ToolError.
    "InternalError": "the {what} failed unexpectedly; the host's journal has the detail under {error_id}",
    # on_start raised: the tool never ran.
    "Refused": "the call was refused (error id {error_id})",
    # The tool's value could not be turned into its declared output.
    "OutputValidationError": (
        "{what} returned a result that does not match its output schema (error id {error_id})"
    ),
}


def new_error_id() -> str:
    """A fresh id to find one failure's detail by, in the journal or the host's log."""
    return "err_" + secrets.token_hex(8)


@dataclass(frozen=True)
class Caught:
    """An unexpected exception, as the sandbox sees it and as the journal keeps it.

    Attributes:
        error: The generic error to raise or record; its message carries the error id.
        entry: The journal's entry for it: ``error.to_dict()`` plus the exception's text
            and traceback, which never leave the host.
    """

    error: ToolError
    entry: dict[str, Any]


def catch(exc: BaseException, *, what: str, kind: Kind = "InternalError", retryable: bool = False) -> Caught:
    """Turn ``exc``, raised by user code, into a generic error and its journal entry.

    Args:
        exc: What the user code raised.
        what: The user code, in words (``"tool 'lookup'"``, ``"step 'charge'"``).
        kind: The error type the sandbox receives.
        retryable: Whether another attempt may succeed (the attempt loop says so).
    """
    error_id = new_error_id()
    message = _MESSAGES[kind].format(what=what, error_id=error_id)
    error = ToolError(message, type=kind, retryable=retryable, error_id=error_id)
    text = f"{type(exc).__name__}: {exc}"
    entry = {
        **error.to_dict(),
        "exception": text,
        "traceback": "".join(traceback.format_exception(exc)),
    }
    log.warning("%s failed (%s): %s", what, error_id, text)
    return Caught(error, entry)
