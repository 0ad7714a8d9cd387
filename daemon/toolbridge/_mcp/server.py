"""An MCP server (the official SDK's low-level ``Server``) over a bridge's registered tools.

Every ``tools/call`` is ``Bridge.call_tool``: validated, hooked, retried and journaled like a
call from a sandbox. The request's ``_meta["toolbridge/run_id"]`` makes the call a step of
that run, so a client that retries a timed-out call with the same run id gets the recorded
answer (or joins the call still running) and the tool does not run twice. Without one, each
call is a run of its own, whose id comes back in the result's ``_meta``.

A call that waits on a person's decision says how to give it, and asks through MCP
elicitation where the client offers it (``approvals.py``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import re
import time
import uuid
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from toolbridge import Bridge, DefinitionWarning, SidecarToken, ToolError, tool_definitions
from toolbridge._mcp.approvals import apply_responses, elicitation_offered, watch_requests
from toolbridge._tools.annotations import mcp_annotations

__all__ = ["ERROR_META_KEY", "RUN_ID_META_KEY", "mcp_server"]

RUN_ID_META_KEY = "toolbridge/run_id"
"""The request ``_meta`` key naming the run a call belongs to (and, in a result, the run it was)."""

ERROR_META_KEY = "toolbridge/error"
"""The result ``_meta`` key carrying a failed call's ``ToolError`` (type, message, error id)."""

GRANT_STATE_KEY = "toolbridge_grant"
"""Where the HTTP face leaves the bearer token's grant on the request's ASGI scope state."""

PROGRESS_INTERVAL = 1.0
"""Seconds between progress notifications while a call runs (when the client asked for them)."""

GrantOf = Callable[[ServerRequestContext[Any, Any]], SidecarToken | None]


