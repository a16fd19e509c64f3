from __future__ import annotations

import pytest

import pier.outbound

# Unit tests do no DNS: a name resolves to a public address (documentation-free,
# so the outbound policy lets it through), localhost to loopback, as a hosts file
# would say.
PUBLIC = "93.184.215.14"
HOSTS = {"localhost": ["127.0.0.1", "::1"]}


@pytest.fixture(autouse=True)
def no_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pier.outbound, "system_resolver", lambda host, port: HOSTS.get(host, [PUBLIC]))
