"""Strict and lax validation, end to end: a real sandboxed script calls tools over gRPC, and
each bad call gets a ToolError naming the offending field while the tool never runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolbridge import Bridge, tool
from toolbridge._journal.sqlite import SQLiteJournal

AGENT = """
import asyncio, json
from inngest_tools import ToolError, tools

async def attempt(label, call, out):
    try:
        out[label] = {"result": await call}
    except ToolError as error:
        out[label] = {"type": error.type, "message": error.message}

async def main():
    out = {}
    await attempt("wrong_type", tools.createBasket(customer_id=42), out)
    await attempt("extra_field", tools.createBasket(customer_id="c", gift=True), out)
    as_text = [{"sku": "a", "quantity": "2"}]
    await attempt("nested_coercion", tools.createBasket(customer_id="c", lines=as_text), out)
    await attempt("missing", tools.createBasket(lines=[]), out)
    await attempt("valid", tools.createBasket(customer_id="c", lines=[{"sku": "a", "quantity": 2}]), out)
    await attempt("one_object", tools.createBasket({"customer_id": "d"}), out)
    await attempt("strict_nulls", tools.createBasket(customer_id="e", lines=None, coupon=None), out)
    await attempt("lax", tools.laxBasket(customer_id="f", lines=as_text, gift=True), out)
    await attempt("schema_extra", tools.refund(payment_id="pay_1", amount_cents=5, note="x"), out)
    await attempt("schema_pattern", tools.refund(payment_id="card_1", amount_cents=0), out)
    print(json.dumps(out))

asyncio.run(main())
"""


class Line(BaseModel):
    sku: str
    quantity: int = 1


class Basket(BaseModel):
    customer_id: str
    lines: list[Line] = []
    coupon: str | None = None


REFUND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "payment_id": {"type": "string", "pattern": "^pay_"},
        "amount_cents": {"type": "integer", "minimum": 1},
    },
    "required": ["payment_id", "amount_cents"],
}


async def test_bad_calls_get_a_validation_error_naming_the_field_and_nothing_runs(
    bridge: Bridge, script: Callable[[str, str], Path], tmp_path: Path, journal_path: Path
) -> None:
    script("agent.py", AGENT)
    ran: list[str] = []

    def basket(args: Basket) -> dict[str, Any]:
        ran.append(args.customer_id)
        return {**args.model_dump(), "extra": args.model_extra}

    def refund(args: dict[str, Any]) -> dict[str, Any]:
        ran.append(args["payment_id"])
        return args

    tools = {
        "createBasket": tool.step(input=Basket, run=basket),
        "laxBasket": tool.step(input=Basket, strict=False, run=basket),
        "refund": tool.step(input=REFUND, run=refund),
    }
    async with bridge.run("strict-1") as step:
        result = await step.sandbox.commands.run("agent", "python agent.py", tools=tools, cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)

    def refused(label: str) -> str:
        assert out[label]["type"] == "ValidationError", out[label]
        message: str = out[label]["message"]
        return message

    assert "/customer_id: Input should be a valid string" in refused("wrong_type")
    assert "/gift: Extra inputs are not permitted" in refused("extra_field")
    assert "/lines/0/quantity: Input should be a valid integer" in refused("nested_coercion")
    assert "/customer_id: Field required" in refused("missing")
    assert "/note: Extra inputs are not permitted" in refused("schema_extra")
    message = refused("schema_pattern")
    assert "/payment_id" in message
    assert "/amount_cents" in message

    assert out["valid"]["result"]["lines"] == [{"sku": "a", "quantity": 2}]
    assert out["one_object"]["result"]["customer_id"] == "d"
    assert out["strict_nulls"]["result"] == {"customer_id": "e", "lines": [], "coupon": None, "extra": None}
    assert out["lax"]["result"]["lines"] == [{"sku": "a", "quantity": 2}]  # "2" coerced
    assert out["lax"]["result"]["extra"] == {"gift": True}  # extra fields reach the tool
    # Only the valid calls ran.
    assert ran == ["c", "d", "e", "f"]

    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        steps = await journal.load_steps("strict-1")
    finally:
        await journal.close()
    failures = [s for s in steps if s.kind == "tool" and s.status == "failed"]
    assert len(failures) == 6
    assert all((s.error or {}).get("type") == "ValidationError" for s in failures)
    assert all(s.attempts == 0 for s in failures)  # refused before any attempt
