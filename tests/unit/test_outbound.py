"""The outbound policy refuses every non-public range, in IPv4 and IPv6, unless
PIER_OUTBOUND_ALLOW names the destination; names are judged by what they
resolve to."""

from __future__ import annotations

import ipaddress

import pytest

from pier.outbound import OutboundPolicy, OutboundRefused, allowing, local_networks, parse_allowed
from pier.settings import Settings

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.1.2.3", "loopback"),
    ("::1", "loopback"),
    ("169.254.169.254", "metadata"),
    ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"),
    ("fd00:ec2::254", "metadata"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:169.254.169.254", "metadata"),
    ("::ffff:10.0.0.1", "private"),
    ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("100.64.0.1", "shared"),
    ("100.100.100.200", "metadata"),
    ("224.0.0.1", "multicast"),
    ("ff0e::1", "multicast"),
    ("240.0.0.1", "private"),  # Python counts 240.0.0.0/4 among the private ranges
]


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_every_non_public_range_is_refused(address: str, kind: str) -> None:
    reason = OutboundPolicy().why_refused(address, 443)
    assert reason is not None and kind in reason
    with pytest.raises(OutboundRefused, match="PIER_OUTBOUND_ALLOW"):
        OutboundPolicy().check(address, 443, field_name="webhook_url")


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert OutboundPolicy().why_refused(address, 443) is None


def test_this_machines_own_addresses_are_refused() -> None:
    own, _ = local_networks()
    assert own, "the machine has at least its loopback address"
    policy = OutboundPolicy()
    for ip in own:
        assert policy.why_refused(str(ip), 80) is not None


def test_a_public_address_on_a_local_network_is_refused() -> None:
    # A Docker network an operator created on a public range.
    extra = (ipaddress.ip_network("93.184.0.0/16"),)
    policy = OutboundPolicy(extra_networks=extra)
    assert "networks" in (policy.why_refused("93.184.215.14", 443) or "")


def test_the_operator_setting_permits_an_address_a_range_a_name_and_a_port() -> None:
    policy = allowing(["127.0.0.1:5000", "10.0.0.0/8", "registry.lan", "[fd00::/8]:443"])
    assert policy.why_refused("127.0.0.1", 5000) is None
    assert policy.why_refused("127.0.0.1", 5001) is not None  # other ports stay refused
    assert policy.why_refused("10.9.8.7", 22) is None
    assert policy.why_refused("192.168.0.1", 22) is not None
    assert policy.why_refused("192.168.0.9", 443, host="registry.lan.") is None
    assert policy.why_refused("fd00::5", 443) is None
    assert policy.why_refused("fd00::5", 80) is not None


def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    table = {"evil.example": ["93.184.215.14", "127.0.0.1"], "good.example": ["93.184.215.14"]}
    policy = OutboundPolicy(resolver=lambda host, port: table[host])
    with pytest.raises(OutboundRefused, match=r"evil.example:443 .*resolves to 127.0.0.1, a loopback"):
        policy.resolve("evil.example", 443, "network.allow")
    assert policy.resolve("good.example", 443) == ["93.184.215.14"]


def test_resolve_returns_what_was_checked_so_a_rebinding_name_cannot_swap_it() -> None:
    answers = iter([["93.184.215.14"], ["127.0.0.1"]])
    policy = OutboundPolicy(resolver=lambda host, port: next(answers))
    assert policy.resolve("rebind.example", 443) == ["93.184.215.14"]
    with pytest.raises(OutboundRefused):
        policy.resolve("rebind.example", 443)


def test_a_name_that_does_not_resolve_yet_passes_the_accept_check_only() -> None:
    def nothing(host: str, port: int) -> list[str]:
        raise OSError("no such name")

    policy = OutboundPolicy(resolver=nothing)
    policy.check_name("later.example", 443)
    with pytest.raises(OSError):
        policy.resolve("later.example", 443)


def test_the_message_says_not_allowed_and_names_the_setting_and_field() -> None:
    with pytest.raises(OutboundRefused) as caught:
        OutboundPolicy().check("127.0.0.1", 19001, field_name="image")
    message = str(caught.value)
    assert message.startswith("image: 127.0.0.1:19001 is not an allowed destination")
    assert "PIER_OUTBOUND_ALLOW" in message
    assert "open" not in message and "refused" not in message.replace("is not an allowed", "")


@pytest.mark.parametrize("bad", ["127.0.0.1:0", "10.0.0.0/8:99999", "white space", "a/b/c"])
def test_a_bad_setting_is_refused_at_start(bad: str) -> None:
    with pytest.raises(ValueError, match="PIER_OUTBOUND_ALLOW"):
        parse_allowed(bad)
    with pytest.raises(ValueError, match="PIER_OUTBOUND_ALLOW"):
        Settings(outbound_allow=bad)


def test_settings_build_the_policy() -> None:
    policy = Settings(outbound_allow="127.0.0.1:8080").outbound
    assert policy.why_refused("127.0.0.1", 8080) is None
    assert policy.why_refused("127.0.0.1", 8081) is not None
