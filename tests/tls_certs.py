"""Certificate authorities and certificates made with the real ``openssl`` command, for TLS tests.

Each is an EC P-256 key and a PEM certificate in a directory of the test's own. A leaf names its
hosts in subjectAltName (DNS names and IP addresses), is for a server or a client (extended key
usage), and may be made already expired (``days=-1``: its notAfter is a day before now, which
OpenSSL 3.0's ``x509 -days`` writes as it is told).
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CertPair", "make_ca", "make_cert"]


@dataclass(frozen=True)
class CertPair:
    """A certificate and its private key, both PEM files."""

    cert: Path
    key: Path


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True, timeout=60)


def _new_key(directory: Path, name: str) -> Path:
    key = directory / f"{name}.key"
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key, cwd=directory)
    return key


def make_ca(directory: Path, name: str = "toolbridge test CA") -> CertPair:
    """A self-signed CA, valid for two days."""
    slug = name.replace(" ", "-")
    key = _new_key(directory, slug)
    cert = directory / f"{slug}.pem"
    _openssl(
        "req", "-x509", "-new", "-key", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return CertPair(cert=cert, key=key)


def make_cert(
    directory: Path,
    ca: CertPair,
    name: str,
    *,
    hosts: Sequence[str] = ("localhost", "127.0.0.1"),
    client: bool = False,
    days: int = 1,
) -> CertPair:
    """A leaf certificate signed by ``ca``: for ``hosts``, a server's (or a client's), ``days`` long."""
    key = _new_key(directory, name)
    request = directory / f"{name}.csr"
    cert = directory / f"{name}.pem"
    _openssl("req", "-new", "-key", key, "-out", request, "-subj", f"/CN={name}", cwd=directory)
    names = []
    for host in hosts:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            names.append(f"DNS:{host}")
        else:
            names.append(f"IP:{host}")
    extensions = directory / f"{name}.ext"
    lines = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}",
    ]
    if names:
        lines.append(f"subjectAltName={','.join(names)}")
    extensions.write_text("\n".join(lines) + "\n")
    _openssl(
        "x509", "-req", "-in", request, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial",
        "-out", cert, "-days", str(days), "-extfile", extensions,
        cwd=directory,
    )  # fmt: skip
    return CertPair(cert=cert, key=key)
