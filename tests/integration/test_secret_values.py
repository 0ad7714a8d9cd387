"""Secrets never rest in clear: a SecretStr argument and result through journal, trace, web view,
OpenTelemetry (content tracing on) and replay; the sandbox still receives the result usable.

The tool logs in with a password (a ``SecretStr`` argument) and returns an API key (a
``SecretStr`` result); a second tool declares its secrets in a plain JSON Schema
(``writeOnly`` and ``format: "password"``). Every place the call is kept or shown is then
searched, byte for byte, for the clear values.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import secrets
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel, SecretStr

from tests.e2e.test_approvals import pending
from tests.e2e.test_tracing import spans  # the host's span exporter (one per test session)
from tests.helpers import wait_until
from toolbridge import Bridge, CommandResult, tool
from toolbridge._journal.base import open_journal
from toolbridge._telemetry import tracing
from toolbridge._telemetry.otlp import run_spans
from toolbridge._ui.view import run_view

__all__ = ["spans"]

TOOLBRIDGE = str(Path(sys.executable).with_name("toolbridge"))

AGENT = """
import asyncio, hashlib, json, os, sys, time
from inngest_tools import tools

def fingerprint(value):
    # What the sandbox received, without printing the secrets (its output is journaled too).
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()

async def main():
    minted = await tools.mint_key(user="ada", password=os.environ["PASSWORD"])
    vault = await tools.vault_open(vault="prod", passphrase=os.environ["PASSPHRASE"])
    with open("received.json", "w") as out:
        json.dump({"minted": fingerprint(minted), "vault": fingerprint(vault)}, out)

asyncio.run(main())
if os.path.exists("hold"):
    time.sleep(300)  # still running when the host stops: a replay runs it again
