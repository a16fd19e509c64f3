"""The egress proxy putting a secret in, on 127.0.0.1 in front of two HTTPS test
servers with their own test CA: the secret's host sees the value, every other
host a plain tunnel and the placeholder; the run's CA vouches for its secret
hosts only."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.tls_server import TLSServer

from pier.egress import EgressProxy, allow_list
from pier.egress.ca import RunCA
from pier.egress.inject import LiveInjection
from pier.egress.proxy import EgressGrant
from pier.outbound import allowing

TOKEN = "ghp_realvalue1234567890"
PLACEHOLDER = "pier-secret-0123456789abcdef"
# The test servers listen on loopback, which the operator must let runs reach.
LOOPBACK = allowing(["127.0.0.1"])


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[TLSServer, TLSServer]]:
    made = (TLSServer("127.0.0.1", tmp_path).start(), TLSServer("127.0.0.1", tmp_path / "other"))
    (tmp_path / "other").mkdir()
    made[1].start()
    yield made
    for server in made:
        server.stop()


@pytest.fixture
def proxy() -> Iterator[EgressProxy]:
    made = EgressProxy("127.0.0.1").start()
    yield made
    made.stop()


def open_grant(proxy: EgressProxy, secret: TLSServer, other: TLSServer, tmp_path: Path) -> EgressGrant:
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(secret.ca_file.read_bytes() + other.ca_file.read_bytes())
    injection = LiveInjection(PLACEHOLDER, TOKEN, allow_list([secret.address]))
    return proxy.open(
        "run-1", allow_list([secret.address, other.address]), 60, (injection,), bundle, LOOPBACK
    )


def tunnel(
    proxy: EgressProxy, grant: EgressGrant, target: TLSServer, trust: bytes
) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cadata=trust.decode())
    conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, context=context, timeout=30)
    credential = base64.b64encode(f"pier:{grant.token}".encode()).decode()
    conn.set_tunnel(target.host, target.port, headers={"Proxy-Authorization": f"Basic {credential}"})
    return conn


def get(
    proxy: EgressProxy, grant: EgressGrant, target: TLSServer, trust: bytes, headers: dict[str, str]
) -> tuple[int, dict, dict[str, str]]:
    """A GET through the proxy as a sandbox would send it; status, JSON, headers."""
    conn = tunnel(proxy, grant, target, trust)
    conn.request("GET", "/user", headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    answer = json.loads(body) if response.getheader("content-type") == "application/json" else {}
    return response.status, answer, {k.lower(): v for k, v in response.getheaders()}


def test_the_secret_host_gets_the_value_and_the_sandbox_never_sees_it(proxy, servers, tmp_path):
    secret, other = servers
    grant = open_grant(proxy, secret, other, tmp_path)
    assert grant.ca is not None
    basic = base64.b64encode(f"x-access-token:{PLACEHOLDER}".encode()).decode()
    for _ in range(2):  # a second connection reuses the cached certificate
        status, answer, headers = get(
            proxy,
            grant,
            secret,
            grant.ca.pem,
            {"Authorization": f"Bearer {PLACEHOLDER}", "X-Key": PLACEHOLDER},
        )
        assert status == 200
        assert secret.seen[-1]["authorization"] == f"Bearer {TOKEN}"
        assert secret.seen[-1]["x-key"] == TOKEN
        # What comes back carries the placeholder again in its headers; the body is as the host sent it.
        assert headers["x-echo-authorization"] == f"Bearer {PLACEHOLDER}"
        assert answer["headers"]["authorization"] == f"Bearer {TOKEN}"
    get(proxy, grant, secret, grant.ca.pem, {"Authorization": f"Basic {basic}"})
    assert (
        secret.seen[-1]["authorization"]
        == "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    )
    assert grant.injected == 3


def test_one_connection_carries_several_requests_each_with_the_value(proxy, servers, tmp_path):
    secret, other = servers
    grant = open_grant(proxy, secret, other, tmp_path)
    assert grant.ca is not None
    conn = tunnel(proxy, grant, secret, grant.ca.pem)
    for path in ("/one", "/two"):
        conn.request("POST", path, body=b'{"n": 1}', headers={"Authorization": f"Bearer {PLACEHOLDER}"})
        response = conn.getresponse()
        assert response.status == 200 and json.loads(response.read())["path"] == path
    conn.close()
    assert [s["authorization"] for s in secret.seen] == [f"Bearer {TOKEN}"] * 2
    assert grant.injected == 2


def test_another_allowed_host_is_a_plain_tunnel_and_sees_the_placeholder(proxy, servers, tmp_path):
    secret, other = servers
    grant = open_grant(proxy, secret, other, tmp_path)
    # The other server is reached with its own certificate: the proxy does not look inside.
    status, _, _ = get(
        proxy, grant, other, other.ca_file.read_bytes(), {"Authorization": f"Bearer {PLACEHOLDER}"}
    )
    assert status == 200
    assert other.seen[-1]["authorization"] == f"Bearer {PLACEHOLDER}"
    assert not secret.seen and grant.injected == 0


def test_a_request_naming_another_host_inside_the_tunnel_is_refused(proxy, servers, tmp_path):
    secret, other = servers
    grant = open_grant(proxy, secret, other, tmp_path)
    status, _, _ = get(
        proxy, grant, secret, grant.ca.pem, {"Host": "evil.example", "Authorization": f"Bearer {PLACEHOLDER}"}
    )
    assert status == 421 and not secret.seen and grant.injected == 0


def test_a_secret_host_whose_certificate_does_not_verify_gets_nothing(proxy, servers, tmp_path):
    secret, _other = servers
    injection = LiveInjection(PLACEHOLDER, TOKEN, allow_list([secret.address]))
    grant = proxy.open(
        "run-1", allow_list([secret.address]), 60, (injection,), None, LOOPBACK
    )  # test CA not trusted
    with pytest.raises(OSError, match="502"):
        get(proxy, grant, secret, grant.ca.pem, {"Authorization": f"Bearer {PLACEHOLDER}"})
    assert not secret.seen


def test_a_sandbox_that_does_not_trust_the_run_ca_gets_nothing_and_the_run_is_told(proxy, servers, tmp_path):
    secret, other = servers
    grant = open_grant(proxy, secret, other, tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError):
        get(proxy, grant, secret, other.ca_file.read_bytes(), {"Authorization": f"Bearer {PLACEHOLDER}"})
    deadline = time.monotonic() + 30
    while not grant.refused and time.monotonic() < deadline:  # the proxy's side ends just after
        time.sleep(0.05)
    assert grant.refused == {f"{secret.address} (its TLS client did not trust the run's CA)": 1}
    assert not secret.seen


def test_the_run_ca_vouches_for_its_secret_hosts_only(tmp_path):
    ca = RunCA("run-1", ["api.github.com", "127.0.0.1"], datetime.timedelta(hours=1))
    client = ssl.create_default_context(cadata=ca.pem.decode())
    assert _handshake(ca.server_context("api.github.com"), client, "api.github.com") is None
    assert _handshake(ca.server_context("127.0.0.1"), client, "127.0.0.1") is None
    # Had pier minted one for another host, a sandbox trusting this CA would still refuse it.
    refused = _handshake(ca.server_context("evil.example"), client, "evil.example")
    assert refused is not None and "permitted subtree violation" in refused, refused


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, name: str) -> str | None:
    """A TLS handshake in memory; None when the client accepted, else why not."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_hostname=name)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side, out, into in ((c, c_out, s_in), (s, s_out, c_in)):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as exc:
                return str(exc)
            into.write(out.read())
        try:
            c.do_handshake()
            return None
        except ssl.SSLWantReadError:
            continue
        except ssl.SSLError as exc:
            return str(exc)
    return "no handshake"
