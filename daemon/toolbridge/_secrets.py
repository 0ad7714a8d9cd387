"""Secrets at rest: a key the host holds, a keyed hash to compare them, and a seal to keep them.

A value marked secret (pydantic ``SecretStr``/``SecretBytes``, or a schema's ``writeOnly`` /
``format: "password"``) is never written to the journal in clear. Two things need it all the
same: a replay must tell whether a step is asked for with the same secret (so the journal
keeps a keyed hash, which nobody without the key can test guesses against), and a replay
must answer a completed call whose result was a secret (so the journal keeps it sealed with
AES-GCM under the same key).

The key is 32 random bytes the host holds: given by the application (``Bridge(secret_key=)``,
needed when several hosts share a PostgreSQL journal), or a file created ``0600`` beside a
SQLite journal (``<journal>.key``). Whoever holds the key and the journal holds the secrets;
keep the key out of backups of the journal that leave the machine.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

__all__ = ["SEALED_PREFIX", "SecretBox", "key_file_beside", "state_dir"]

KEY_BYTES = 32
SEALED_PREFIX = "aesgcm:"
"""How a sealed secret starts in the journal (base64 of nonce and ciphertext follows)."""
DIGEST_PREFIX = "hmac-sha256:"


class SecretBox:
    """Keyed hashes and seals under one host key.

    Args:
        key: 32 bytes.

    Raises:
        ValueError: for a key of another length.
    """

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise ValueError(f"a secret key is {KEY_BYTES} bytes (secrets.token_bytes({KEY_BYTES}))")
        self._key = key

    def __repr__(self) -> str:  # never the key
        return "SecretBox(...)"

    @classmethod
    def ephemeral(cls) -> SecretBox:
        """A key for this process only (a journal that records nothing)."""
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SecretBox:
        """The key in ``path``, created there (``0600``, never replaced) when missing.

        Raises:
            ValueError: when the file exists but does not hold a key.
        """
        path = Path(path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            key = path.read_bytes()
            if len(key) != KEY_BYTES:
                raise ValueError(
                    f"{path} is not a toolbridge secret key ({len(key)} bytes, not {KEY_BYTES}): "
                    "restore the key the journal's secrets were sealed with"
                ) from None
            return cls(key)
        key = secrets.token_bytes(KEY_BYTES)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        return cls(key)

    def digest(self, value: str | bytes) -> str:
        """A keyed hash of ``value``: equal for equal values, useless without the key."""
        data = value.encode() if isinstance(value, str) else value
        return DIGEST_PREFIX + hmac.new(self._key, data, hashlib.sha256).hexdigest()

    def seal(self, value: str | bytes) -> str:
        """``value`` encrypted and authenticated (AES-GCM) as text for the journal."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        data = value.encode() if isinstance(value, str) else value
        nonce = secrets.token_bytes(12)
        sealed = AESGCM(self._key).encrypt(nonce, data, None)
        return SEALED_PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, text: str) -> bytes:
        """The bytes :meth:`seal` sealed.

        Raises:
            ValueError: when ``text`` was not sealed under this key (another key, or altered).
        """
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        raw = base64.b64decode(text.removeprefix(SEALED_PREFIX))
        try:
            return AESGCM(self._key).decrypt(raw[:12], raw[12:], None)
        except InvalidTag:
            raise ValueError(
                "a sealed secret in the journal does not open with this host's key: give the bridge "
                "the key it was sealed with (secret_key=, or the .key file beside the journal)"
            ) from None


def state_dir() -> Path:
    """The user's toolbridge state folder (the key of a PostgreSQL journal without one given)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "toolbridge"


def key_file_beside(journal_path: str | os.PathLike[str]) -> Path:
    """Where a SQLite journal's secret key lives by default."""
    return Path(f"{os.fspath(journal_path)}.key")
