"""Item 10: a replay that asks for another step under a recorded key says so, naming the change."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolbridge import Bridge, ReplayMismatchError, tool

HELLO = 'print("hello")'


async def test_another_command_line_under_a_recorded_step_id_is_a_mismatch(
    any_bridge: Bridge, write_script: Callable[[str, str], Path], work_dir: Path
) -> None:
    write_script("a.py", HELLO)
    write_script("b.py", HELLO)
    async with any_bridge.run("cli") as step:
        await step.sandbox.commands.run("agent", "python3 a.py", cwd=work_dir)
    async with any_bridge.run("cli") as step:
        with pytest.raises(ReplayMismatchError) as raised:
            await step.sandbox.commands.run("agent", "python3 b.py", cwd=work_dir)
        # The documented way to accept the change: a new step id runs the new command.
        accepted = await step.sandbox.commands.run("agent-v2", "python3 b.py", cwd=work_dir)
    message = str(raised.value)
    assert "step 'agent'" in message
    assert "argv was ['python3', 'a.py'], now ['python3', 'b.py']" in message
    assert "new step id" in message
    assert (accepted.replayed, accepted.stdout) == (False, "hello\n")


async def test_other_tools_under_a_recorded_step_id_are_a_mismatch(
    any_bridge: Bridge, write_script: Callable[[str, str], Path], work_dir: Path
) -> None:
    write_script("a.py", HELLO)
    async with any_bridge.run("tools") as step:
        await step.sandbox.commands.run("agent", "python3 a.py", tools={"lookup": lambda: 1}, cwd=work_dir)
    async with any_bridge.run("tools") as step:
        with pytest.raises(ReplayMismatchError, match=r"tools was \['lookup'\], now \['lookup', 'refund'\]"):
            await step.sandbox.commands.run(
                "agent", "python3 a.py", tools={"lookup": lambda: 1, "refund": lambda: 2}, cwd=work_dir
            )
    async with any_bridge.run("tools") as step:
        same = await step.sandbox.commands.run(
            "agent", "python3 a.py", tools={"lookup": lambda: 1}, cwd=work_dir
        )
    assert same.replayed  # asked for as it was: the recorded result


async def test_other_snippet_code_under_a_recorded_step_id_is_a_mismatch(any_bridge: Bridge) -> None:
    async with any_bridge.run("snippet") as step:
        assert await step.sandbox.python("total", "return 1 + 1") == 2
    async with any_bridge.run("snippet") as step:
        with pytest.raises(ReplayMismatchError, match=r"step 'total' \(python\) changed: code_sha256 was"):
            await step.sandbox.python("total", "return 2 + 2")
    async with any_bridge.run("snippet") as step:
        assert await step.sandbox.python("total", "return 1 + 1") == 2


def charge() -> str:
    return "charged"


def refund() -> str:
    return "refunded"


async def test_another_function_under_a_recorded_step_run_id_is_a_mismatch(bridge: Bridge) -> None:
    async with bridge.run("fn") as step:
        assert await step.run("money", charge) == "charged"
    async with bridge.run("fn") as step:
        with pytest.raises(ReplayMismatchError, match=r"function was '.*charge', now '.*refund'"):
            await step.run("money", refund)
    async with bridge.run("fn") as step:
        assert await step.run("money", charge) == "charged"


AGENT = """
import asyncio, json, os, time
from inngest_tools import tools

amount = json.load(open("amount.json"))
print(json.dumps(asyncio.run(tools.refund(amount=amount))), flush=True)
if os.path.exists("hold"):
    time.sleep(300)  # interrupted here
