"""The bridge the faces' tests serve: `toolbridge mcp tests.faces.app:bridge`, `toolbridge ui`.

Its journal and its call log live in ``$FACES_DIR`` (the test's tmp folder). ``lookup``
counts its runs in ``calls.log`` (a replayed call adds no line); ``slow`` blocks on the FIFO
``gate`` until the test writes to it; ``refuse`` raises a ToolError; ``miscount`` returns a
result that fails its output schema; ``refund`` waits for a person's approval first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolbridge import Bridge, ToolContext, ToolError, tool


def here() -> Path:
    """The test's folder, read at each call (this module may be imported before it is set)."""
    return Path(os.environ["FACES_DIR"])


class Sku(BaseModel):
    sku: str


class Stock(BaseModel):
    sku: str
    stock: int


def _lookup(args: Sku, ctx: ToolContext) -> dict[str, Any]:
    with open(here() / "calls.log", "a") as log:
        log.write(f"{args.sku} {ctx.idempotency_key}\n")
    return {"sku": args.sku, "stock": 7}


def _slow(args: Sku) -> dict[str, Any]:
    with open(here() / "gate") as gate:  # blocks until the test opens the FIFO for writing
        gate.read()
    with open(here() / "calls.log", "a") as log:
        log.write(f"slow {args.sku}\n")
    return {"sku": args.sku, "stock": 0}


def _refuse(args: Sku) -> None:
    raise ToolError(f"no warehouse stocks {args.sku}", type="UnknownWarehouse")


def _miscount(args: Sku) -> dict[str, Any]:
    return {"sku": args.sku, "stock": "many"}


def _refund(args: Sku) -> dict[str, Any]:
    with open(here() / "calls.log", "a") as log:
        log.write(f"refund {args.sku}\n")
    return {"sku": args.sku, "stock": 8}


TOOLS = {
    "lookup": tool.step(description="How many of a SKU are in stock.", input=Sku, output=Stock, run=_lookup),
    "slow": tool.step(description="Waits for the warehouse.", input=Sku, output=Stock, run=_slow),
    "refuse": tool.step(description="Always refuses.", input=Sku, run=_refuse),
    "miscount": tool.step(description="Returns a bad count.", input=Sku, output=Stock, run=_miscount),
    "refund": tool.step(
        description="Takes one back (a person approves it first).",
        input=Sku,
        output=Stock,
        run=_refund,
        requires_confirmation=True,
    ),
}


def bridge() -> Bridge:
    """The bridge, built when the CLI loads it (so ``FACES_DIR`` is read then)."""
    return Bridge(journal=here() / "journal.db", tools=TOOLS)
