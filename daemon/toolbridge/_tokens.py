"""Per-command tokens: who may call which tools.

A token is ``tb1.<id>.<secret>``. The id finds the grant; the secret is compared with
:func:`hmac.compare_digest`, so the time a check takes says nothing about how much of a
guessed secret was right. Only a hash of the secret is kept.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Generic, TypeVar

TOKEN_PREFIX = "tb1"
Grant = TypeVar("Grant")


def _hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def split_token(token: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed token, else ``None``."""
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def new_token() -> tuple[str, str, bytes]:
    """A fresh ``(token, id, secret_hash)``."""
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return f"{TOKEN_PREFIX}.{token_id}.{secret}", token_id, _hash(secret)


def secret_matches(secret: str, secret_hash: bytes) -> bool:
    return hmac.compare_digest(_hash(secret), secret_hash)


class TokenRegistry(Generic[Grant]):
    """Live tokens of running commands, held in memory and revoked when they end."""

    def __init__(self) -> None:
        self._grants: dict[str, tuple[bytes, Grant]] = {}
        # Tokens already checked, by their whole text: a stream re-checks its token on every
        # call, and a hash per call is a cost on the hot path. Looking a string up in a dict
        # compares it only after a keyed hash matched, so its timing tells a guesser nothing.
        # (Only the one right text of a token gets in, so a token id has at most one entry.)
        self._checked: dict[str, Grant] = {}
        self._checked_text: dict[str, str] = {}  # token id -> its checked text

    def mint(self, grant: Grant) -> tuple[str, str]:
        """Issue a token for ``grant``; returns ``(token, token_id)``."""
        token, token_id, secret_hash = new_token()
        self._grants[token_id] = (secret_hash, grant)
        return token, token_id

    def resolve(self, token: str) -> Grant | None:
        """The grant a valid, unrevoked token carries, else ``None``."""
        checked = self._checked.get(token)
        if checked is not None:
            return checked
        parts = split_token(token)
        if parts is None:
            return None
        entry = self._grants.get(parts[0])
        if entry is None or not secret_matches(parts[1], entry[0]):
            return None
        self._checked[token] = entry[1]
        self._checked_text[parts[0]] = token
        return entry[1]

    def revoke(self, token_id: str) -> None:
        self._grants.pop(token_id, None)
        token = self._checked_text.pop(token_id, None)
        if token is not None:
            del self._checked[token]
