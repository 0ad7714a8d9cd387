"""Sidecar token grants: what a token may be minted with, and when it stops working."""

from __future__ import annotations

import pytest

from toolbridge import SidecarToken
from toolbridge._server.sidecar import MAX_TTL, check_grant, ttl_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0), ("7d", 604800.0), ("1.5h", 5400.0)],
)
def test_durations_are_read_with_their_unit(text: str, seconds: float) -> None:
    assert ttl_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "h", "-5m", "0", "nan", "inf"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        ttl_seconds(text)


def test_a_grant_names_tools_once_each() -> None:
    assert check_grant("run", ["a", "b", "a"], 1, 60) == ("a", "b")


@pytest.mark.parametrize(
    ("run_id", "tools", "max_calls", "ttl", "error"),
    [
        ("", ["a"], 1, 60, ValueError),
        ("r\n", ["a"], 1, 60, ValueError),
        ("r", [], 1, 60, ValueError),
        ("r", "a", 1, 60, TypeError),
        ("r", [1], 1, 60, ValueError),
        ("r", ["a"], 0, 60, ValueError),
        ("r", ["a"], True, 60, ValueError),
        ("r", ["a"], 1, 0, ValueError),
        ("r", ["a"], 1, MAX_TTL + 1, ValueError),
    ],
)
def test_bad_grants_are_refused(
    run_id: object, tools: object, max_calls: object, ttl: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        check_grant(run_id, tools, max_calls, ttl)


def test_a_token_is_active_until_it_expires_or_is_revoked() -> None:
    token = SidecarToken(
        id="t", run_id="r", tools=("a",), max_calls=1, calls=0, created_at=100.0, expires_at=200.0
    )
    assert token.active(at=150.0)
    assert not token.active(at=200.0)
    revoked = SidecarToken(
        id="t",
        run_id="r",
        tools=("a",),
        max_calls=1,
        calls=0,
        created_at=100.0,
        expires_at=200.0,
        revoked_at=120.0,
    )
    assert not revoked.active(at=150.0)
