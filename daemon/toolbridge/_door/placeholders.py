"""The placeholders a sandbox holds for its secrets: found in a request, swapped in its headers.

A command never sees a secret's value: its environment holds a placeholder, which the egress
door finds in a request (its path, body and headers, inside ``Basic`` credentials too) and,
once the request is allowed, swaps for the secret in the headers that go upstream, for the
secret's own hosts only.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import Iterable, Mapping, Sequence

from toolbridge._door.policy import Secret

__all__ = ["Placeholders"]


class Placeholders:
    """A command's secrets and their placeholders.

    Args:
        secrets: The command's secrets.
        placeholders: Secret name -> the placeholder the sandbox holds.
    """

    def __init__(self, secrets: Iterable[Secret], placeholders: Mapping[str, str]) -> None:
        self._secrets = {s.name: s for s in secrets}
        self._placeholders = dict(placeholders)

    def found_in(self, path: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> set[str]:
        """The names of the secrets whose placeholder a request carries anywhere."""
        texts = [path, body]
        for name, value in headers:
            texts.append(value)
            if name in (b"authorization", b"proxy-authorization") and value[:6].lower() == b"basic ":
                with contextlib.suppress(binascii.Error, ValueError):
                    texts.append(base64.b64decode(value[6:].strip()))
        return {
            name
            for name, placeholder in self._placeholders.items()
            if any(placeholder.encode() in text for text in texts)
        }

    def foreign(self, names: Iterable[str], host: str, port: int) -> list[str]:
        """Those of ``names`` whose secret is not bound to ``host:port``, sorted."""
        return sorted(name for name in names if not self._secrets[name].bound_to(host, port))

    def swap(self, headers: Sequence[tuple[bytes, bytes]], used: Iterable[str]) -> list[tuple[bytes, bytes]]:
        """``headers`` with the placeholders of the ``used`` secrets swapped for their values."""
        swaps = [(self._placeholders[n].encode(), self._secrets[n].value.encode()) for n in used]
        if not swaps:
            return list(headers)
        out: list[tuple[bytes, bytes]] = []
        for name, value in headers:
            if name == b"authorization" and value[:6].lower() == b"basic ":
                with contextlib.suppress(binascii.Error, ValueError):
                    decoded = base64.b64decode(value[6:].strip())
                    for placeholder, secret in swaps:
                        decoded = decoded.replace(placeholder, secret)
                    value = b"Basic " + base64.b64encode(decoded)
            for placeholder, secret in swaps:
                value = value.replace(placeholder, secret)
            out.append((name, value))
        return out
