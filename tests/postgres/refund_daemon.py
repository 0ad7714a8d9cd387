"""Daemon B as a process of its own: it declares the durable function ``refund`` and serves it.

Usage:
    python refund_daemon.py URL MODE LEASE
        Open a bridge on the journal URL with ``run_lease=LEASE`` and declare ``refund``
        (trigger ``order/refund``, data ``{order_id: str, amount: int}``). With MODE ``serve``
        the function returns ``{"refunded": ..., "pid": ...}``; with MODE ``hang`` it never
        returns. Reports (one JSON object per line on stdout): ``ready`` once open, ``started``
        when the function runs, ``closed`` after a clean shutdown on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from toolbridge import Bridge, FunctionContext, event_type

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
    "required": ["order_id", "amount"],
}


def report(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def main(url: str, mode: str, lease: str) -> None:
    bridge = Bridge(journal=url, run_lease=lease)

    @bridge.function(id="refund", trigger=event_type("order/refund", schema=SCHEMA))
    async def refund(ctx: FunctionContext) -> dict[str, Any]:
        report(event="started", data=ctx.event.data)
        if mode == "hang":
            await asyncio.Event().wait()
        return {"refunded": ctx.event.data["order_id"], "pid": os.getpid()}

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with bridge:
        report(event="ready")
        await stop.wait()
    report(event="closed")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
