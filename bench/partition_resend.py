"""How long each client takes to find a cut link and to resend once it heals.

Run as root (it builds network namespaces, tests/hosts/netns.py)::

    .venv/bin/python bench/partition_resend.py [--rounds 3] [--extra 0]

Each round starts ``toolbridge serve`` over mutual TLS on one namespace and a sandbox client
(Python's, then Node's) on another. The client calls ``hold``, and the sandbox's link is cut
while the tool runs. Two figures are taken. *Found* is the time from the cut until the client
drops its connection (its keepalive). *Answered* is the time from the heal until the call's
answer. The tool is released during the cut, so that answer is the daemon's recorded result,
sent again by the client on a new connection. ``--extra`` keeps the link cut that many
seconds more after the client has dropped it, so the client is backing off when it heals.
Prints the medians per client, and Node's over Python's, all from the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hosts import netns  # the repository root is on the path from here
from tests.hosts.conftest import PORT, App, Fifos, serving, toolbridge, until
from tests.hosts.sandbox import answers, start_client
from tests.tls_certs import CA, new_ca

HOSTS_APP = Path(__file__).resolve().parents[1] / "tests" / "hosts" / "app.py"


def _app(root: Path) -> App:
    """The hosts app (tests/hosts/app.py) in ``root``, as tests/hosts/conftest.py makes it."""
    root.mkdir()
    (root / "app").mkdir()
    shutil.copy(HOSTS_APP, root / "app" / "hosts_app.py")
    fifos = Fifos(root / "fifos")
    ledger = root / "ledger.jsonl"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOSTS_LEDGER": str(ledger),
        "HOSTS_FIFOS": str(fifos.dir),
    }
    return App(root / "app", ledger, fifos, env)


async def one_round(root: Path, ca: CA, *, node: bool, extra: float) -> tuple[float, float]:
    """(found, answered) in seconds, for one cut of one client."""
    app = _app(root)
    fifos = app.fifos
    journal = str(root / "journal.db")
    try:
        with netns.network() as net:
            host = net.host("daemon")
            server = ca.issue(f"daemon-{net.tag}", hosts=(host.address,))
            flags = (
                "--tls-cert",
                str(server.cert),
                "--tls-key",
                str(server.key),
                "--tls-client-ca",
                str(ca.cert),
            )
            async with serving(app, host, journal, *flags) as daemon:
                sandbox = net.host("sandbox")
                token = await toolbridge(
                    app, "token", "mint", "hosts_app:bridge", "--journal", journal,
                    "--run", "remote", "--all-tools", "--max-calls", "10",
                )  # fmt: skip
                client = ca.issue("sandbox-client", client=True, hosts=())
                client_env = {
                    "TOOLBRIDGE_ADDRESS": daemon.address,
                    "TOOLBRIDGE_TOKEN": token.splitlines()[0],
                    "TOOLBRIDGE_TLS_CA": str(ca.cert),
                    "TOOLBRIDGE_TLS_CERT": str(client.cert),
                    "TOOLBRIDGE_TLS_KEY": str(client.key),
                }
                fifos.expect("a")
                process = await start_client(
                    root, [("hold", {"label": "a"})], client_env, netns=sandbox.name, node=node
                )
                assert await fifos.started() == "a"
                sandbox.cut()
                cut = time.monotonic()
                await until(
                    lambda: not sandbox.connections(host.address, PORT), "the client to drop", timeout=90
                )
                found = time.monotonic() - cut
                await fifos.release("a")
                await asyncio.sleep(extra)
                sandbox.heal()
                healed = time.monotonic()
                got = await answers(process, timeout=120)
                answered = time.monotonic() - healed
                assert got == [{"result": {"held": "a"}}], got
                return found, answered
    finally:
        fifos.close()


async def main(rounds: int, extra: float) -> None:
    reason = netns.available()
    if reason is not None:
        raise SystemExit(f"partition_resend: {reason}")
    figures: dict[str, list[tuple[float, float]]] = {"python": [], "node": []}
    with tempfile.TemporaryDirectory(prefix="partition-resend-") as directory:
        ca = new_ca(Path(directory) / "pki")
        for n in range(rounds):
            for name in figures:  # alternating, so that both meet the same machine
                figures[name].append(
                    await one_round(Path(directory) / f"{name}-{n}", ca, node=name == "node", extra=extra)
                )
    print(f"partition_resend: {rounds} rounds per client, cut kept {extra:g} s after the drop")
    print("| client | found the cut (s, median) | answered after the heal (s, median) |")
    print("| --- | --- | --- |")
    medians = {}
    for name, taken in figures.items():
        found = statistics.median(f for f, _ in taken)
        answered = statistics.median(a for _, a in taken)
        medians[name] = (found, answered)
        print(f"| {name} | {found:.2f} | {answered:.2f} |")
    (pf, pa), (nf, na) = medians["python"], medians["node"]
    print(f"node / python: found {nf / pf:.2f}x, answered {na / pa:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--extra", type=float, default=0.0, help="seconds the cut lasts past the drop")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.extra))
