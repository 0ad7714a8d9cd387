"""``lifecycle=`` as AgentKit writes it, ``on_error``, and ``await some_tool.invoke(input)``."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge import ToolContext, ToolError, tool
from toolbridge._ui.view import entry_view
from toolbridge.testing import ToolHarness, tool_context


class Write(BaseModel):
    path: str
    contents: str


def _write(args: Write, ctx: ToolContext) -> dict[str, Any]:
    if args.path.startswith("/"):
        raise ToolError("absolute paths are refused", type="Forbidden")
    return {"success": True, "path": args.path}


async def test_lifecycle_hooks_get_parameters_and_result_as_agentkit_passes_them() -> None:
    seen: list[Any] = []

    def on_start(event: dict[str, Any]) -> dict[str, Any]:
        seen.append(("start", event))
        return {**event["parameters"], "path": "tmp/" + event["parameters"]["path"]}

    async def on_finish(event: dict[str, Any]) -> dict[str, Any]:
        seen.append(("finish", event))
        return {**event["result"], "checked": True}

    write = tool.step(input=Write, run=_write, lifecycle={"on_start": on_start, "on_finish": on_finish})
    async with ToolHarness({"write-file": write}) as harness:
        call = await harness.call("write-file", path="a.txt", contents="hi")
        [rec] = await harness.recorded()
    assert call.result == {"success": True, "path": "tmp/a.txt", "checked": True}
    assert seen == [
        ("start", {"parameters": {"path": "a.txt", "contents": "hi"}}),
        ("finish", {"result": {"success": True, "path": "tmp/a.txt"}}),
    ]
    hooks = [entry["hook"] for entry in rec.attempt_log if "hook" in entry]
    assert hooks == ["on_start", "on_finish"]  # journaled as the keyword hooks are


async def test_on_error_sees_a_failure_and_may_rewrite_it_and_is_journaled() -> None:
    cleaned: list[str] = []

    def on_error(event: dict[str, Any]) -> ToolError:
        error = event["error"]
        cleaned.append(error.type)
        return ToolError(f"could not write: {error.message}", type="WriteFailed")

    write = tool.step(input=Write, run=_write, lifecycle={"onError": on_error})
    async with ToolHarness({"write": write}) as harness:
        call = await harness.call("write", path="/etc/passwd", contents="x")
        ok = await harness.call("write", path="b.txt", contents="x")
        records = await harness.recorded()
    assert call.error is not None
    assert (call.error.type, call.error.message) == (
        "WriteFailed",
        "could not write: absolute paths are refused",
    )
    assert ok.result == {"success": True, "path": "b.txt"}
    assert cleaned == ["Forbidden"]  # not called for the call that succeeded
    [entry] = [e for e in records[0].attempt_log if e.get("hook") == "on_error"]
    assert entry["tool_error"]["type"] == "Forbidden"
    assert entry_view(entry)["kind"] == "hook"


async def test_the_keyword_on_error_gets_the_error_itself_and_none_keeps_it() -> None:
    seen: list[ToolError] = []
    write = tool.step(input=Write, run=_write, on_error=seen.append)
    async with ToolHarness({"write": write}) as harness:
        call = await harness.call("write", path="/x", contents="")
    assert call.error is not None
    assert call.error.type == "Forbidden"
    assert [e.type for e in seen] == ["Forbidden"]


def test_lifecycle_is_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="unknown lifecycle hook 'onBegin'"):
        tool.step(run=_write, lifecycle={"onBegin": print})
    with pytest.raises(ValueError, match="on_start is given twice"):
        tool.step(run=_write, on_start=print, lifecycle={"on_start": print})
    with pytest.raises(TypeError, match=r"lifecycle\['on_finish'\] must be a function"):
        tool.step(run=_write, lifecycle={"on_finish": "yes"})


# --- direct invoke ---------------------------------------------------------------------------


async def test_invoke_runs_a_tool_outside_any_bridge_with_validation_and_hooks() -> None:
    write = tool.step(
        input=Write, run=_write, lifecycle={"on_finish": lambda e: {**e["result"], "hooked": True}}
    )
    assert await write.invoke({"path": "a", "contents": "b"}) == {
        "success": True,
        "path": "a",
        "hooked": True,
    }
    with pytest.raises(ToolError, match="contents") as bad:
        await write.invoke({"path": "a"})
    assert bad.value.type == "ValidationError"
    with pytest.raises(ToolError, match="absolute paths"):
        await write.invoke({"path": "/a", "contents": ""})


async def test_invoke_takes_agnt5_order_and_a_test_context_with_state() -> None:
    def echo(args: dict[str, str], ctx: ToolContext) -> str:
        ctx.state["echoed"] = ctx.state.get("echoed", 0) + 1
        return f"echo: {args['text']}"

    echo_tool = tool.step(
        name="echo", input={"type": "object", "properties": {"text": {"type": "string"}}}, run=echo
    )
    ctx = tool_context(tool_name="echo")
    assert await echo_tool.invoke(ctx, {"text": "hi"}) == "echo: hi"  # AGNT5: invoke(ctx, input)
    assert await echo_tool.invoke({"text": "again"}, ctx) == "echo: again"
    assert ctx.state == {"echoed": 2}
    assert ctx.network.state is ctx.state


async def test_invoke_of_a_plain_function_and_a_group_with_inline_steps() -> None:
    async def lookup(customer_id: str) -> dict[str, str]:
        return {"id": customer_id}

    async def refund(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        amount = await ctx.step.run("price", lambda: 500)
        await ctx.step.send_event("notify", {"name": "order/refunded", "data": {"amount": amount}})
        return {"refunded": amount}

    from toolbridge._tools.convert import to_tool

    assert await to_tool(lookup).invoke(["cus_1"]) == {"id": "cus_1"}
    assert await to_tool(lookup).invoke({"customer_id": "cus_2"}) == {"id": "cus_2"}
    assert await tool.group(run=refund).invoke({"order_id": "o1"}) == {"refunded": 500}


async def test_invoke_refuses_a_tool_that_needs_a_person() -> None:
    gated = tool.step(run=lambda args: args, requires_confirmation=True)
    with pytest.raises(ToolError, match="needs a bridge") as refused:
        await gated.invoke({})
    assert refused.value.type == "ApprovalRequired"


async def test_an_unexpected_exception_becomes_an_internal_error_chained() -> None:
    def broken(args: dict[str, Any]) -> None:
        raise KeyError("nope")

    with pytest.raises(ToolError) as raised:
        await tool.step(run=broken).invoke({})
    assert raised.value.type == "InternalError"
    assert isinstance(raised.value.__cause__, KeyError)
