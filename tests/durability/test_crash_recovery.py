"""Kill a real daemon at every failpoint, and at random ones, and check what the journal promised.

What these tests prove (stated in docs/explanations/journal.md, "What the crash tests prove"):
- the journal passes PRAGMA integrity_check after any kill;
- every result a sandbox received was committed before it was sent (nothing acknowledged is lost);
- a call that completed before a crash is never run again: replay answers it from the journal;
- an interrupted call runs again on replay with the same idempotency key (at-least-once
  execution, exactly-once recording), or fails with StepInterrupted when its tool is at-most-once;
- parallel calls, including identical ones, each meet their own recorded result in any order.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

from tests.durability.crash_harness import CrashHarness

# Invocations of the second call (amount 2, where the crash strikes) once the run completes.
AT_LEAST_ONCE = {
    "before_step_started": 1,
    "after_step_started": 1,
    "while_tool_runs": 2,
    "after_tool_returned": 2,
    "after_result_recorded": 1,
}
AT_MOST_ONCE = {
    "before_step_started": (1, "value"),  # nothing was recorded: it simply runs on replay
    "after_step_started": (0, "StepInterrupted"),
    "while_tool_runs": (1, "StepInterrupted"),
    "after_tool_returned": (1, "StepInterrupted"),
    "after_result_recorded": (1, "value"),
}


def _invocations_of(harness: CrashHarness, amount: int) -> int:
    return Counter(i["amount"] for i in harness.invocations())[amount]


@pytest.mark.parametrize("failpoint", sorted(AT_LEAST_ONCE))
async def test_at_least_once_tools_recover_at_every_failpoint(tmp_path: Path, failpoint: str) -> None:
    harness = CrashHarness(tmp_path)
    assert await harness.enter(f"{failpoint}:2") < 0, "the failpoint did not fire"
    assert await harness.enter() == 0
    final = harness.check_final()
    assert final["b"]["value"]["charged"] == 2
    assert _invocations_of(harness, 2) == AT_LEAST_ONCE[failpoint]
    assert _invocations_of(harness, 1) == 1  # completed before the crash: answered from the journal


@pytest.mark.parametrize("failpoint", sorted(AT_MOST_ONCE))
async def test_at_most_once_tools_never_run_twice(tmp_path: Path, failpoint: str) -> None:
    harness = CrashHarness(tmp_path, at_most_once=True)
    assert await harness.enter(f"{failpoint}:2") < 0, "the failpoint did not fire"
    assert await harness.enter() == 0
    final = harness.check_final()
    invocations, outcome = AT_MOST_ONCE[failpoint]
    assert _invocations_of(harness, 2) == invocations
    assert ("value" if "value" in final["b"] else final["b"]["error"]) == outcome


async def test_a_run_survives_repeated_crashes_at_random_points(tmp_path: Path) -> None:
    """The soak: several runs, each killed up to three times at random failpoints, then finished."""
    seed = int(os.environ.get("TOOLBRIDGE_SOAK_SEED", random.randrange(2**32)))
    iterations = int(os.environ.get("TOOLBRIDGE_SOAK_ITERATIONS", "6"))
    print(f"soak seed {seed} (set TOOLBRIDGE_SOAK_SEED to replay it)")
    rng = random.Random(seed)
    points = sorted(AT_LEAST_ONCE)
    kills = 0
    for iteration in range(iterations):
        harness = CrashHarness(tmp_path / f"iteration-{iteration}", at_most_once=rng.random() < 0.3)
        harness.work.mkdir()
        status = -1
        for _ in range(rng.randint(1, 3)):
            failpoint = f"{rng.choice(points)}:{rng.randint(1, 9)}"
            status = await harness.enter(failpoint)
            if status == 0:
                break  # fewer hits than the count: the run completed
            kills += 1
        if status != 0:
            assert await harness.enter() == 0
        harness.check_final()
    assert kills > 0, f"no failpoint fired (seed {seed})"
