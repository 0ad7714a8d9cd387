"""A seeded soak: two daemons share one PostgreSQL, and random SIGKILLs keep hitting them.

Each daemon runs with ``recover=True`` and starts durable-function runs of five steps; the
test kills one of them at random moments (seeded: the seed is printed, and
``TOOLBRIDGE_SOAK_SEED`` replays it), restarts it, and at the end lets both run until every
run has completed, taken over by whichever daemon found its dead owner's lease expired.

What must hold, from the invocation log every step body appends to before it returns and
the acknowledgement log each function appends to once a step's result came back:

- no completed step executed twice: the invocation whose result the journal recorded is
  the last invocation of that step (a step may run again only if it never completed);
- no acknowledged result lost: every result a function received is the one recorded;
- every run completes, each step recorded once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
from collections import Counter, defaultdict
from pathlib import Path

import asyncpg

from tests.postgres.fleet import Host, lines

LEASE = 1.0
JOBS_PER_START = 4
KILLS = 6
STEPS = 5
SOAK_SECONDS = 90.0  # the whole soak stops by itself within this, whatever happens


async def _start(name: str, url: str, work: Path, jobs: int, arrived: asyncio.Condition) -> Host:
    host = await Host.start(
        name, "soak", url, str(work), name, str(LEASE), str(jobs), work=work, arrived=arrived
    )
    await host.report("serving")
    return host


async def _completed_runs(conn: asyncpg.Connection) -> tuple[int, int]:
    row = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FROM runs WHERE run_id LIKE 'job/%'"
    )
    assert row is not None
    return row[0], row[1]


async def test_random_kills_across_two_daemons_lose_nothing_and_repeat_nothing(
    pg_url: str, tmp_path: Path
) -> None:
    seed = int(os.environ.get("TOOLBRIDGE_SOAK_SEED", random.randrange(1 << 32)))
    chooser = random.Random(seed)
    print(f"soak seed {seed} (TOOLBRIDGE_SOAK_SEED={seed} replays it)")
    arrived = asyncio.Condition()  # every host's reports notify it
    hosts = {name: await _start(name, pg_url, tmp_path, JOBS_PER_START, arrived) for name in ("a", "b")}
    steps_seen: list[str] = []  # the host of every step started, in order, across restarts

    def count_steps() -> int:
        for host in hosts.values():
            fresh = [r for r in host.reports if r.get("event") == "step" and not r.get("counted")]
            for report in fresh:
                report["counted"] = True
                steps_seen.append(host.name)
        return len(steps_seen)

    def enough_steps(wanted: int) -> bool:
        return count_steps() >= wanted

    conn = await asyncpg.connect(pg_url)
    kills = 0
    try:
        async with asyncio.timeout(SOAK_SECONDS):
            for _ in range(KILLS):
                # Kill a few steps later, mostly the host that ran the latest step: it is busy,
                # so the kill lands in the middle of a run (and often of a step).
                wait_for = count_steps() + chooser.randint(1, 4)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(3), arrived:
                        await arrived.wait_for(functools.partial(enough_steps, wait_for))
                busy = steps_seen[-1] if steps_seen else "a"
                victim = busy if chooser.random() < 0.75 else chooser.choice(sorted(hosts))
                count_steps()  # what the victim reported is counted before it goes
                await hosts[victim].kill()
                kills += 1
                jobs = chooser.randint(1, JOBS_PER_START)
                hosts[victim] = await _start(victim, pg_url, tmp_path, jobs, arrived)
            for host in hosts.values():  # no more kills, and no more runs once these are sent
                await host.report("jobs_sent")
            while True:  # the survivors finish every run, the orphans included
                done, total = await _completed_runs(conn)
                if done == total:
                    break
                await asyncio.sleep(0.05)
        steps = await conn.fetch(
            "SELECT run_id, step_key, status, output_json FROM steps WHERE run_id LIKE 'job/%'"
        )
        done, total = await _completed_runs(conn)
    finally:
        await conn.close()
        for host in hosts.values():
            await host.kill()

    invocations = lines(tmp_path / "invocations.jsonl")
    acks = lines(tmp_path / "acks.jsonl")
    recorded = {(row["run_id"], row["step_key"]): json.loads(row["output_json"])["nonce"] for row in steps}
    last_invocation: dict[tuple[str, str], str] = {}
    runs_per_step: Counter[tuple[str, str]] = Counter()
    by_host: defaultdict[str, int] = defaultdict(int)
    for invocation in invocations:
        key = (invocation["run"], invocation["step"])
        last_invocation[key] = invocation["nonce"]
        runs_per_step[key] += 1
        by_host[invocation["host"]] += 1
    print(
        f"soak: seed {seed}, {kills} kills, {total} runs ({done} completed), {len(recorded)} steps, "
        f"{len(invocations)} step executions ({sum(n - 1 for n in runs_per_step.values())} re-run "
        f"after a kill), {len(acks)} acknowledged results, executions by host {dict(by_host)}"
    )
    assert total >= 2 * JOBS_PER_START
    assert done == total
    assert all(row["status"] == "completed" for row in steps)
    assert len(recorded) == total * STEPS
    assert set(runs_per_step) == set(recorded), set(runs_per_step) ^ set(recorded)
    for key, nonce in recorded.items():
        assert last_invocation[key] == nonce, f"{key} ran again after it completed (seed {seed})"
    for ack in acks:
        assert recorded[(ack["run"], ack["step"])] == ack["nonce"], f"acknowledged {ack} lost (seed {seed})"
    assert kills == KILLS
