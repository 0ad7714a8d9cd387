"""Attempts, timeouts and retries of user code (a tool, a ``step.run`` body, a function).

Whatever the code raises ends here. A :class:`ToolError` keeps its type and message; a
timeout becomes ``ToolTimeout``; anything else is unexpected and goes through
:mod:`toolbridge._durable.boundary`, which keeps its detail in the journal under a fresh error
id and gives callers only a generic message that carries the id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from toolbridge._durable.boundary import catch
from toolbridge._errors import ToolError
from toolbridge._journal.base import Journal
from toolbridge._options import ToolOptions
from toolbridge._records import StepRecord, now
from toolbridge._tools.threads import track_threads, untrack, wait_for_threads


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
        threads, tracking = track_threads()
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
            # Unexpected failures are worth another attempt; the last one is final.
            caught = catch(exc, what=what, retryable=True)
            failure = caught.error
            entry["error"] = caught.entry
        finally:
            untrack(tracking)
            entry["finished_at"] = now()
        if not failure.retryable or number >= attempts:
            if failure.type == "InternalError":
                failure.retryable = False
            raise failure
        journal.write_soon(rec)
        await asyncio.sleep(options.backoff(number))
        # Never two attempts of a step at once: a sync tool past its timeout still runs in
        # its thread (nothing can stop it), and the retry waits until it has returned.
        await wait_for_threads(threads)
