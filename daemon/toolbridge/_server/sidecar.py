"""Sidecar tokens: sandboxes started elsewhere (a container, a remote VM) calling a bridge's tools.

A host mints a token for each such sandbox, naming the run its calls belong to, the
registered tools it may call, a call budget and an expiry. Tokens live in the journal (only
a hash of the secret), reached through the ``Journal`` protocol like everything stored, so
``toolbridge token`` in one process mints or revokes what ``toolbridge serve`` in another
accepts. Every call checks the token again,
so a revoked or expired token stops working at once, even on a stream opened before.

The calls of a token are steps of its run, nested under one ``sidecar`` step per token: they
are journaled, retried and replayed like a command's calls. The call budget is counted in
the journal, atomically, so it holds across daemon restarts and across daemons serving one
journal at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from toolbridge._calls.hub import ApprovalHub
from toolbridge._calls.scope import CommandScope
from toolbridge._durable.runs import Runs
from toolbridge._durable.steps import StepsFactory
from toolbridge._durations import seconds
from toolbridge._errors import ProtocolError, RunBusyError
from toolbridge._journal.base import Journal, open_journal
from toolbridge._json import canonical, dumps
from toolbridge._options import ToolOptions
from toolbridge._records import SidecarToken, StepRecord, check_run_id, now
from toolbridge._tokens import new_token, secret_matches, split_token
from toolbridge._tools.tool import Tool

__all__ = ["SidecarToken"]

MAX_TTL = 30 * 24 * 3600.0
"""The longest a sidecar token may live, in seconds (30 days)."""


def check_grant(run_id: object, tools: object, max_calls: object, ttl: object) -> tuple[str, ...]:
    """Validate what a token is to grant; returns the tool names.

    Raises:
        ValueError, TypeError: for a bad run id, tool list, budget or lifetime.
    """
    check_run_id(run_id)
    if isinstance(tools, str) or not isinstance(tools, Sequence):
        raise TypeError("tools must be a list of tool names")
    names = tuple(dict.fromkeys(tools))
    if not names or not all(isinstance(name, str) for name in names):
        raise ValueError("a sidecar token must grant at least one tool, by name")
    if not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < 1:
        raise ValueError("max_calls must be a whole number of at least 1")
    if seconds(ttl, option="ttl") > MAX_TTL:
        raise ValueError(f"ttl must be a positive number of seconds, at most {MAX_TTL:.0f} (30 days)")
    return names


class TokenStore:
    """Sidecar tokens, minted and checked here, kept by the journal."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    async def mint(self, *, run_id: str, tools: Sequence[str], max_calls: int, ttl: float) -> SidecarToken:
        """Store a new token (committed before this returns) and return it with its secret."""
        names = check_grant(run_id, tools, max_calls, ttl)
        token, token_id, secret_hash = new_token()
        created = now()
        minted = SidecarToken(
            id=token_id,
            run_id=run_id,
            tools=names,
            max_calls=max_calls,
            calls=0,
            created_at=created,
            expires_at=created + seconds(ttl, option="ttl"),
            token=token,
        )
        await self._journal.insert_token(minted, secret_hash)
        return minted

    async def revoke(self, token_id: str) -> bool:
        """Revoke a token; False when there is no such token or it already was."""
        return await self._journal.revoke_token(token_id, at=now())

    async def get(self, token_id: str) -> SidecarToken | None:
        return await self._journal.get_token(token_id)

    async def list(self) -> list[SidecarToken]:
        """Every token, newest first."""
        return await self._journal.list_tokens()

    async def check(self, token: str) -> SidecarToken | None:
        """The token's grant if it is well formed, known, matches, and is active."""
        parts = split_token(token)
        if parts is None:
            return None
        found = await self._journal.find_token(parts[0])
        if found is None or not secret_matches(parts[1], found[1]):
            return None
        return found[0] if found[0].active(at=now()) else None

    async def count_call(self, token_id: str) -> bool:
        """Count one call against the token's budget; False once the budget is spent."""
        return await self._journal.count_token_call(token_id)


@contextlib.asynccontextmanager
async def open_token_store(location: str | Path) -> AsyncIterator[TokenStore]:
    """The tokens of a journal, without serving (for ``toolbridge token``)."""
    journal = open_journal(location)
    await journal.open()
    try:
        yield TokenStore(journal)
    finally:
        await journal.close()


@dataclass(eq=False)
class _Served:
    token: SidecarToken
    scope: CommandScope
    step: StepRecord  # the token's step, held in memory while it is served


