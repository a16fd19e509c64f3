"""A run's own certificate authority, for the HTTPS connections pier's egress proxy
opens to put a secret in (and only those). Made with `cryptography` when the run
starts, its key kept in this process's memory, never written where a sandbox or
another run could read it. Name constraints limit what it can vouch for to the
run's secret hosts, so a sandbox that trusts it trusts nothing else because of
it; it expires with the run."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
import threading
from collections.abc import Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pier.egress.allow import is_ip

CLOCK_SKEW = datetime.timedelta(hours=1)
ALPN = ["http/1.1"]  # pier reads intercepted requests with h11: HTTP/1.1 only


class RunCA:
    """Issues one leaf certificate per host the proxy intercepts, on demand."""

    def __init__(self, trajectory_id: str, hosts: Iterable[str], lifetime: datetime.timedelta):
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._not_after = now + lifetime
        name = x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, f"pier run {trajectory_id[:32]} secrets CA")]
        )
        public = self._key.public_key()
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW)
            .not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_ca_usage(), critical=True)
            .add_extension(name_constraints(hosts), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pem: bytes = self.cert.public_bytes(serialization.Encoding.PEM)
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting a certificate for host (cached)."""
        with self._lock:
            context = self._contexts.get(host)
            if context is None:
                context = self._contexts[host] = self._context_for(host)
            return context

    def _context_for(self, host: str) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        leaf = (
            x509.CertificateBuilder()
            # The name is in the SAN; a host-like CN would be checked against the DNS
            # constraints too (OpenSSL), which an IP address host fails.
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pier secret host")]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW)
            .not_valid_after(self._not_after)
            .add_extension(x509.SubjectAlternativeName([_general_name(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(ALPN)
        _load_chain(context, leaf, key)
        return context


def name_constraints(hosts: Iterable[str]) -> x509.NameConstraints:
    """Only the hosts (a wildcard's parent domain for *.suffix). A name type with
    no host gets a subtree nothing has (`invalid`, 0.0.0.0/32): without one, RFC
    5280 leaves that type unconstrained."""
    names: list[x509.GeneralName] = []
    addresses: list[x509.GeneralName] = []
    for host in hosts:
        if is_ip(host):
            addresses.append(x509.IPAddress(ipaddress.ip_network(host)))
        else:
            names.append(x509.DNSName(host.removeprefix("*.")))
    if not names:
        names.append(x509.DNSName("invalid"))
    if not addresses:
        addresses += [x509.IPAddress(ipaddress.ip_network("0.0.0.0/32")),
                      x509.IPAddress(ipaddress.ip_network("::/128"))]  # fmt: skip
    return x509.NameConstraints(permitted_subtrees=names + addresses, excluded_subtrees=None)


def _ca_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
        key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
    )  # fmt: skip


def _general_name(host: str) -> x509.GeneralName:
    return x509.IPAddress(ipaddress.ip_address(host)) if is_ip(host) else x509.DNSName(host)


def _load_chain(context: ssl.SSLContext, leaf: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    """ssl loads a certificate and key from files only: a private temporary folder,
    deleted once loaded. The leaf key is worth nothing beyond this run's CA."""
    pem = leaf.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with tempfile.TemporaryDirectory(prefix="pier-leaf-") as folder:
        path = os.path.join(folder, "leaf.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(pem)
        context.load_cert_chain(path)