def _title(name: str) -> str:
    """``getCustomer`` -> ``Get customer``: the human-readable name MCP clients show."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[_-]", " ", name).split()
    text = " ".join(words).lower()
    return text[:1].upper() + text[1:]


def _mcp_tools(bridge: Bridge) -> dict[str, types.Tool]:
    with warnings.catch_warnings():
        # What MCP cannot describe is still enforced on every call; nobody reads a warning here.
        warnings.simplefilter("ignore", DefinitionWarning)
        definitions = tool_definitions(bridge.tools, format="mcp")
    listed: dict[str, types.Tool] = {}
    for definition in definitions:
        name = definition["name"]
        declared = bridge.tools[name]
        shown = mcp_annotations(
            declared.annotations,
            requires_confirmation=declared.requires_confirmation is not False,
            title=_title(name),
        )
        if declared.at_most_once:  # a tool that must not run twice is not idempotent, whatever it says
            shown["idempotentHint"] = False
        annotations = types.ToolAnnotations.model_validate(shown)
        listed[name] = types.Tool(
            name=name,
            title=_title(name),
            description=definition.get("description") or None,
            input_schema=definition["inputSchema"],
            output_schema=definition.get("outputSchema"),
            annotations=annotations,
            _meta=definition.get("_meta"),
        )
    return listed


def _request_grant(ctx: ServerRequestContext[Any, Any]) -> SidecarToken | None:
    """The bearer token's grant the HTTP face checked for this request (stdio has none)."""
    scope = getattr(ctx.request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    grant = state.get(GRANT_STATE_KEY) if isinstance(state, dict) else None
    return grant if isinstance(grant, SidecarToken) else None


def _error_result(error: ToolError, run_id: str | None) -> types.CallToolResult:
    meta: dict[str, Any] = {ERROR_META_KEY: error.to_dict()}
    if run_id is not None:
        meta[RUN_ID_META_KEY] = run_id
    text = f"{error.type}: {error.message}"
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(content=content, is_error=True, _meta=meta)


def _call_result(result: Any, run_id: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result if isinstance(result, dict) else None,
        _meta={RUN_ID_META_KEY: run_id},
    )


def _run_id(meta: Mapping[str, Any] | None, grant: SidecarToken | None) -> str | ToolError:
    """The run a call belongs to: the one the client names, or a fresh one."""
    named = None if meta is None else meta.get(RUN_ID_META_KEY)
    if named is None:
        return uuid.uuid4().hex
    if not isinstance(named, str) or not named or len(named) > 200 or not named.isprintable():
        return ToolError(
            f"_meta[{RUN_ID_META_KEY!r}] must be a printable string of 1 to 200 characters",
            type="InvalidArgument",
        )
    if grant is not None and named != grant.run_id:
        # A token names the one existing run it may record in (and so replay from).
        return ToolError(f"this token's calls belong to run {grant.run_id!r}", type="Unauthenticated")
    return named


async def _with_progress(
    ctx: ServerRequestContext[Any, Any], work: asyncio.Future[Any], name: str, interval: float
) -> Any:
    """Await ``work``, telling the client it still runs every ``interval`` seconds.

    ``asyncio.wait`` never cancels ``work``: a client that gives up leaves the call to finish.
    """
    started = time.monotonic()
    while True:
        done, _ = await asyncio.wait({work}, timeout=interval)
        if done:
            return work.result()
        elapsed = time.monotonic() - started
        await ctx.session.report_progress(elapsed, None, f"{name}: running for {elapsed:.1f}s")


def mcp_server(
    bridge: Bridge, *, progress_interval: float = PROGRESS_INTERVAL, grant_of: GrantOf = _request_grant
) -> Server[Any]:
    """An MCP server answering with ``bridge``'s registered tools; serve it while the bridge is open.

    Args:
        bridge: The bridge whose tools are served (``bridge.tools``).
        progress_interval: Seconds between progress notifications while a call runs.
        grant_of: Finds the bearer token's grant of a request (the HTTP face sets one); a
            grant limits the tools listed and callable, and the run a call may name.
    """
    if progress_interval <= 0:
        raise ValueError("progress_interval must be a positive number of seconds")
    listed = _mcp_tools(bridge)
    # Calls the client gave up on (a timeout, a cancel) still finish and are recorded.
    running: set[asyncio.Future[Any]] = set()

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        grant = grant_of(ctx)
        tools = [tool for name, tool in listed.items() if grant is None or name in grant.tools]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        grant = grant_of(ctx)
        meta: Mapping[str, Any] | None = params.meta if params.meta is not None else ctx.meta
        if params.request_state:  # a retry with the person's answers: the same run
            meta = {**(meta or {}), RUN_ID_META_KEY: params.request_state}
        run_id = _run_id(meta, grant)
        if isinstance(run_id, ToolError):
            return _error_result(run_id, None)
        if grant is not None and params.name not in grant.tools:
            # The same answer as for a tool that does not exist, as over gRPC.
            return _error_result(ToolError(f"no tool named {params.name!r}", type="ToolNotFound"), run_id)
        # A caller holding a token is a sandbox's stand-in: a sandbox never decides its own
        # requests, so it is neither asked nor heard (the CLI and the web page decide them).
        trusted = grant is None
        responses = dict(params.input_responses or {}) if trusted else {}
        answered = await apply_responses(bridge, responses, run_id=run_id, tool=params.name)
        work = asyncio.ensure_future(bridge.call_tool(params.name, params.arguments or {}, run_id=run_id))
        running.add(work)
        work.add_done_callback(running.discard)
        if meta is not None and meta.get("progress_token") is not None:
            finish = asyncio.ensure_future(_with_progress(ctx, work, params.name, progress_interval))
        else:
            finish = asyncio.ensure_future(asyncio.shield(work))
        watcher = asyncio.ensure_future(
            watch_requests(
                ctx,
                bridge,
                work,
                run_id=run_id,
                tool=params.name,
                asked=answered,
                elicit=trusted and elicitation_offered(ctx),
            )
        )
        try:
            await asyncio.wait({finish, watcher}, return_when=asyncio.FIRST_COMPLETED)
            forms = watcher.result() if watcher.done() and not watcher.exception() else {}
            if forms and not finish.done():
                # The call goes on (and waits) while the client asks the person; its retry joins it.
                return types.InputRequiredResult(input_requests=dict(forms), request_state=run_id)
            result = await finish
        except ToolError as exc:
            return _error_result(exc, run_id)
        except TypeError as exc:  # arguments that are neither an object nor JSON
            return _error_result(ToolError(str(exc), type="InvalidArgument"), run_id)
        finally:
            finish.cancel()  # only the wait for it: work is shielded
            watcher.cancel()
        return _call_result(result, run_id)

    return Server(
        "toolbridge",
        version=importlib.metadata.version("toolbridge"),
        instructions=(
            "Each tool call is a durable step recorded in toolbridge's journal. To retry a call "
            f"safely, send the same _meta[{RUN_ID_META_KEY!r}] as the result you did not get "
            "(each result carries its run id): a call already made returns its recorded answer."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
