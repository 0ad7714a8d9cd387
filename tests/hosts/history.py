"""The history checker: a seeded random schedule of faults under load, then the books compared.

Hosts (network namespaces): PostgreSQL on one, daemons A and B (``toolbridge serve`` over
mutual TLS, sharing the PostgreSQL journal) on two more, the sandboxes on a fourth. Each
daemon serves a run of its own through a sidecar token; sandbox workers on the sandbox host
call ``record(n)`` and, one call in five, the at-most-once ``charge(n)``, every ``n`` unique,
calling again after a retryable error as a careful sandbox does. Meanwhile the schedule
(seeded: the same seed, the same faults in the same order) cuts the sandbox host's link,
flaps it, cuts a daemon from PostgreSQL, kills a daemon with SIGKILL and starts it again,
and restarts PostgreSQL.

Afterwards three books are compared:

- what the sandboxes were acknowledged (every result a worker printed),
- what ran (the side-effect ledger the tools append to before they return),
- what the journal holds (each run's tool steps).

and these must be zero: acknowledged results missing from the journal or differing from it
(lost), executions of a step that started after the step had completed (completed steps run
again), and at-most-once steps executed more than once (doubled).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.hosts import netns
from tests.hosts.daemon_logs import daemon_lines, saw
from tests.hosts.journal import tool_steps
from tests.pg_cluster import Cluster, running_cluster
from tests.tls_certs import CA, new_ca

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))
APP = Path(__file__).with_name("app.py")
PORT = 7443
LEASE = 3.0
WAIT = 60.0

WORKER = """
import asyncio, json, os, sys, time
from inngest_tools import tools, ToolError

async def main():
    n, stride, give_up, stop, pace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    while not os.path.exists(stop):
        name = "charge" if n % 5 == 0 else "record"
        await asyncio.sleep(pace)
        deadline, attempts = time.monotonic() + give_up, 0
        while True:
            attempts += 1
            try:
                said = {"result": await tools[name](n=n)}
                break
            except ToolError as error:
                if not error.retryable or time.monotonic() > deadline:
                    said = {"error": error.type, "message": str(error)}
                    break
                await asyncio.sleep(0.3)
        print(json.dumps({"tool": name, "n": n, "attempts": attempts, **said}), flush=True)
        n += stride

