"""Item 2: fair shares between commands, and a command's pace (``ToolOptions.max_call_rate``).

Beside another command with calls, a command executes at most its share of calls
(``max(MIN_SHARE, SHARED_CALLS // commands)``, counted for their first ``COUNTED_FOR``
seconds each); the rest wait, and a quiet command's call goes ahead of that backlog. When
every command floods, none is quiet, and each executes up to ``BUSY_SHARE``. Alone, a
command is not limited by shares. A call waits for its share at most ``MAX_WAIT``. Calls
beyond a command's rate wait their turn, not refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    WAIT,
    Blocker,
    HeldCommand,
    call_request,
    held_command,
    raw_call,
    result_of,
    wait_until,
)
from toolbridge import Bridge, ToolOptions
from toolbridge._calls import fairness

FLOOD = 20


COUNTED_FOR = 1.0


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls wait for their share as long as a test may take (not the default second)."""
    monkeypatch.setattr(fairness, "MAX_WAIT", WAIT * 2)


async def holds_uncounted() -> None:
    """Each command's `hold` has run for COUNTED_FOR: no longer held against its share."""
    await wait_until(lambda: fairness.fair_share().counted() == 0)


def flood_of_blocked_calls(*commands: HeldCommand) -> list[asyncio.Future[Any]]:
    """FLOOD calls of ``block`` from each of ``commands``, started at once."""
    return [
        asyncio.ensure_future(raw_call(held, call_request("block")))
        for held in commands
        for _ in range(FLOOD)
    ]


async def every_blocked_call_runs(held: HeldCommand, blocker: Blocker) -> None:
    """FLOOD calls of ``block`` from ``held``: all of them enter before any is released."""
    blocked = flood_of_blocked_calls(held)
    await wait_until(lambda: blocker.entered == FLOOD)
    blocker.release.set()
    await asyncio.wait_for(asyncio.gather(*blocked), WAIT)


def _dirs(tmp_path: Path, *names: str) -> list[Path]:
    paths = [tmp_path / name for name in names]
    for path in paths:
        path.mkdir()
    return paths


@contextlib.asynccontextmanager
async def two_commands(
    bridge: Bridge, tmp_path: Path, tools: Mapping[str, object], first: str, second: str
) -> AsyncIterator[tuple[HeldCommand, HeldCommand]]:
    """Two held commands with the same tools, each its own run (named ``first``, ``second``)."""
    first_dir, second_dir = _dirs(tmp_path, first, second)
    async with (
        held_command(bridge, first_dir, tools, run_id=first) as one,
        held_command(bridge, second_dir, tools, run_id=second) as other,
    ):
        yield one, other


@pytest.mark.usefixtures("patient")
async def test_beside_another_command_a_flood_executes_its_share_and_the_quiet_call_goes_first(
    bridge: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long enough that no blocked call stops counting while the test looks.
    monkeypatch.setattr(fairness, "COUNTED_FOR", COUNTED_FOR)
    blocker = Blocker()
    async with two_commands(bridge, tmp_path, blocker.tools, "flood", "quiet") as (flood, quiet):
        await holds_uncounted()
        share = max(fairness.MIN_SHARE, fairness.SHARED_CALLS // 2)  # two commands with calls
        blocked = flood_of_blocked_calls(flood)
        await wait_until(lambda: blocker.entered == share)
        assert result_of(await raw_call(quiet, call_request("ping"))) == "pong"  # never queued
        assert blocker.entered == share  # the flood's backlog still waits
        blocker.release.set()
        answers = await asyncio.wait_for(asyncio.gather(*blocked), WAIT)
        assert [result_of(a) for a in answers] == ["done"] * FLOOD
        assert blocker.entered == FLOOD
    for held in (flood, quiet):
        result = await asyncio.wait_for(asyncio.shield(held.result), WAIT)
        assert result.exit_code == 0, result.stderr


@pytest.mark.usefixtures("patient")
async def test_when_both_commands_flood_each_executes_the_busy_share(
    bridge: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fairness, "COUNTED_FOR", WAIT * 2)  # nothing stops counting meanwhile
    blocker = Blocker()
    async with two_commands(bridge, tmp_path, blocker.tools, "first", "second") as (first, second):
        # Each command's `hold` fills the small share (one each). Once both have calls
        # waiting, neither is quiet, and each executes up to the busy share, its hold included.
        blocked = flood_of_blocked_calls(first, second)
        admitted = 2 * (fairness.BUSY_SHARE - 1)
        await wait_until(lambda: fairness.fair_share().waiting() == 2 * FLOOD - admitted)
        assert blocker.entered == admitted  # every call is read: the rest wait for a share
        blocker.release.set()
        answers = await asyncio.wait_for(asyncio.gather(*blocked), WAIT)
        assert [result_of(a) for a in answers] == ["done"] * 2 * FLOOD


@pytest.mark.usefixtures("patient")
async def test_beside_another_command_slow_calls_stop_counting_and_all_of_them_run(
    bridge: Bridge, tmp_path: Path
) -> None:
    blocker = Blocker()
    async with two_commands(bridge, tmp_path, blocker.tools, "flood", "quiet") as (flood, _):
        # `block` waits on an event, as an I/O-bound tool would. A share of one each, yet every
        # blocked call runs: each stops counting after COUNTED_FOR (the patient fixture keeps
        # MAX_WAIT from being what lets them in).
        await every_blocked_call_runs(flood, blocker)


@pytest.mark.usefixtures("patient")
async def test_a_command_alone_is_not_limited_by_shares(bridge: Bridge, tmp_path: Path) -> None:
    blocker = Blocker()
    (alone_dir,) = _dirs(tmp_path, "alone")
    async with held_command(bridge, alone_dir, blocker.tools, run_id="alone") as alone:
        await every_blocked_call_runs(alone, blocker)  # all at once: slow I/O keeps its parallelism


async def test_a_call_waits_for_its_share_at_most_max_wait(
    bridge: Bridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fairness, "MAX_WAIT", 0.2)
    monkeypatch.setattr(fairness, "COUNTED_FOR", WAIT * 2)  # only MAX_WAIT lets them in
    blocker = Blocker()
    async with two_commands(bridge, tmp_path, blocker.tools, "flood", "quiet") as (flood, _):
        # Its own calls never end, yet the ones past its share get in after MAX_WAIT.
        await every_blocked_call_runs(flood, blocker)


async def test_calls_beyond_max_call_rate_wait_their_turn_and_none_is_refused(
    bridge: Bridge, tmp_path: Path
) -> None:
    stamps: list[float] = []

    async def stamp() -> str:
        stamps.append(time.monotonic())
        return "ok"

    rate, burst, calls = 10.0, 2, 6
    options = ToolOptions(max_call_rate=rate, call_burst=burst)
    (paced_dir,) = _dirs(tmp_path, "paced")
    tools = {"stamp": stamp}
    async with held_command(bridge, paced_dir, tools, run_id="paced", tool_options=options) as paced:
        answers = await asyncio.wait_for(
            asyncio.gather(*(raw_call(paced, call_request("stamp")) for _ in range(calls))), WAIT
        )
        assert [result_of(a) for a in answers] == ["ok"] * calls
    # At most `burst` tokens were there; each further call waited 1 / rate for its own.
    # (A lower bound: a slow machine only spreads the calls further.)
    assert stamps[-1] - stamps[0] >= (calls - burst) / rate - 0.02


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_call_rate", 0), ("max_call_rate", -1.0), ("call_burst", 0), ("call_burst", 1.5)],
)
def test_the_rate_and_burst_must_be_positive(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        ToolOptions(**{field: value})  # type: ignore[arg-type]