"""


async def test_an_interrupted_command_rerun_with_other_arguments_names_the_calls_not_asked_again(
    any_bridge: Bridge, write_script: Callable[[str, str], Path], work_dir: Path
) -> None:
    write_script("agent.py", AGENT)
    write_script("amount.json", "5")
    write_script("hold", "")
    refunded: list[Any] = []
    called = asyncio.Event()

    def do_refund(args: dict[str, Any]) -> dict[str, Any]:
        refunded.append(args["amount"])
        called.set()
        return {"refunded": args["amount"]}

    tools = {"refund": tool.step(run=do_refund)}

    async def interrupted() -> None:
        async with any_bridge.run("refunds") as step:
            command = asyncio.ensure_future(
                step.sandbox.commands.run("agent", "python3 agent.py", tools=tools, cwd=work_dir)
            )
            await asyncio.wait_for(called.wait(), 30)
            await asyncio.wait_for(command, 0.5)  # interrupted while it holds

    with pytest.raises(TimeoutError):
        await interrupted()
    (work_dir / "hold").unlink()
    write_script("amount.json", "7")  # the code now asks for something else
    async with any_bridge.run("refunds") as step:
        result = await step.sandbox.commands.run("agent", "python3 agent.py", tools=tools, cwd=work_dir)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"refunded": 7}
    assert refunded == [5, 7]
    (stale,) = result.not_asked_again  # the amount=5 call, recorded, not made again
    assert stale.startswith("agent/refund@")
    async with any_bridge.run("refunds") as step:  # the recorded result says so too
        replayed = await step.sandbox.commands.run("agent", "python3 agent.py", tools=tools, cwd=work_dir)
    assert (replayed.replayed, replayed.not_asked_again) == (True, (stale,))


def add(a: int, b: int) -> int:
    return a + b


async def test_other_arguments_to_a_recorded_step_run_are_a_mismatch(bridge: Bridge) -> None:
    async with bridge.run("sum") as step:
        assert await step.run("add", add, 1, 2) == 3
    async with bridge.run("sum") as step:
        with pytest.raises(ReplayMismatchError) as raised:
            await step.run("add", add, 5, 6)
    message = str(raised.value)
    assert "step 'add' (run) changed: arguments was" in message
    assert "[1, 2]" in message
    assert "[5, 6]" in message
    async with bridge.run("sum2") as step:
        assert await step.run("add", add, 1, b=2) == 3
    async with bridge.run("sum2") as step:
        with pytest.raises(ReplayMismatchError, match="arguments was"):
            await step.run("add", add, 1, b=3)


async def test_a_fixed_function_body_still_replays_its_recorded_step(bridge: Bridge) -> None:
    """A tool's code is not part of a step's identity: a fix deployed before the replay replays."""
    ran: list[str] = []

    def settle(order: str) -> str:
        ran.append("v1")
        return f"settled {order}"

    async with bridge.run("fix") as step:
        assert await step.run("settle", settle, "o-1") == "settled o-1"

    def settle_fixed(order: str) -> str:  # the same function, redeployed with a new body
        ran.append("v2")
        return f"settled {order} properly"

    settle_fixed.__qualname__ = settle.__qualname__
    async with bridge.run("fix") as step:
        assert await step.run("settle", settle_fixed, "o-1") == "settled o-1"
    assert ran == ["v1"]


async def test_another_env_for_a_recorded_command_is_a_mismatch_naming_the_variable_not_its_value(
    any_bridge: Bridge, write_script: Callable[[str, str], Path], work_dir: Path, journal_path: Path
) -> None:
    write_script("a.py", HELLO)
    async with any_bridge.run("env") as step:
        await step.sandbox.commands.run(
            "agent", "python3 a.py", env={"API_KEY": "sk-first-1234", "MODE": "x"}, cwd=work_dir
        )
    async with any_bridge.run("env") as step:
        with pytest.raises(ReplayMismatchError) as raised:
            await step.sandbox.commands.run(
                "agent", "python3 a.py", env={"API_KEY": "sk-second-5678", "MODE": "x"}, cwd=work_dir
            )
    async with any_bridge.run("env") as step:
        same = await step.sandbox.commands.run(
            "agent", "python3 a.py", env={"API_KEY": "sk-first-1234", "MODE": "x"}, cwd=work_dir
        )
    message = str(raised.value)
    assert "env changed in API_KEY" in message
    assert "sk-" not in message  # the values are never shown
    assert same.replayed
    # The identity holds keyed hashes of the values, not the values.
    assert b"sk-first-1234" not in journal_path.read_bytes()


async def test_a_secret_argument_is_compared_by_keyed_hash_and_never_stored(
    bridge: Bridge, journal_path: Path
) -> None:
    from pydantic import SecretStr

    def login(password: SecretStr) -> int:
        return len(password.get_secret_value())

    async with bridge.run("secret-arg") as step:
        assert await step.run("login", login, SecretStr("hunter2-horse")) == 13
    async with bridge.run("secret-arg") as step:
        assert await step.run("login", login, SecretStr("hunter2-horse")) == 13  # the same secret
    async with bridge.run("secret-arg") as step:
        with pytest.raises(ReplayMismatchError, match="a secret in it differs") as raised:
            await step.run("login", login, SecretStr("another-one!!"))
    assert "hunter2" not in str(raised.value)
    assert "another" not in str(raised.value)
    assert b"hunter2-horse" not in journal_path.read_bytes()
