"""An HTTPS test server with its own test CA (made here with `cryptography`): it
records every request's headers and answers with them in JSON (with `echo`),
and echoes the Authorization header back in a response header (what a careless
API might do).
Bind it to 127.0.0.1 for unit tests, to the Docker bridge address for sandboxes;
trust it through `ca_file` (PIER_CA_BUNDLE)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import secrets
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _cert(subject: str, issuer_key: Any, issuer: x509.Name | None, public: Any, ca: bool, host: str | None):
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if host is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class TLSServer:
    host: str  # an IP address: the certificate names it
    folder: Path
    echo: bool = True  # the request's headers in the response body
    seen: list[dict[str, str]] = field(default_factory=list)  # each request's headers, names lower-cased
    _server: ThreadingHTTPServer | None = None

    def start(self) -> TLSServer:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        # A name of its own: OpenSSL picks a bundle's issuer by name.
        ca = _cert(
            f"pier test CA {secrets.token_hex(4)}", ca_key, None, ca_key.public_key(), ca=True, host=None
        )
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = _cert(self.host, ca_key, ca.subject, key.public_key(), ca=False, host=self.host)
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        chain = self.folder / "server.pem"
        chain.write_bytes(
            leaf.public_bytes(serialization.Encoding.PEM)
            + key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(chain)
        server = ThreadingHTTPServer((self.host, 0), _handler(self))
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True, name="tls-server").start()
        return self

    @property
    def ca_file(self) -> Path:
        return self.folder / f"test-ca-{self.host}.pem"

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _handler(owner: TLSServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the body, if any
            headers = {k.lower(): v for k, v in self.headers.items()}
            owner.seen.append(headers)
            data = json.dumps({"path": self.path, "headers": headers if owner.echo else {}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Echo-Authorization", headers.get("authorization", ""))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_GET

    return Handler