asyncio.run(main())
"""  # noqa: E501


@dataclass
class Figures:
    """What a schedule did and what the books say."""

    seed: int
    seconds: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    acknowledged: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    error_messages: dict[str, str] = field(default_factory=dict)  # one message per error type
    sandbox_retries: int = 0
    executions: int = 0
    executions_by_daemon: Counter[str] = field(default_factory=Counter)
    steps: int = 0
    results_checked: int = 0
    lost: list[str] = field(default_factory=list)
    completed_run_again: list[str] = field(default_factory=list)
    at_most_once_doubled: list[str] = field(default_factory=list)
    steps_run_more_than_once: int = 0  # at-least-once: a step left running by a killed daemon
    calls_run_under_two_steps: int = 0  # a sandbox's retry after UNAVAILABLE is a new call
    daemons: dict[str, Counter[str]] = field(default_factory=dict)  # what each one's log says

    def lines(self) -> list[str]:
        faults = ", ".join(f"{kind} {count}" for kind, count in sorted(self.faults.items()))
        errors = ", ".join(f"{kind} {count}" for kind, count in sorted(self.errors.items())) or "none"
        by_daemon = ", ".join(f"{name} {count}" for name, count in sorted(self.executions_by_daemon.items()))
        return [
            f"seed {self.seed}: {self.seconds:.0f} s of faults: {faults}",
            f"calls {self.calls}, acknowledged {self.acknowledged}, given up {sum(self.errors.values())} "
            f"({errors}), calls again by the sandboxes {self.sandbox_retries}",
            f"executions {self.executions} ({by_daemon}), journaled tool steps {self.steps}",
            f"results checked {self.results_checked}: lost {len(self.lost)}, completed steps run again "
            f"{len(self.completed_run_again)}, at-most-once steps run twice {len(self.at_most_once_doubled)}",
            *(f"  {kind}: {message}" for kind, message in sorted(self.error_messages.items())),
            "steps run more than once while running (at-least-once after a kill) "
            f"{self.steps_run_more_than_once}; sandbox calls run again under a new step after "
            f"UNAVAILABLE {self.calls_run_under_two_steps}",
            *daemon_lines(self.daemons),
        ]


@dataclass
class Daemon:
    name: str
    host: netns.Host
    process: asyncio.subprocess.Process | None = None
    address: str = ""


class Cluster4:
    """PostgreSQL, daemons A and B, and the sandbox host, all on one network."""

    def __init__(self, net: netns.Network, cluster: Cluster, work: Path, ca: CA, durability: str) -> None:
        self.net = net
        self.cluster = cluster
        self.work = work
        self.ca = ca
        self.pg = net.hosts["pg"]
        self.sandbox = net.hosts["sandbox"]
        self.daemons = {name: Daemon(name, net.hosts[name]) for name in ("A", "B")}
        local = cluster.create_database("history")
        self.db_name = local.split("@/", 1)[1].split("?")[0]
        self.local_url = local
        self.url = cluster.tcp_url(self.db_name)
        self.app = work / "app"
        self.app.mkdir(parents=True, exist_ok=True)
        shutil.copy(APP, self.app / "hosts_app.py")
        self.ledger = work / "ledger.jsonl"
        self.stop = work / "stop-workers"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOSTS_LEDGER": str(self.ledger),
            "HOSTS_LEASE": str(LEASE),
            "HOSTS_DURABILITY": durability,
        }
        client = ca.issue("history-client", client=True, hosts=())
        self.client_tls = {
            "TOOLBRIDGE_TLS_CA": str(ca.cert),
            "TOOLBRIDGE_TLS_CERT": str(client.cert),
            "TOOLBRIDGE_TLS_KEY": str(client.key),
        }

    async def start(self, name: str) -> None:
        daemon = self.daemons[name]
        server = self.ca.issue(f"daemon-{name}", hosts=(daemon.host.address,))
        log = open(self.work / f"daemon-{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
        try:
            daemon.process = await asyncio.create_subprocess_exec(
                *daemon.host.exec(
                    TOOLBRIDGE, "serve", "hosts_app:bridge", "--journal", self.url,
                    "--listen", f"{daemon.host.address}:{PORT}",
                    "--tls-cert", str(server.cert), "--tls-key", str(server.key),
                    "--tls-client-ca", str(self.ca.cert),
                ),
                cwd=self.app, env={**self.env, "HOSTS_DAEMON": name},
                stdout=asyncio.subprocess.PIPE, stderr=log,
            )  # fmt: skip
        finally:
            log.close()
        assert daemon.process.stdout is not None
        line = (await asyncio.wait_for(daemon.process.stdout.readline(), WAIT)).decode().strip()
        assert line.startswith("TOOLBRIDGE_ADDRESS="), (line, (self.work / f"daemon-{name}.log").read_text())
        daemon.address = line.removeprefix("TOOLBRIDGE_ADDRESS=")

    async def kill(self, name: str) -> None:
        process = self.daemons[name].process
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()

    async def stop_all(self) -> None:
        for daemon in self.daemons.values():
            if daemon.process is not None and daemon.process.returncode is None:
                daemon.process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(daemon.process.wait(), WAIT)
                except TimeoutError:
                    daemon.process.kill()
                    await daemon.process.wait()

    async def mint(self, run_id: str) -> str:
        process = await asyncio.create_subprocess_exec(
            TOOLBRIDGE, "token", "mint", "hosts_app:bridge", "--journal", self.local_url,
            "--run", run_id, "--all-tools", "--max-calls", "100000", "--ttl", "2h",
            cwd=self.app, env=self.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(process.communicate(), WAIT)
        assert process.returncode == 0, stderr.decode()
        return stdout.decode().split()[0]

    async def worker(
        self, name: str, token: str, first: int, stride: int, *, give_up: float, pace: float
    ) -> list[dict[str, Any]]:
        script = self.work / "worker.py"
        script.write_text(WORKER)
        env = {
            "PATH": "/usr/bin:/bin",
            "TOOLBRIDGE_ADDRESS": self.daemons[name].address,
            "TOOLBRIDGE_TOKEN": token,
            **self.client_tls,
        }
        process = await asyncio.create_subprocess_exec(
            *self.sandbox.exec(
                sys.executable, str(script), str(first), str(stride), str(give_up), str(self.stop), str(pace)
            ),
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await process.communicate()
        assert process.returncode == 0, stderr.decode()[-2000:]
        return [json.loads(line) for line in stdout.decode().splitlines()]


KINDS = ["sandbox_cut", "sandbox_flap", "journal_cut", "daemon_kill", "postgres_restart"]
WEIGHTS = [3, 2, 2, 2, 1]


def schedule(rng: random.Random, faults: int) -> list[str]:
    """``faults`` fault kinds: every kind once first (in a seeded order), then drawn at random."""
    first = rng.sample(KINDS, len(KINDS))
    return (first + rng.choices(KINDS, WEIGHTS, k=max(0, faults - len(first))))[:faults]


async def _fault(kind: str, rng: random.Random, world: Cluster4, figures: Figures, long_cuts: bool) -> None:
    """One fault, over when this returns (links healed, daemons back)."""
    figures.faults[kind] += 1
    if kind == "sandbox_cut":
        # Short cuts are met by TCP; long ones (past the client's keepalive) by a new connection.
        seconds = rng.uniform(18, 24) if long_cuts and rng.random() < 0.3 else rng.uniform(0.5, 3)
        if seconds > 15:
            figures.faults["sandbox_cut_long"] += 1
        world.sandbox.cut()
        await asyncio.sleep(seconds)  # the partition's length is the fault itself
        world.sandbox.reconnect()
    elif kind == "sandbox_flap":
        for _ in range(rng.randint(3, 8)):
            world.sandbox.cut()
            await asyncio.sleep(rng.uniform(0.05, 0.4))
            world.sandbox.reconnect()
            await asyncio.sleep(rng.uniform(0.1, 0.5))
    elif kind == "journal_cut":
        daemon = world.daemons[rng.choice(["A", "B"])]
        daemon.host.cut()  # the daemon's only link: to PostgreSQL and to its sandboxes
        await asyncio.sleep(rng.uniform(0.5, 4))
        daemon.host.reconnect()
    elif kind == "daemon_kill":
        name = rng.choice(["A", "B"])
        await world.kill(name)
        await asyncio.sleep(rng.uniform(0.1, 1))
        await world.start(name)
    else:  # a crash (immediate stop): what is not yet on disk is gone, as the journal's durability says
        await asyncio.to_thread(world.cluster.restart)
    await asyncio.sleep(rng.uniform(0.3, 1))  # some calls between faults


async def run_schedule(
    work: Path,
    *,
    seed: int,
    faults: int,
    workers_per_daemon: int = 2,
    pace: float = 0.02,
    long_cuts: bool = False,
    durability: str = "full",
) -> Figures:
    """Build the hosts, run the workload under ``faults`` faults of the seeded schedule, and
    check the books. Each worker calls every ``pace`` seconds at most, until the faults end."""
    figures = Figures(seed)
    rng = random.Random(seed)
    ca = new_ca(work / "pki")
    loop = asyncio.get_running_loop()
    with netns.network() as net:
        pg = net.host("pg")
        for name in ("A", "B", "sandbox"):
            net.host(name)
        # A crash of PostgreSQL loses what it had not flushed: with durability="normal" (no
        # WAL flush per commit), acknowledged results may go with it, as the journal says.
        durable = durability == "full"
        with running_cluster(netns=pg.name, listen=pg.address, durable=durable) as cluster:
            world = Cluster4(net, cluster, work, ca, durability)
            try:
                await world.start("A")
                await world.start("B")
                tokens = {name: await world.mint(f"run-{name}") for name in ("A", "B")}
                stride = 2 * workers_per_daemon
                workers = [
                    asyncio.ensure_future(
                        world.worker(name, tokens[name], 1 + index, stride, give_up=120, pace=pace)
                    )
                    for index, name in enumerate(["A", "B"] * workers_per_daemon)
                ]
                started = loop.time()
                for kind in schedule(rng, faults):
                    await _fault(kind, rng, world, figures, long_cuts)
                world.stop.touch()  # workers finish the call in hand (retrying it if need be) and end
                figures.seconds = loop.time() - started
                outcomes = [line for worker in workers for line in await worker]
                await world.stop_all()
                journal = {run: await tool_steps(world.local_url, run) for run in ("run-A", "run-B")}
            finally:
                await world.stop_all()
            check_books(figures, outcomes, journal, world.ledger)
            figures.daemons = {name: saw(work / f"daemon-{name}.log") for name in world.daemons}
    return figures


def check_books(
    figures: Figures, outcomes: list[dict[str, Any]], journal: dict[str, dict[str, Any]], ledger: Path
) -> None:
    executions = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    figures.executions = len(executions)
    figures.executions_by_daemon = Counter(entry["daemon"] for entry in executions)
    # A step is named by its run and its key (two runs' commands may use the same keys).
    steps = {(run, key): step for run, keyed in journal.items() for key, step in keyed.items()}
    figures.steps = len(steps)
    by_call: dict[tuple[str, int], list[Any]] = {}
    for step in steps.values():
        by_call.setdefault((step.name, step.input["n"]), []).append(step)
    figures.calls = len(outcomes)
    for outcome in outcomes:
        figures.sandbox_retries += outcome["attempts"] - 1
        if "result" not in outcome:
            figures.errors[outcome["error"]] += 1
            figures.error_messages.setdefault(outcome["error"], outcome.get("message", ""))
            continue
        figures.acknowledged += 1
        figures.results_checked += 1
        recorded = [s for s in by_call.get((outcome["tool"], outcome["n"]), []) if s.status == "completed"]
        if not any(step.output == outcome["result"] for step in recorded):
            figures.lost.append(f"{outcome['tool']}({outcome['n']}) -> {outcome['result']}")
    figures.calls_run_under_two_steps = sum(1 for keyed in by_call.values() if len(keyed) > 1)
    runs_per_key = Counter((entry["run"], entry["key"]) for entry in executions)
    figures.steps_run_more_than_once = sum(1 for count in runs_per_key.values() if count > 1)
    for entry in executions:
        named = (entry["run"], entry["key"])
        step = steps.get(named)
        finished = None if step is None or step.status != "completed" else step.finished_at
        # The journal keeps times to the millisecond: a run that began within it is the same one.
        if finished is not None and entry["at"] > finished + 0.001:
            figures.completed_run_again.append(f"{entry['key']} on {entry['daemon']}")
        if entry["what"].startswith("charge") and runs_per_key[named] > 1:
            figures.at_most_once_doubled.append(entry["key"])
    figures.at_most_once_doubled = sorted(set(figures.at_most_once_doubled))


def main() -> None:  # pragma: no cover - a soak run by hand or from bench/
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--faults", type=int, default=60, help="faults in the schedule")
    parser.add_argument("--durability", choices=["full", "normal"], default="full")
    args = parser.parse_args()
    reason = netns.available()
    if reason is not None:
        raise SystemExit(f"cannot run: {reason}")
    with tempfile.TemporaryDirectory(prefix="toolbridge-soak-") as work:
        figures = asyncio.run(
            run_schedule(
                Path(work), seed=args.seed, faults=args.faults, long_cuts=True, durability=args.durability
            )
        )
    for line in figures.lines():
        print(line, flush=True)


if __name__ == "__main__":  # pragma: no cover
    main()
