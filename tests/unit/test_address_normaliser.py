"""One address normaliser (pier.outbound.parse_address) for every outbound and
allow-list check, property-tested: every spelling of an IPv4 address a resolver
or URL parser accepts (zero-padded, octal, hex, integer, fewer parts, a
trailing dot, IPv4-mapped, -compatible and -translated IPv6, brackets) reads as
the address it spells, agrees with the C library's inet_aton, and a loopback or
private one is refused whatever its spelling, with no DNS asked."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pier.egress.allow import allow_list
from pier.errors import InputError
from pier.outbound import OutboundPolicy, OutboundRefused, judged_as, parse_address, parse_allowed

V4 = st.integers(min_value=0, max_value=2**32 - 1)


def _part(value: int, style: str, pad: int) -> str:
    if style == "hex":
        return "0x" + "0" * pad + format(value, "x")
    if style == "octal":
        return "0" + "0" * pad + format(value, "o")
    return str(value)


@st.composite
def spellings(draw: st.DrawFn, number: int) -> str:
    """One inet_aton spelling of number: 1 to 4 parts (the last one holds the
    rest of the bits), each in decimal, octal or hex, zero-padded or not."""
    count = draw(st.integers(1, 4))
    octets = number.to_bytes(4, "big")
    head = list(octets[: count - 1])
    last = int.from_bytes(octets[count - 1 :], "big")
    parts = [*head, last]
    words = [_part(v, draw(st.sampled_from(["dec", "octal", "hex"])), draw(st.integers(0, 3))) for v in parts]
    return ".".join(words)


@given(V4.flatmap(lambda n: st.tuples(st.just(n), spellings(n))))
def test_every_inet_aton_spelling_reads_as_its_address_and_agrees_with_libc(case):
    number, text = case
    assert parse_address(text) == ipaddress.IPv4Address(number)
    assert socket.inet_aton(text) == number.to_bytes(4, "big")
    assert parse_address(text.upper().replace("0X", "0x")) == ipaddress.IPv4Address(number)
    assert parse_address(text + ".") == ipaddress.IPv4Address(number)


@given(st.text(alphabet="0123456789abcdefx.", max_size=24))
def test_a_string_of_address_characters_is_an_address_exactly_when_libc_says_so(text):
    try:
        expected = ipaddress.IPv4Address(socket.inet_aton(text)) if text and not text.endswith(".") else None
    except OSError:
        expected = None
    if text and not text.endswith("."):
        assert parse_address(text) == expected


@given(V4)
def test_ipv4_in_ipv6_is_judged_as_the_ipv4_address(number):
    v4 = ipaddress.IPv4Address(number)
    forms = [f"::ffff:{v4}", f"[::ffff:{v4}]", f"::ffff:0:{v4}", f"64:ff9b::{v4}"]
    if number > 1:  # ::0 and ::1 are IPv6's own unspecified and loopback addresses
        forms += [f"::{v4}", f"[::{v4}]", f"0:0:0:0:0:0:{v4}"]
    for text in forms:
        ip = parse_address(text)
        assert ip is not None and judged_as(ip) == v4, text


@given(V4.filter(lambda n: not ipaddress.IPv4Address(n).is_global), st.data())
def test_a_non_public_address_is_refused_in_every_spelling_without_dns(number, data):
    def no_dns(host: str, port: int) -> list[str]:
        raise AssertionError(f"{host} was sent to DNS: the normaliser should have read it")

    policy = OutboundPolicy(resolver=no_dns)
    v4 = ipaddress.IPv4Address(number)
    text = data.draw(
        st.sampled_from(
            [data.draw(spellings(number)), f"[::ffff:{v4}]", f"::ffff:0:{v4}"]
            + ([f"[::{v4}]"] if number > 1 else [])
        )
    )
    with pytest.raises(OutboundRefused):
        policy.resolve(text, 80)


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_every_ipv6_address_reads_as_itself(number):
    ip = ipaddress.IPv6Address(number)
    assert parse_address(str(ip)) == ip
    assert parse_address(ip.exploded) == ip
    assert parse_address(f"[{ip}]") == ip


@given(st.text(max_size=64))
def test_the_normaliser_never_raises(text):
    parse_address(text)


@pytest.mark.parametrize(
    "spelling", ["127.0.0.1", "127.1", "0177.0.0.1", "0x7f.0.0.1", "2130706433", "127.000.000.001", "0x7f000001",
                 "[::ffff:127.0.0.1]", "::ffff:7f00:1"],
)  # fmt: skip
def test_allow_lists_read_addresses_with_the_same_normaliser(spelling):
    """PIER_OUTBOUND_ALLOW and a run's network.allow see the address an entry
    spells: an operator's 127.0.0.1:5000 permits it however a request spells it
    (IPv4-mapped IPv6 included: a socket to it reaches the IPv4 host), and an
    allow-list entry is the address, not a name."""
    (entry,) = parse_allowed("127.0.0.1:5000")
    ip = parse_address(spelling)
    assert ip is not None and entry.permits(None, ip, 5000)
    if ":" not in spelling:  # a run's network.allow: the entry is the address, and matches it spelled so
        assert allow_list([f"{spelling}:5000"]).patterns == ["127.0.0.1:5000"]
        assert allow_list(["127.0.0.1:5000"]).rule_for(spelling, 5000) is not None


@pytest.mark.parametrize(
    "spelling", ["[::127.0.0.1]", "[::ffff:0:127.0.0.1]", "[2002:7f00:1::]", "[64:ff9b::7f00:1]"]
)
def test_other_ipv4_embeddings_are_refused_as_loopback_but_never_permitted_as_it(spelling):
    """Compatible, translated, 6to4 and NAT64 addresses are other hosts to a
    socket: judged as the IPv4 address they carry when refusing, they are not
    what an operator's 127.0.0.1 entry permits."""
    ip = parse_address(spelling)
    assert ip is not None and judged_as(ip) == ipaddress.IPv4Address("127.0.0.1")
    assert "loopback" in (OutboundPolicy().why_refused(str(ip), 5000) or "")
    (entry,) = parse_allowed("127.0.0.1:5000")
    assert not entry.permits(None, ip, 5000)
    assert OutboundPolicy(parse_allowed("127.0.0.1:5000")).why_refused(str(ip), 5000) is not None


@pytest.mark.parametrize("url_host", ["[::127.0.0.1]", "[::ffff:0:127.0.0.1]", "0177.0.0.1", "2130706433"])
def test_a_webhook_to_loopback_in_any_spelling_is_refused(url_host):
    """httpx refuses some spellings as URLs itself; the rest are read as loopback."""
    from pier.policies.webhooks import check_url

    with pytest.raises(InputError, match=r"loopback|is not a URL"):
        check_url(f"http://{url_host}:19555/hook", OutboundPolicy())
    if url_host.startswith("["):
        with pytest.raises(OutboundRefused, match="loopback"):
            check_url(f"http://{url_host}:19555/hook", OutboundPolicy())