class SidecarScopes:
    """Turns valid sidecar tokens into call scopes, one per token, while a bridge serves.

    Args:
        journal: The bridge's journal.
        tools: The bridge's registered tools (read at a token's first call).
        runs: The bridge's open runs, shared with ``bridge.run``.
        steps_factory: Gives tool groups their ``ctx.step``.
        approvals: Where calls that need a person wait.
    """

    def __init__(
        self,
        journal: Journal,
        tools: Mapping[str, Tool],
        runs: Runs,
        steps_factory: StepsFactory,
        approvals: ApprovalHub,
    ) -> None:
        self.store = TokenStore(journal)
        self._approvals = approvals
        self._journal = journal
        self._tools = tools
        self._runs = runs
        self._steps_factory = steps_factory
        self._served: dict[str, _Served] = {}
        self._lock = asyncio.Lock()

    async def resolve(self, token: str) -> CommandScope | None:
        """The scope of an active sidecar token, else ``None``."""
        if split_token(token) is None:
            return None
        grant = await self.store.check(token)
        if grant is None:
            return None
        served = self._served.get(grant.id)
        if served is None:
            async with self._lock:
                try:
                    served = self._served.get(grant.id) or await self._serve(grant)
                except RunBusyError as busy:  # another daemon serves the token's run now
                    raise ProtocolError("UNAVAILABLE", str(busy)) from None
        return served.scope

    async def _serve(self, grant: SidecarToken) -> _Served:
        run = await self._runs.enter(grant.run_id)
        key = f"sidecar-{grant.id}"
        rec = await run.claim(key)
        if rec is None:
            rec = run.new_step(
                key,
                parent_key=None,
                kind="sidecar",
                name=grant.id,
                input_json=canonical(
                    {"tools": list(grant.tools), "max_calls": grant.max_calls, "expires_at": grant.expires_at}
                ),
            )
        else:
            rec.reopen()
            run.hold(rec)
        rec.attempts += 1
        await self._journal.write(rec)
        scope = CommandScope(
            run=run,
            command_key=key,
            tools={name: self._tools[name] for name in grant.tools if name in self._tools},
            options=ToolOptions(max_calls=grant.max_calls),
            steps_factory=self._steps_factory,
            approvals=self._approvals,
            calls=grant.calls,
            caller=f"sidecar token {grant.id}",
        )
        token_id = grant.id
        scope.count_call = lambda _scope: self.store.count_call(token_id)
        served = _Served(grant, scope, rec)
        self._served[grant.id] = served
        return served

    async def mint(self, *, run_id: str, tools: Sequence[str], max_calls: int, ttl: float) -> SidecarToken:
        """Mint a token granting registered tools (see ``Bridge.mint_token``).

        Raises:
            ValueError: for a tool not registered, or a bad run id, budget or lifetime.
        """
        unknown = sorted(set(tools) - set(self._tools)) if not isinstance(tools, str) else []
        if unknown:
            raise ValueError(f"no registered tool named {', '.join(map(repr, unknown))} on this bridge")
        return await self.store.mint(run_id=run_id, tools=tools, max_calls=max_calls, ttl=ttl)

    async def check(self, token: str) -> SidecarToken | None:
        """The grant of a presented token if it is valid and active; a journal=None bridge has none."""
        return None if self._journal.location is None else await self.store.check(token)

    async def revoke(self, token_id: str) -> bool:
        """Revoke a token and stop serving it; False when unknown or already revoked."""
        revoked = await self.store.revoke(token_id)
        await self.release(token_id)
        return revoked

    async def release(self, token_id: str) -> None:
        """Stop serving one token (its step is closed; a later valid call reopens it)."""
        served = self._served.pop(token_id, None)
        if served is not None:
            await self._close(served)

    async def close(self) -> None:
        """Close every token's step and leave its run; called when the bridge stops serving."""
        served, self._served = list(self._served.values()), {}
        for entry in served:
            await self._close(entry)

    async def _close(self, served: _Served) -> None:
        run = served.scope.run
        rec = served.step
        rec.complete(dumps({"calls": min(served.scope.calls, served.token.max_calls)}))
        await self._journal.write(rec)
        await self._runs.leave(run, None)


def ttl_seconds(text: str) -> float:
    """``"90"``, ``"90s"``, ``"15m"``, ``"2h"``, ``"1h30m"`` or ``"7d"`` as seconds."""
    try:
        number: object = float(text)
    except ValueError:
        number = text
    return seconds(number, option="--ttl")
