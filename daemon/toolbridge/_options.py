"""How tool calls run: timeouts, budgets, sizes and retries."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolbridge._durations import Duration, seconds

KIB = 1024
MIB = 1024 * KIB

DEFAULT_COMMAND_TIMEOUT = 300.0
"""Seconds a command may run when ``commands.run`` is given no ``timeout``."""


@dataclass(frozen=True, kw_only=True)
class ToolOptions:
    """Limits and retry policy for the tool calls of one command.

    Every time option takes seconds as a number or a string such as ``"250ms"``, ``"10s"``,
    ``"5m"`` or ``"1h30m"`` (see :mod:`toolbridge._durations`); it reads back as seconds.

    Attributes:
        tool_timeout: Seconds one attempt of a tool may run before it fails with
            ``ToolTimeout`` (retried while attempts remain).
        max_calls: Tool calls allowed in one command. The call after the last one gets a
            ``MaxCallsExceeded`` error and the command is stopped.
        wait_window: The longest, in seconds, that one wait step blocks before a fresh one
            continues the wait.
        attempts: How many times a failing tool is tried in all (1 means no retries).
            A tool's own ``attempts`` wins over this.
        retry_backoff: Seconds before the first retry; doubled for each further retry,
            with full jitter.
        retry_backoff_max: The longest wait between two attempts, in seconds.
        max_request_bytes: The largest call the sandbox may send (arguments included).
        max_reply_bytes: The largest result the sandbox may receive.
        max_in_flight: Tool calls one command may have running at once; the next is
            refused with ``RESOURCE_EXHAUSTED`` and told when to retry.
        max_call_rate: Tool calls a second one command may make on average; a call beyond
            it waits for its turn (it is not refused), holding one of ``max_in_flight``.
        call_burst: Tool calls one command may make at once before ``max_call_rate``
            paces it.
        max_streams: Call streams (``CallToolStream``) one command may have open at once;
            the next is refused with ``RESOURCE_EXHAUSTED``. A client needs one.
        max_connections: Connections one command may have open to the daemon at once (a
            client process needs one); past it a new one is closed as soon as it opens.
            Each command has a socket of its own, so its connections never take another's.
        approval_hold: Seconds a command waits, blocked on a call that needs a person's
            decision, before it is stopped and ``commands.run`` raises ``RunWaiting``
            (enter the run again once it is decided). The command's timeout and the
            call's ``tool_timeout`` do not count the wait.
        approval_timeout: Seconds until a request nobody decided expires; the call then
            fails with ``ApprovalExpired``.
    """

    tool_timeout: float = 30.0
    max_calls: int = 100
    wait_window: float = 20.0
    attempts: int = 3
    retry_backoff: float = 0.5
    retry_backoff_max: float = 10.0
    max_request_bytes: int = 256 * KIB
    max_reply_bytes: int = 1 * MIB
    max_in_flight: int = 64
    max_call_rate: float = 2000.0
    call_burst: int = 200
    max_streams: int = 16
    max_connections: int = 64
    approval_hold: float = 600.0
    approval_timeout: float = 86400.0

    if TYPE_CHECKING:  # what a caller may pass: durations as strings too (read back as floats)

        def __init__(
            self,
            *,
            tool_timeout: Duration = 30.0,
            max_calls: int = 100,
            wait_window: Duration = 20.0,
            attempts: int = 3,
            retry_backoff: Duration = 0.5,
            retry_backoff_max: Duration = 10.0,
            max_request_bytes: int = 256 * KIB,
            max_reply_bytes: int = 1 * MIB,
            max_in_flight: int = 64,
            max_call_rate: float = 2000.0,
            call_burst: int = 200,
            max_streams: int = 16,
            max_connections: int = 64,
            approval_hold: Duration = 600.0,
            approval_timeout: Duration = 86400.0,
        ) -> None: ...

    def __post_init__(self) -> None:
        for name in ("tool_timeout", "wait_window", "approval_hold", "approval_timeout"):
            object.__setattr__(self, name, seconds(getattr(self, name), option=f"ToolOptions.{name}"))
        for name in ("retry_backoff", "retry_backoff_max"):
            value = seconds(getattr(self, name), option=f"ToolOptions.{name}", allow_zero=True)
            object.__setattr__(self, name, value)
        for name in (
            "max_calls",
            "attempts",
            "max_request_bytes",
            "max_reply_bytes",
            "max_in_flight",
            "call_burst",
            "max_streams",
            "max_connections",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"ToolOptions.{name} must be a whole number of at least 1")
        if not (isinstance(self.max_call_rate, (int, float)) and self.max_call_rate > 0):
            raise ValueError("ToolOptions.max_call_rate must be a positive number of calls a second")

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry).

        Exponential with full jitter, so that many failing calls do not retry in lockstep.
        """
        ceiling = min(self.retry_backoff_max, self.retry_backoff * 2 ** (retry - 1))
        return random.uniform(0, ceiling)
