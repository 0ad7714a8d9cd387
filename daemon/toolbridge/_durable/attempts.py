"""The one error boundary where user code runs: attempts, timeouts, retries, error ids.

Whatever a tool (or a durable step's function) raises ends here. A :class:`ToolError` keeps
its type and message; a timeout becomes ``ToolTimeout``; anything else is unexpected: its
detail goes to the journal under a fresh error id, and callers see only a generic message
that carries the id.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from toolbridge._errors import ToolError
from toolbridge._journal.base import Journal
from toolbridge._options import ToolOptions
from toolbridge._records import StepRecord, now

log = logging.getLogger("toolbridge")


def new_error_id() -> str:
    return "err_" + secrets.token_hex(8)


def unexpected(kind: str, error_id: str) -> ToolError:
    """The generic error the sandbox gets for an unexpected exception."""
    return ToolError(
        f"the {kind} failed unexpectedly; the host's journal has the detail under {error_id}",
        type="InternalError",
        retryable=False,
        error_id=error_id,
    )


async def run_attempts(
    rec: StepRecord,
    attempt: Callable[[int], Awaitable[Any]],
    *,
    attempts: int,
    options: ToolOptions,
    journal: Journal,
    timeout: float | None,
    what: str,
) -> Any:
    """Call ``attempt(n)`` until it succeeds or a failure is final; return its value.

    Every attempt is logged on ``rec`` (and journaled, without waiting for the commit, so a
    retry costs no disk wait). Cancellation is not a failure: it propagates and leaves the
    step ``running``, which replay picks up.

    Raises:
        ToolError: the final failure, safe to show to the sandbox.
    """
    while True:
        rec.attempts += 1
        number = rec.attempts
        entry: dict[str, Any] = {"attempt": number, "started_at": now()}
        rec.attempt_log.append(entry)
        try:
            if timeout is None:
                return await attempt(number)
            async with asyncio.timeout(timeout):
                return await attempt(number)
        except ToolError as exc:
            failure = exc
            entry["error"] = exc.to_dict()
        except TimeoutError:
            failure = ToolError(
                f"the {what} did not finish within {timeout:g} seconds",
                type="ToolTimeout",
                retryable=True,
            )
            entry["error"] = failure.to_dict()
        except Exception as exc:
            error_id = new_error_id()
            failure = unexpected(what, error_id)
            failure.retryable = True  # unexpected failures are worth another attempt
            entry["error"] = {
                **failure.to_dict(),
                "exception": f"{type(exc).__name__}: {exc}",
                "traceback": "".join(traceback.format_exception(exc)),
            }
            log.warning("%s %s failed (%s): %r", what, rec.key, error_id, exc)
        finally:
            entry["finished_at"] = now()
        if not failure.retryable or number >= attempts:
            if failure.type == "InternalError":
                failure.retryable = False
            raise failure
        journal.write(rec)
        await asyncio.sleep(options.backoff(number))
