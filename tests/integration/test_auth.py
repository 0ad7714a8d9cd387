"""Tokens: a command's token reaches its own tools and nothing else, and dies with the command."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import grpc

from tests.helpers import call_request, held_command, raw_call, raw_status, result_of, wait_until
from toolbridge import Bridge


def add(a: int, b: int) -> int:
    return a + b


def secret() -> str:
    return "only for the other command"


async def test_a_token_calls_its_own_tools(bridge: Bridge, tmp_path: Path) -> None:
    async with held_command(bridge, tmp_path, {"add": add}) as held:
        response = await raw_call(held, call_request("add", b"[2,3]"))
        assert result_of(response) == 5


async def test_missing_and_forged_tokens_are_unauthenticated(bridge: Bridge, tmp_path: Path) -> None:
    async with held_command(bridge, tmp_path, {"add": add}) as held:
        token_id = held.token.split(".")[1]
        for token in ("", "garbage", f"tb1.{token_id}.not-the-secret", "tb1.0000000000000000.x"):
            error = await raw_status(held, call_request("add", b"[1,1]"), token=token)
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED, token


async def test_a_commands_socket_takes_only_its_own_token(bridge: Bridge, tmp_path: Path) -> None:
    async with (
        held_command(bridge, tmp_path, {"add": add}, run_id="a", name="a") as first,
        held_command(bridge, tmp_path, {"secret": secret}, run_id="b", name="b") as second,
    ):
        assert first.address != second.address  # each command has a socket of its own
        refused = await raw_status(first, call_request("secret"), token=second.token)
        assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
        assert result_of(await raw_call(second, call_request("secret"))) == "only for the other command"


async def test_another_commands_tool_is_the_same_not_found_as_no_tool(bridge: Bridge, tmp_path: Path) -> None:
    async with (
        held_command(bridge, tmp_path, {"add": add}, run_id="a", name="a") as first,
        held_command(bridge, tmp_path, {"secret": secret}, run_id="b", name="b"),
    ):
        foreign = await raw_status(first, call_request("secret"))
        unknown = await raw_status(first, call_request("doesNotExist"))
    assert foreign.code() == unknown.code() == grpc.StatusCode.NOT_FOUND
    assert foreign.details() == "no tool named 'secret' for this command"
    assert unknown.details() == "no tool named 'doesNotExist' for this command"


async def test_the_token_is_revoked_when_the_command_ends(bridge: Bridge, tmp_path: Path) -> None:
    async with held_command(bridge, tmp_path, {"add": add}) as held:
        assert result_of(await raw_call(held, call_request("add", b"[1,2]"))) == 3
    result = held.result.result()
    assert result.exit_code == 0, result.stderr
    # Its own socket went with it; on the bridge's socket its token is refused.
    await wait_until(lambda: not Path(held.address.removeprefix("unix:")).exists())
    on_the_bridge = dataclasses.replace(held, address=bridge.address)
    error = await raw_status(on_the_bridge, call_request("add", b"[1,2]"))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
