"""Lifecycle hooks around a tool call, journaled with the call's step.

``on_start(input)`` runs after the arguments are validated and before the tool: it may return
a changed input (validated again) or raise to refuse the call, and then the tool does not run.
``on_finish(result)`` runs after the tool succeeded: it may return a changed result (which
must still match ``output``) or raise to fail the call. ``on_error(error)`` runs when a call
that started failed (its handler, ``on_finish`` or the output check): for cleanup, and it may
return (or raise) another ``ToolError`` to send instead; the error it replaced is journaled.

Each hook leaves an entry in the step's ``attempt_log`` (``{"hook": "on_start", ...}``):
when it ran, the input it substituted or the tool's own result it replaced, and the error
if it raised. The step's ``input_json`` stays the call as the sandbox made it (its step key
hashes that) and its ``output_json`` is the result the sandbox received, so a replay returns
the same answer without running either hook again.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from toolbridge._durable.boundary import catch
from toolbridge._errors import ToolError
from toolbridge._json import canonical, dumps
from toolbridge._records import StepRecord, now
from toolbridge._schema.schema import SchemaValidationError
from toolbridge._tools.tool import BoundCall, Tool, call_hook

__all__ = ["error_hook", "finish_hook", "start_hook"]


async def start_hook(tool: Tool, bound: BoundCall, rec: StepRecord) -> BoundCall:
    """Run ``on_start`` and return the call to make.

    Raises:
        ToolError: refusing the call: the one the hook raised, ``ValidationError`` for a
            changed input that does not validate, or a generic ``Refused`` error (whose
            detail stays in the journal) for any other exception.
    """
    if tool.on_start is None:
        return bound
    entry: dict[str, Any] = {"hook": "on_start", "started_at": now()}
    rec.attempt_log.append(entry)
    try:
        # A copy, so a hook that edits its argument in place changes the call, not `bound`.
        changed = await call_hook(tool.on_start, copy.deepcopy(bound.input))
        rebound = tool.rebind(changed)
        unchanged = canonical(rebound.input) == canonical(bound.input)
    except ToolError as exc:
        entry["error"] = exc.to_dict()
        raise
    except SchemaValidationError as exc:
        error = ToolError(f"invalid arguments after on_start: {exc}", type="ValidationError")
        entry["error"] = error.to_dict()
        raise error from None
    except Exception as exc:
        caught = catch(exc, what=f"on_start of tool {rec.name!r}", kind="Refused")
        entry["error"] = caught.entry
        raise caught.error from exc
    finally:
        entry["finished_at"] = now()
    if unchanged:
        return bound  # keep the binding validated from the sandbox's own bytes
    entry["input"] = rebound.input
    return rebound


async def finish_hook(tool: Tool, tool_name: str, value: Any, rec: StepRecord) -> Any:
    """Run ``on_finish`` and return the result to send.

    Raises:
        ToolError: the one the hook raised, or a generic ``InternalError`` (whose detail
            stays in the journal) for any other exception.
    """
    if tool.on_finish is None:
        return value
    entry: dict[str, Any] = {"hook": "on_finish", "started_at": now()}
    rec.attempt_log.append(entry)
    before = _snapshot(value)
    try:
        changed = await call_hook(tool.on_finish, value)
        after = _snapshot(changed)
    except ToolError as exc:
        entry["error"] = exc.to_dict()
        raise
    except Exception as exc:
        caught = catch(exc, what=f"tool {tool_name!r}")
        entry["error"] = caught.entry
        raise caught.error from exc
    finally:
        entry["finished_at"] = now()
    if after != before:
        entry["tool_result"] = json.loads(before) if before is not None else None
    return changed


async def error_hook(tool: Tool, tool_name: str, error: ToolError, rec: StepRecord) -> ToolError:
    """Run ``on_error`` on a failed call and return the error to send.

    Never raises: a hook that fails (other than by raising a ``ToolError``) or returns
    something else leaves a generic ``InternalError`` (its detail stays in the journal).
    """
    if tool.on_error is None:
        return error
    entry: dict[str, Any] = {"hook": "on_error", "started_at": now()}
    rec.attempt_log.append(entry)
    try:
        replaced = await call_hook(tool.on_error, error)
        if not isinstance(replaced, ToolError):
            raise TypeError(f"on_error returned {replaced!r}; it returns a ToolError or None")
    except ToolError as raised:
        replaced = raised
    except Exception as exc:
        caught = catch(exc, what=f"on_error of tool {tool_name!r}")
        entry["error"] = caught.entry
        replaced = caught.error
    finally:
        entry["finished_at"] = now()
    if replaced is not error:
        entry["tool_error"] = error.to_dict()
    return replaced


def _snapshot(value: Any) -> str | None:
    """The value as JSON text, to tell whether a hook changed it (in place or not)."""
    try:
        return dumps(value)
    except Exception:
        return None  # not JSON; the output check reports that if the hook keeps it
