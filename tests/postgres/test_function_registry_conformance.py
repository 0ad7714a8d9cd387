"""One suite, both journals: the registry of served durable functions and their invocations.

Each test runs on a SQLite file and on a fresh PostgreSQL database (``journal_url``), with
two journals (two daemons) on it, as ``function_ref`` across daemons uses them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest

from toolbridge._journal.base import Journal, open_journal
from toolbridge._journal.functions import Invocation, ServedFunction

REFUND = ServedFunction(
    id="refund",
    event_name="order/refund",
    description="Refund an order",
    schema={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)
NOTE = ServedFunction(id="note", event_name="invoke/note")


@pytest.fixture
async def daemons(journal_url: str) -> AsyncIterator[tuple[Journal, Journal]]:
    """Two journals on one location, as two daemons open it."""
    async with AsyncExitStack() as stack:
        opened = []
        for owner in ("host-a:1:a", "host-b:2:b"):
            journal = open_journal(journal_url, owner=owner)
            await journal.open()
            stack.push_async_callback(journal.close)
            opened.append(journal)
        yield opened[0], opened[1]


async def test_a_registration_is_seen_by_every_daemon_with_its_schema(
    daemons: tuple[Journal, Journal],
) -> None:
    a, b = daemons
    assert await a.functions.servers("refund") == []
    await b.functions.register([REFUND, NOTE], ttl=30)
    (server,) = await a.functions.servers("refund")
    assert (server.id, server.owner, server.event_name, server.description, server.schema) == (
        "refund",
        "host-b:2:b",
        "order/refund",
        "Refund an order",
        REFUND.schema,
    )
    (note,) = await a.functions.servers("note")
    assert (note.schema, note.event_name) == (None, "invoke/note")


async def test_registering_again_replaces_the_list_and_unregistering_removes_it(
    daemons: tuple[Journal, Journal],
) -> None:
    a, b = daemons
    await a.functions.register([REFUND], ttl=30)
    await b.functions.register([REFUND, NOTE], ttl=30)
    assert sorted(s.owner for s in await a.functions.servers("refund")) == ["host-a:1:a", "host-b:2:b"]
    await b.functions.register([NOTE], ttl=30)  # b serves refund no more
    assert [s.owner for s in await a.functions.servers("refund")] == ["host-a:1:a"]
    await a.functions.unregister()
    assert await b.functions.servers("refund") == []
    assert [s.owner for s in await a.functions.servers("note")] == ["host-b:2:b"]


async def test_a_registration_whose_lease_ran_out_does_not_count(daemons: tuple[Journal, Journal]) -> None:
    a, b = daemons
    await b.functions.register([REFUND], ttl=0)  # expired as it is written: a daemon gone silent
    assert await a.functions.servers("refund") == []
    await b.functions.request(Invocation(id="inv_1", function_id="refund", data={}, caller_run_id="r"))
    assert await b.functions.pending(limit=10) == []  # it serves nothing now, so it claims nothing
    await b.functions.register([REFUND], ttl=30)  # renewed: live again
    assert [s.owner for s in await a.functions.servers("refund")] == ["host-b:2:b"]
    assert [i.id for i in await b.functions.pending(limit=10)] == ["inv_1"]


async def test_an_invocation_is_recorded_once_and_pending_only_where_its_function_is_served(
    daemons: tuple[Journal, Journal],
) -> None:
    a, b = daemons
    await b.functions.register([REFUND], ttl=30)
    first = await a.functions.request(
        Invocation(id="inv_1", function_id="refund", data={"order_id": "o1"}, caller_run_id="r")
    )
    again = await a.functions.request(
        Invocation(id="inv_1", function_id="refund", data={"order_id": "changed"}, caller_run_id="r")
    )
    assert (first.state, first.data, first.caller_run_id) == ("pending", {"order_id": "o1"}, "r")
    assert again == first  # a replay of the calling step finds the invocation it made
    await a.functions.request(Invocation(id="inv_2", function_id="note", data={}, caller_run_id="r"))
    assert [i.id for i in await b.functions.pending(limit=10)] == ["inv_1"]  # b serves refund only
    assert await a.functions.pending(limit=10) == []  # a serves nothing


async def test_an_invocation_is_settled_once(daemons: tuple[Journal, Journal]) -> None:
    a, b = daemons
    await b.functions.register([REFUND], ttl=30)
    await a.functions.request(Invocation(id="inv_1", function_id="refund", data={}, caller_run_id="r"))
    assert await b.functions.settle("inv_1", "completed", output_json='{"ok": 1}', error=None)
    error = {"type": "FunctionNotFound", "message": "gone"}
    assert not await a.functions.settle("inv_1", "failed", output_json=None, error=error)  # too late
    settled = await a.functions.get("inv_1")
    assert settled is not None
    assert (settled.state, settled.output_json, settled.error, settled.served_by) == (
        "completed",
        '{"ok": 1}',
        None,
        "host-b:2:b",
    )
    assert settled.finished_at is not None
    assert settled.finished_at >= settled.created_at
    assert await b.functions.pending(limit=10) == []
    assert await a.functions.get("inv_missing") is None


async def test_an_invocation_whose_run_a_live_lease_holds_is_not_pending_for_others(
    daemons: tuple[Journal, Journal],
) -> None:
    a, b = daemons
    await a.functions.register([REFUND], ttl=30)
    await b.functions.register([REFUND], ttl=30)
    await a.functions.request(Invocation(id="inv_1", function_id="refund", data={}, caller_run_id="r"))
    await b.enter_run("refund/inv_1", lease=30)  # b claimed it: it runs it
    assert await a.functions.pending(limit=10) == []
    await b.release_run("refund/inv_1")  # b left it unsettled (it stopped): anyone may take it
    assert [i.id for i in await a.functions.pending(limit=10)] == ["inv_1"]


async def test_requesting_and_settling_wake_the_other_daemons_watching(
    daemons: tuple[Journal, Journal],
) -> None:
    a, b = daemons
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    stop = b.functions.watch(lambda kind, key: heard.put_nowait((kind, key)))
    await a.functions.request(Invocation(id="inv_1", function_id="refund", data={}, caller_run_id="r"))
    assert await asyncio.wait_for(heard.get(), 10) == ("invoked", "refund")
    await a.functions.settle("inv_1", "completed", output_json="1", error=None)
    assert await asyncio.wait_for(heard.get(), 10) == ("settled", "inv_1")
    stop()
    later: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    b.functions.watch(lambda kind, key: later.put_nowait((kind, key)))
    await a.functions.request(Invocation(id="inv_2", function_id="note", data={}, caller_run_id="r"))
    assert await asyncio.wait_for(later.get(), 10) == ("invoked", "note")
    assert heard.empty()  # stopped watching: not told
