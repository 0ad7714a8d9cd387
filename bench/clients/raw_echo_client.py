"""Baseline client: the same call patterns against a bare grpc.aio echo service.

Usage: python3 raw_echo_client.py ADDRESS MODE SEQUENTIAL PER_CALLER CALLERS
MODE is "unary" (one RPC per call) or "stream" (one bidirectional stream, calls multiplexed
by an id, as the inngest_tools client does). Prints the same JSON line as the tool clients.
"""

import asyncio
import itertools
import json
import sys
import time

from grpc import aio

WARMUP = 50


class StreamEcho:
    def __init__(self, channel: aio.Channel) -> None:
        self._call = channel.stream_stream("/bench.Echo/Stream")()
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for message in self._call:
            call_id, _, _ = message.partition(b":")
            self._pending.pop(int(call_id)).set_result(message)

    async def __call__(self, payload: bytes) -> bytes:
        call_id = next(self._ids)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        async with self._lock:
            await self._call.write(b"%d:%s" % (call_id, payload))
        return await future


async def main(address: str, mode: str, sequential: int, per_caller: int, callers: int) -> None:
    async with aio.insecure_channel(address) as channel:
        echo = StreamEcho(channel) if mode == "stream" else channel.unary_unary("/bench.Echo/Unary")
        for _ in range(WARMUP):
            await echo(b'"warm"')
        latencies: list[float] = []
        for _ in range(sequential):
            started = time.perf_counter()
            await echo(b'"x"')
            latencies.append((time.perf_counter() - started) * 1000)

        async def caller() -> None:
            for _ in range(per_caller):
                await echo(b'"x"')

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        seconds = time.perf_counter() - started
    report = {
        "client": f"raw-{mode}",
        "sequential_ms": latencies,
        "concurrent": {"callers": callers, "calls": callers * per_caller, "seconds": seconds},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], *(int(arg) for arg in sys.argv[3:6])))
