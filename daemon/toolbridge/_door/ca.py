"""A certificate authority of one command's own, for the door to end the sandbox's TLS.

The sandbox trusts this CA (and, since it has no other way out, needs nothing else). Its key
lives in the daemon's memory only and goes with the command; leaf certificates are made per
host on first use. Built with ``cryptography``: no hand-written crypto.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CommandCA"]

_VALID = datetime.timedelta(days=2)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


class CommandCA:
    """A fresh CA, and TLS server contexts for the hosts a command reaches."""

    def __init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(_name("toolbridge egress door (one command)"))
            .issuer_name(_name("toolbridge egress door (one command)"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self._contexts: dict[str, ssl.SSLContext] = {}

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def context_for(self, host: str) -> ssl.SSLContext:
        """A server context presenting a certificate for ``host`` signed by this CA."""
        context = self._contexts.get(host)
        if context is None:
            context = self._contexts[host] = self._make_context(host)
        return context

    def _make_context(self, host: str) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        try:
            san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            san = x509.DNSName(host)
        now = datetime.datetime.now(datetime.UTC)
        leaf = (
            x509.CertificateBuilder()
            .subject_name(_name(host))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.SubjectAlternativeName([san]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.set_alpn_protocols(["http/1.1"])  # the door speaks HTTP/1.1 to the sandbox
        # ssl loads a chain from files only: a private file, read at once and removed.
        fd, name = tempfile.mkstemp(prefix="toolbridge-leaf-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(
                    key.private_bytes(
                        serialization.Encoding.PEM,
                        serialization.PrivateFormat.PKCS8,
                        serialization.NoEncryption(),
                    )
                )
                handle.write(leaf.public_bytes(serialization.Encoding.PEM))
            context.load_cert_chain(name)
        finally:
            Path(name).unlink(missing_ok=True)
        return context