"""


def fingerprint(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class Login(BaseModel):
    user: str
    password: SecretStr


class Minted(BaseModel):
    user: str
    api_key: SecretStr


VAULT_IN = {
    "type": "object",
    "properties": {"vault": {"type": "string"}, "passphrase": {"type": "string", "writeOnly": True}},
    "required": ["vault", "passphrase"],
}
VAULT_OUT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "token": {"type": "string", "format": "password"}},
}


@pytest.fixture
def content_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tracing.CONTENT_VARIABLE, "1")


def everything_kept(journal: Path) -> bytes:
    """The journal's bytes, its -wal's included (recent commits are there)."""
    return b"".join(
        path.read_bytes() for path in journal.parent.iterdir() if path.name.startswith(journal.name)
    )


async def test_secret_arguments_and_results_are_never_kept_or_shown_in_clear(
    tmp_path: Path, spans: InMemorySpanExporter, content_tracing: None
) -> None:
    password = "pw-" + secrets.token_hex(8)
    passphrase = "pp-" + secrets.token_hex(8)
    api_key = "key-" + secrets.token_hex(8)
    vault_token = "vt-" + secrets.token_hex(8)
    clear = [password, passphrase, api_key, vault_token]
    ran: list[str] = []

    def mint_key(args: Login) -> Minted:
        assert args.password.get_secret_value() == password  # the tool gets it usable
        ran.append("mint")
        return Minted(user=args.user, api_key=SecretStr(api_key))

    def vault_open(args: dict[str, str]) -> dict[str, str]:
        assert args["passphrase"] == passphrase
        ran.append("vault")
        return {"name": args["vault"], "token": vault_token}

    tools = {
        "mint_key": tool.step(input=Login, output=Minted, run=mint_key),
        "vault_open": tool.step(input=VAULT_IN, output=VAULT_OUT, run=vault_open),
    }
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "hold").write_text("")
    journal = tmp_path / "journal.db"
    argv = ["python3", "agent.py"]
    env = {"PASSWORD": password, "PASSPHRASE": passphrase}  # recorded as keyed hashes
    async with Bridge(journal=journal) as bridge:

        async def agent() -> CommandResult:
            async with bridge.run("secret-run") as step:
                return await step.sandbox.commands.run("agent", argv, tools=tools, cwd=tmp_path, env=env)

        interrupted = asyncio.ensure_future(agent())
        await wait_until((tmp_path / "received.json").exists)
        interrupted.cancel()  # as a host stopping mid-command
        with contextlib.suppress(asyncio.CancelledError):
            await interrupted
        first = json.loads((tmp_path / "received.json").read_text())
        # The sandbox received the results usable: the tool's author let it see them.
        assert first == {
            "minted": fingerprint({"user": "ada", "api_key": api_key}),
            "vault": fingerprint({"name": "prod", "token": vault_token}),
        }
        (tmp_path / "hold").unlink()
        (tmp_path / "received.json").unlink()
        # Run again, the command's completed calls are answered from the journal, each seal
        # opened: the same values reach the sandbox, and the tools do not run again.
        result = await agent()
        assert result.exit_code == 0, result.stderr
        assert json.loads((tmp_path / "received.json").read_text()) == first
        assert ran == ["mint", "vault"]

        reader = open_journal(str(journal))
        await reader.open()
        try:
            run = await reader.get_run("secret-run")
            assert run is not None
            steps = await reader.load_steps("secret-run")
            web = json.dumps(run_view(run, steps))
            exported = [dict(span.attributes or {}) for span in run_spans(run, steps, content=True)]
        finally:
            await reader.close()

    kept = everything_kept(journal)
    live_spans = json.dumps([dict(span.attributes or {}) for span in spans.get_finished_spans()])
    process = await asyncio.create_subprocess_exec(
        TOOLBRIDGE, "trace", "secret-run", "--journal", str(journal), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    traced = out.decode()
    assert "mint_key" in traced  # the probe does look at the call
    assert "mint_key" in live_spans
    for value in clear:
        assert value.encode() not in kept, f"{value} in the journal"
        assert value not in web, f"{value} in the web view's data"
        assert value not in json.dumps(exported), f"{value} in the OTLP export"
        assert value not in live_spans, f"{value} in a live span"
        assert value not in traced, f"{value} in toolbridge trace"


async def test_a_replay_with_another_secret_argument_is_another_call(tmp_path: Path) -> None:
    """Secret arguments are compared by keyed hash: the same secret replays, another runs."""
    seen: list[str] = []

    def mint_key(args: Login) -> Minted:
        seen.append(args.password.get_secret_value())
        return Minted(user=args.user, api_key=SecretStr("k-" + args.password.get_secret_value()))

    tools = {"mint_key": tool.step(input=Login, output=Minted, run=mint_key)}
    async with Bridge(journal=tmp_path / "journal.db", tools=tools) as bridge:
        first = await bridge.call_tool("mint_key", {"user": "ada", "password": "one"}, run_id="r")
        same = await bridge.call_tool("mint_key", {"user": "ada", "password": "one"}, run_id="r")
        other = await bridge.call_tool("mint_key", {"user": "ada", "password": "two"}, run_id="r2")
    assert first == same == {"user": "ada", "api_key": "k-one"}
    assert other == {"user": "ada", "api_key": "k-two"}
    assert seen == ["one", "two"]  # the first call replayed, not run again


async def test_a_sealed_secret_needs_the_hosts_key(tmp_path: Path) -> None:
    """The journal alone does not give the secret back: another key cannot open it."""

    def mint_key(args: dict[str, str]) -> Minted:
        return Minted(user=args["user"], api_key=SecretStr("the-key"))

    tools = {"mint_key": tool.step(output=Minted, run=mint_key)}
    journal = tmp_path / "journal.db"
    async with Bridge(journal=journal, tools=tools) as bridge:
        assert await bridge.call_tool("mint_key", {"user": "ada"}, run_id="r") == {
            "user": "ada",
            "api_key": "the-key",
        }
    assert b"the-key" not in everything_kept(journal)
    (tmp_path / "journal.db.key").unlink()
    async with Bridge(journal=journal, tools=tools, secret_key=secrets.token_bytes(32)) as bridge:
        with pytest.raises(Exception, match="does not open with this host's key"):
            await bridge.call_tool("mint_key", {"user": "ada"}, run_id="r")


async def test_a_call_waiting_for_a_person_never_shows_or_keeps_its_secrets(tmp_path: Path) -> None:
    """The request a person decides on masks secret arguments, in the journal and as listed.

    Both ways a schema marks a secret (``SecretStr``; ``writeOnly``). The request's fingerprint
    of its arguments (how a replay finds it) still tells one secret from another.
    """
    password = "pw-" + secrets.token_hex(8)
    passphrase = "pp-" + secrets.token_hex(8)
    other = "pp-" + secrets.token_hex(8)
    clear = [password, passphrase, other]

    def mint_key(args: Login) -> Minted:
        return Minted(user=args.user, api_key=SecretStr("k"))

    def vault_open(args: dict[str, str]) -> dict[str, str]:
        return {"name": args["vault"], "token": "t"}

    tools = {
        "mint_key": tool.step(input=Login, output=Minted, run=mint_key, requires_confirmation=True),
        "vault_open": tool.step(input=VAULT_IN, run=vault_open, requires_confirmation=True),
    }
    calls = [  # (run, tool, arguments, what the person must still see)
        ("m1", "mint_key", {"user": "ada", "password": password}, "ada"),
        ("m2", "mint_key", {"user": "ada", "password": other}, "ada"),
        ("v1", "vault_open", {"vault": "prod", "passphrase": passphrase}, "prod"),
        ("v2", "vault_open", {"vault": "prod", "passphrase": other}, "prod"),
        ("v3", "vault_open", {"vault": "prod", "passphrase": passphrase}, "prod"),
    ]
    fingerprints: dict[str, str] = {}
    journal = tmp_path / "journal.db"
    async with Bridge(journal=journal, tools=tools) as bridge:
        for run_id, name, arguments, visible in calls:
            waiting = asyncio.ensure_future(bridge.call_tool(name, arguments, run_id=run_id))
            [request] = await pending(bridge)
            shown = json.dumps([request.arguments, request.summary])
            assert "**********" in shown  # masked, and the rest still there to decide on
            assert visible in shown
            for value in clear:
                assert value not in shown, f"{value} shown to the person deciding"
            fingerprints[run_id] = request.args_hash
            await bridge.approvals.approve(request.id, by="ada")
            await waiting
    assert fingerprints["m1"] != fingerprints["m2"]
    assert fingerprints["v1"] == fingerprints["v3"] != fingerprints["v2"]
    kept = everything_kept(journal)
    for value in clear:
        assert value.encode() not in kept, f"{value} in the journal"
