"""Arguments are parsed strictly, and a refused call leaves the daemon serving."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tests.helpers import call_request, held_command, raw_call, raw_status, result_of
from toolbridge import Bridge


def echo(value: object) -> object:
    return value


@pytest.mark.parametrize(
    ("positional", "named", "message"),
    [
        (b"[NaN]", b"", "NaN is not valid JSON"),
        (b"[Infinity]", b"", "Infinity is not valid JSON"),
        (b"[-Infinity]", b"", "-Infinity is not valid JSON"),
        (b"", b'{"value": 1, "value": 2}', "duplicate key 'value'"),
        (b"[" * 65 + b"]" * 65, b"", "nests deeper than 64 levels"),
        (b"[" * 100_000 + b"]" * 100_000, b"", "nests deeper than 64 levels"),
        (b"[1,", b"", "not valid JSON"),
        (b"\xff\xfe", b"", "not valid JSON"),
        (b'{"value": 1}', b"", "positional arguments must be a JSON array"),
        (b"", b"[1]", "named arguments must be a JSON object"),
    ],
)
async def test_bad_json_is_invalid_argument_and_the_daemon_keeps_serving(
    bridge: Bridge, tmp_path: Path, positional: bytes, named: bytes, message: str
) -> None:
    async with held_command(bridge, tmp_path, {"echo": echo}) as held:
        error = await raw_status(held, call_request("echo", positional, named))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in error.details()
        assert result_of(await raw_call(held, call_request("echo", b'["still here"]'))) == "still here"


async def test_nesting_at_the_limit_is_accepted(bridge: Bridge, tmp_path: Path) -> None:
    nested = b"[" * 63 + b"]" * 63  # 63 levels inside the argument array: 64 in all
    async with held_command(bridge, tmp_path, {"echo": echo}) as held:
        value = result_of(await raw_call(held, call_request("echo", b"[" + nested + b"]")))
    depth = 0
    while isinstance(value, list) and value:
        value, depth = value[0], depth + 1
    assert depth == 62  # the innermost list is empty


async def test_big_integers_keep_their_precision(bridge: Bridge, tmp_path: Path) -> None:
    big = 2**63 + 1
    async with held_command(bridge, tmp_path, {"echo": echo}) as held:
        response = await raw_call(held, call_request("echo", f"[{big}]".encode()))
    assert response.result_json == str(big).encode()
