"""The cost of the egress door: a proxied HTTPS request's p50 beside a direct one, same run.

One local HTTPS server (a test CA of its own) stands in for the remote host. A sandboxed
Python command (``http.client``) makes ``--requests`` GETs to it, timed inside the command:

- direct: straight to the server (possible under the process launcher only: the baseline);
- through the door under the process launcher (the daemon's proxy on the host's loopback);
- through the door under bubblewrap (the in-sandbox relay to the door's Unix socket);

each with a new connection per request (CONNECT and both TLS handshakes every time) and with
one kept-alive connection. Through the door each request is also journaled as a step and
carries a secret swapped in for its placeholder. Prints p50s (ms) and each ratio to direct.

Usage: python bench/egress.py [--requests 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.door.remote import WorldCA, remotes
from toolbridge import Bridge, BwrapLauncher, Egress, Secret

CREDENTIAL = "bench-credential"

AGENT = textwrap.dedent(
    """
    import http.client, json, os, ssl, sys, time
    port, count, via = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    context = ssl.create_default_context(cafile=sys.argv[4] if via == "direct" else None)
    headers = {"Authorization": "Bearer " + os.environ.get("API_TOKEN", "bench-credential")}
    proxy = os.environ.get("HTTPS_PROXY", "")

    def connection():
        if via == "direct":
            return http.client.HTTPSConnection("localhost", port, context=context)
        address = proxy.rsplit("@", 1)[1]
        host, proxy_port = address.rsplit(":", 1)
        conn = http.client.HTTPSConnection(host, int(proxy_port), context=context)
        user = proxy.split("//", 1)[1].rsplit("@", 1)[0]
        import base64
        auth = {"Proxy-Authorization": "Basic " + base64.b64encode(user.encode()).decode()}
        conn.set_tunnel("localhost", port, headers=auth)
        return conn

    def once(conn):
        started = time.perf_counter()
        conn.request("GET", "/bench", headers=headers)
        answer = conn.getresponse()
        assert json.loads(answer.read())["bearer_ok"], "the credential did not arrive"
        return (time.perf_counter() - started) * 1000

    fresh = []
    for _ in range(count):
        conn = connection()
        started = time.perf_counter()
        once(conn)
        fresh.append((time.perf_counter() - started) * 1000)
        conn.close()
    kept_conn = connection()
    once(kept_conn)  # the connection's own set-up is not what this measures
    kept = [once(kept_conn) for _ in range(count)]
    print(json.dumps({"fresh": fresh, "kept": kept}))
    """
)


def prepare(work: Path) -> WorldCA:
    work.chmod(0o755)  # a bwrap sandbox's user reads it
    (work / "agent.py").write_text(AGENT)
    ca = WorldCA(work)
    ca.path.chmod(0o644)
    return ca


async def measure(requests: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="toolbridge-bench-egress-") as folder:
        work = Path(folder)
        ca = prepare(work)
        results: dict[str, dict[str, float]] = {}
        async with remotes(ca, CREDENTIAL, 1) as (server,):
            egress = Egress(
                allow=[f"localhost:{server.port}"],
                secrets=[Secret("API_TOKEN", CREDENTIAL, hosts=[f"localhost:{server.port}"])],
                upstream_ca=ca.path,
                max_requests=10 * requests,
            )
            cases: list[tuple[str, Any, Egress | None, str]] = [
                ("direct (process launcher)", "process", None, "direct"),
                ("door (process launcher)", "process", egress, "door"),
                ("door (bwrap)", BwrapLauncher(), egress, "door"),
            ]
            for label, sandbox, given, via in cases:
                async with (
                    Bridge(journal=work / f"{via}-{len(results)}.db", sandbox=sandbox) as bridge,
                    bridge.run("bench") as step,
                ):
                    argv = ["python3", "agent.py", str(server.port), str(requests), via, str(ca.path)]
                    result = await step.sandbox.commands.run(
                        "agent", argv, cwd=work, egress=given, timeout=600
                    )
                if result.exit_code != 0:
                    raise SystemExit(f"{label}: {result.stderr}")
                times = json.loads(result.stdout)
                results[label] = {kind: statistics.median(times[kind]) for kind in ("fresh", "kept")}
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(measure(args.requests))
    if args.json:
        print(json.dumps(results))
        return
    base = results["direct (process launcher)"]
    print(
        f"egress: p50 of {args.requests} HTTPS GETs per case, timed in the command (ms; x = ratio to direct)"
    )
    print(f"{'':28} {'new connection':>22} {'kept-alive connection':>24}")
    for label, figures in results.items():
        fresh, kept = figures["fresh"], figures["kept"]
        print(
            f"{label:28} {fresh:10.2f} ({fresh / base['fresh']:5.1f}x)"
            f"     {kept:10.2f} ({kept / base['kept']:5.1f}x)"
        )


if __name__ == "__main__":
    main()
