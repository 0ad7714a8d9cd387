"""Every time option takes seconds or the seeds' duration strings; a bad one names the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbridge import Bridge, ToolOptions
from toolbridge._durations import seconds
from toolbridge._server.sidecar import ttl_seconds


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (10, 10.0),
        (2.5, 2.5),
        ("250ms", 0.25),
        ("10s", 10.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1d2h3m4s5ms", 86400 + 7200 + 180 + 4 + 0.005),
        ("1.5h", 5400.0),
        (" 10s ", 10.0),
    ],
)
def test_durations_read_as_seconds(given: object, expected: float) -> None:
    assert seconds(given, option="x") == pytest.approx(expected)


@pytest.mark.parametrize(
    "bad", ["10", "10 s", "5min", "30m1h", "1h1h", "s", "", "-5s", True, None, [], -1, 0, "0s", float("inf")]
)
def test_a_bad_duration_names_the_option_and_the_forms(bad: object) -> None:
    forms = r"\"250ms\", \"10s\", \"5m\", \"1h30m\""
    with pytest.raises(ValueError, match=r"ToolOptions\.tool_timeout=.*" + forms):
        ToolOptions(tool_timeout=bad)  # type: ignore[arg-type]


def test_every_time_option_of_tool_options_takes_strings() -> None:
    options = ToolOptions(
        tool_timeout="10s",
        wait_window="250ms",
        approval_hold="5m",
        approval_timeout="1h30m",
        retry_backoff="0s",
        retry_backoff_max="2s",
    )
    assert (options.tool_timeout, options.wait_window, options.approval_hold) == (10.0, 0.25, 300.0)
    assert (options.approval_timeout, options.retry_backoff, options.retry_backoff_max) == (5400.0, 0.0, 2.0)


@pytest.mark.parametrize("option", ["run_lease", "shutdown_grace", "connection_idle"])
def test_bridge_time_options_take_strings_and_name_a_bad_one(journal_path: Path, option: str) -> None:
    Bridge(journal=journal_path, **{option: "1m30s"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=f"{option}='soon' is not a duration"):
        Bridge(journal=journal_path, **{option: "soon"})  # type: ignore[arg-type]


async def test_mint_token_ttl_commands_timeout_and_steps_take_strings(journal_path: Path) -> None:
    async with Bridge(journal=journal_path, tools={"lookup": lambda: 1}) as bridge:
        await _use_durations(bridge)


async def _use_durations(bridge: Bridge) -> None:
    token = await bridge.mint_token(run_id="r", tools=["lookup"], ttl="15m")
    assert token.expires_at - token.created_at == pytest.approx(900.0)
    with pytest.raises(ValueError, match="ttl='1 week' is not a duration"):
        await bridge.mint_token(run_id="r", tools=["lookup"], ttl="1 week")
    async with bridge.run("durations") as step:
        await step.sleep("nap", "10ms")
        assert await step.wait_for_event("never", event="none/sent", timeout="20ms") is None
        with pytest.raises(ValueError, match="timeout='later' is not a duration"):
            await step.sandbox.commands.run("c", "true", timeout="later")
    assert ttl_seconds("90") == 90.0
    assert ttl_seconds("1h30m") == 5400.0
