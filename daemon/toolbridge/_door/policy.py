"""What a command's egress may do: allowed hosts and methods, secrets bound to hosts, a budget.

``Egress``, ``EgressRule`` and ``Secret`` are public (``toolbridge``); the door checks each
request against them (:mod:`toolbridge._door.gate`, for the proxy in :mod:`toolbridge._door.egress`).
"""

from __future__ import annotations

import re
import secrets as _random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Egress", "EgressRule", "Secret", "as_egress", "host_key"]

_HOST = re.compile(r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?")
_METHOD = re.compile(r"[A-Z]{1,20}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
DEFAULT_PORTS = (80, 443)
RESERVED = frozenset(
    {
        "PATH",
        "HOME",
        "NODE_OPTIONS",
        "NODE_EXTRA_CA_CERTS",
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    }
    | {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy"}
)
"""Variables a secret may not be named: the door and the sandbox's runtime set them."""


def host_key(host: str) -> str:
    """A host as written in a rule: lower case; ``host`` (ports 80 and 443) or ``host:port``."""
    if not isinstance(host, str) or not _HOST.fullmatch(host):
        raise ValueError(
            f"{host!r} is not a host: write a name (api.example.com), a wildcard "
            "(*.example.com) or either with a port (localhost:8443)"
        )
    return host.lower()


def _matches(pattern: str, host: str, port: int) -> bool:
    name, _, fixed = pattern.partition(":")
    if fixed and int(fixed) != port:
        return False
    if not fixed and port not in DEFAULT_PORTS:
        return False
    if name.startswith("*."):
        return host.endswith(name[1:]) and host != name[2:]
    return host == name


@dataclass(frozen=True)
class EgressRule:
    """Requests a sandbox may make to one host.

    Attributes:
        host: ``api.example.com`` (ports 80 and 443), ``*.example.com`` (its subdomains),
            or either with ``:port`` (that port only).
        methods: The HTTP methods allowed (all when ``None``).
        requires_confirmation: ``True``: each request waits for a person's approval (from
            ``bridge.approvals``, the CLI, the web view or MCP) before it leaves. Or a list
            of methods that do (``["POST"]``).
        private: Let a host *name* resolve to a loopback, private or link-local address.
            Off by default, so that an allowed name pointed inside your network (or made
            to point there by DNS rebinding) is refused; a host written as an address
            (``10.0.0.5:8080``) or as ``localhost`` means what it says.
    """

    host: str
    methods: Sequence[str] | None = None
    requires_confirmation: bool | Sequence[str] = False
    private: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "host", host_key(self.host))
        if self.methods is not None:
            object.__setattr__(self, "methods", tuple(_method(m) for m in self.methods))
        if not isinstance(self.requires_confirmation, bool):
            confirm = tuple(_method(m) for m in self.requires_confirmation)
            object.__setattr__(self, "requires_confirmation", confirm)

    def matches(self, host: str, port: int) -> bool:
        return _matches(self.host, host, port)

    def allows(self, method: str) -> bool:
        return self.methods is None or method in self.methods

    def confirms(self, method: str) -> bool:
        confirm = self.requires_confirmation
        return confirm if isinstance(confirm, bool) else method in confirm


def _method(method: object) -> str:
    if not isinstance(method, str) or not _METHOD.fullmatch(method.upper()):
        raise ValueError(f"{method!r} is not an HTTP method")
    return method.upper()


@dataclass(frozen=True, repr=False)
class Secret:
    """A credential the sandbox never holds: its variable ``name`` holds a placeholder.

    The door swaps the placeholder for ``value`` in the headers (``Authorization``, basic
    auth, any custom header) of requests to ``hosts`` only, and refuses, with a ``403``, a
    request carrying it to any other host.

    Attributes:
        name: The environment variable the sandbox gets (holding the placeholder).
        value: The credential. Never written to the sandbox, the journal, a trace or a span.
        hosts: The hosts it is sent to, written as in :class:`EgressRule`; each must be
            allowed by the command's egress.
    """

    name: str
    value: str = field(repr=False)
    hosts: Sequence[str] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"Secret name {self.name!r} is not an environment variable name")
        if self.name in RESERVED or self.name.startswith("TOOLBRIDGE_"):
            raise ValueError(f"Secret name {self.name!r} is a variable toolbridge sets: choose another")
        if not isinstance(self.value, str) or not self.value:
            raise ValueError(f"Secret {self.name!r} needs a non-empty string value")
        if isinstance(self.hosts, str) or not self.hosts:
            raise ValueError(f"Secret {self.name!r} needs hosts=[...], the hosts it may be sent to")
        object.__setattr__(self, "hosts", tuple(host_key(h) for h in self.hosts))

    def __repr__(self) -> str:
        return f"Secret(name={self.name!r}, value='***', hosts={list(self.hosts)!r})"

    def bound_to(self, host: str, port: int) -> bool:
        return any(_matches(pattern, host, port) for pattern in self.hosts)


@dataclass(frozen=True)
class Egress:
    """HTTP and HTTPS a command may make, through a proxy the daemon serves to it alone.

    Attributes:
        allow: Hosts (strings) or :class:`EgressRule` s; everything else is refused.
        secrets: :class:`Secret` s, swapped in at the door for their hosts.
        max_requests: Requests the command may make in all; later ones get a ``429``.
        upstream_ca: A PEM file of CAs trusted upstream besides the system's (a private CA).
        timeout: Seconds to connect upstream and for each read of its answer.
        max_body: Bytes of a request body the door reads (it is checked for placeholders).
    """

    allow: Sequence[str | EgressRule] = ()
    secrets: Sequence[Secret] = ()
    max_requests: int = 100
    upstream_ca: str | Path | None = None
    timeout: float = 30.0
    max_body: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        if isinstance(self.allow, str):
            raise TypeError("allow= is a list of hosts, not one string")
        rules = tuple(r if isinstance(r, EgressRule) else EgressRule(r) for r in self.allow)
        object.__setattr__(self, "allow", rules)
        object.__setattr__(self, "secrets", tuple(self.secrets))
        names = [s.name for s in self.secrets]
        if len(set(names)) != len(names):
            raise ValueError("two secrets have the same name")
        for secret in self.secrets:
            if not isinstance(secret, Secret):
                raise TypeError(f"secrets= takes Secret(...) values, got {secret!r}")
            for pattern in secret.hosts:
                if not any(r.host == pattern for r in rules):
                    raise ValueError(
                        f"Secret {secret.name!r} is bound to {pattern!r}, which allow= does not "
                        f"allow: add {pattern!r} to allow="
                    )
        if not isinstance(self.max_requests, int) or self.max_requests < 0:
            raise ValueError("max_requests= must be a whole number of at least 0")

    def rule(self, host: str, port: int) -> EgressRule | None:
        return next((r for r in self.allow if isinstance(r, EgressRule) and r.matches(host, port)), None)

    def placeholders(self) -> dict[str, str]:
        """A fresh placeholder per secret (per command): secret name -> placeholder."""
        return {s.name: f"tbsecret_{_random.token_hex(16)}" for s in self.secrets}


def as_egress(value: Egress | Sequence[str | EgressRule] | None) -> Egress | None:
    if value is None or isinstance(value, Egress):
        return value
    return Egress(allow=list(value))
