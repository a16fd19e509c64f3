"""The outbound policy: where pier may connect on a caller's behalf.

Every connection pier makes for a run or a collection (a webhook, a registry an
image ref names, a check source cloned on the host, an egress proxy upstream)
goes to an address this policy let through. It refuses loopback, link-local
(cloud metadata lives there), private and unique-local ranges, shared, reserved,
multicast and unspecified addresses (IPv4 and IPv6, an IPv4 address embedded in
IPv6 judged as the IPv4 address it carries), this machine's own addresses and
the networks its interfaces are on (the Docker networks included), unless the
operator names the destination in PIER_OUTBOUND_ALLOW.

Addresses are read by one normaliser, `parse_address`, whatever their spelling
(`127.1`, `0177.0.0.1`, `0x7f000001`, `2130706433`, `127.000.000.001`,
`[::127.0.0.1]`, `::ffff:127.0.0.1`): every check here and every allow-list
(`PIER_OUTBOUND_ALLOW`, a run's `network.allow`) sees the same address.

Names are judged by what they resolve to, at the moment of connecting: a caller
resolves once with `resolve`, and connects to the address it returned (a name
that resolves to a public address when accepted and to 127.0.0.1 when used is
still refused). A refusal says the destination is not allowed and why, never
anything learned by trying to connect.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pier.errors import InputError

SETTING = "PIER_OUTBOUND_ALLOW"
IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Addresses clouds answer instance metadata on that no range rule below catches.
METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: the v4 address is the last 32 bits
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible (RFC 4291 2.5.5.1)
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # IPv4-translated (RFC 2765)
_HEX = set("0123456789abcdef")
# (host, port) -> addresses; socket.getaddrinfo by default, a table in tests.
Resolver = Callable[[str, int], list[str]]


class OutboundRefused(InputError):
    """A destination the policy does not allow; the message names it, why, and
    the setting that would permit it."""

    def __init__(self, destination: str, reason: str, field_name: str | None = None):
        where = f"{field_name}: " if field_name else ""
        super().__init__(
            f"{where}{destination} is not an allowed destination: {reason}, which pier does not "
            f"connect to for a run; the operator can permit it by adding it to {SETTING}"
        )
        self.destination = destination
        self.reason = reason


@dataclass(frozen=True)
class Allowed:
    """One PIER_OUTBOUND_ALLOW entry: a host name, an address or a CIDR, with an
    optional port (any port without one)."""

    name: str | None
    network: Network | None
    port: int | None

    def permits(self, host: str | None, ip: IP, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            return host is not None and _bare(host) == self.name
        assert self.network is not None
        # An IPv4-mapped address is the IPv4 host itself (a socket connects there);
        # the other embeddings are refused as their IPv4 address, never permitted as it.
        same = {ip, ip.ipv4_mapped} if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else {ip}
        return any(a.version == self.network.version and a in self.network for a in same)


def names(entries: Iterable[Allowed], host: str, port: int) -> tuple[Allowed, ...]:
    """The entries that name host:port as written, without resolving it: a name
    entry the same name, an address or range entry an address literal in it."""
    literal = parse_address(host)
    return tuple(
        entry
        for entry in entries
        if (entry.port is None or entry.port == port)
        and (
            entry.name == _bare(host)
            if entry.name is not None
            else literal is not None and entry.permits(None, literal, port)
        )
    )


def parse_allowed(text: str, setting: str = SETTING) -> tuple[Allowed, ...]:
    """PIER_OUTBOUND_ALLOW's entries (comma-separated: `registry.lan`, `10.1.2.3`,
    `10.0.0.0/8`, `127.0.0.1:5000`, `[fd00::1]:443`, `[fd00::/8]`). Raises ValueError."""
    return tuple(_allowed(entry.strip(), setting) for entry in text.split(",") if entry.strip())


def _allowed(entry: str, setting: str = SETTING) -> Allowed:
    host, port = _split_port(entry.lower())
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"{setting}: '{entry}' has no valid port after ':' (1-65535)")
    number = int(port) if port is not None else None
    address, slash, prefix = host.partition("/")
    literal = parse_address(address)
    if literal is not None:
        try:
            return Allowed(None, ipaddress.ip_network(f"{literal}{slash}{prefix}", strict=False), number)
        except ValueError:
            raise ValueError(f"{setting}: '{entry}' has no valid prefix length after '/'") from None
    name = _bare(host)
    if not name or not all(c.isalnum() or c in "-._" for c in name):
        raise ValueError(f"{setting}: '{entry}' is not a host name, an address or a CIDR range")
    return Allowed(name, None, number)


def _split_port(text: str) -> tuple[str, str | None]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, (rest[1:] if rest.startswith(":") else None)
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, port
    return text, None


def _bare(host: str) -> str:
    return host.strip().strip("[]").lower().rstrip(".")


def parse_address(text: str) -> IP | None:
    """The address a host string spells, or None when it is a name. Every spelling
    a resolver or a URL parser would take for an address counts: the forms of
    inet_aton (one to four parts, each decimal, octal with a leading 0 or hex
    with 0x: `127.1`, `0177.0.0.1`, `0x7f.0.0.1`, `2130706433`,
    `127.000.000.001` is octal 127.0.0.1), IPv6 in brackets or not, with a zone
    (`fe80::1%eth0`) or an IPv4 tail in any of those forms, and a trailing dot.
    Never raises."""
    host = text.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host.split("%", 1)[0].rstrip(".")
    if not host or len(host) > 255:
        return None
    if ":" in host:
        return _parse_v6(host)
    number = _inet_aton(host)
    return None if number is None else ipaddress.IPv4Address(number)


def judged_as(ip: IP) -> IP:
    """The address a check judges ip as: the IPv4 address an IPv6 one carries
    (mapped, compatible, translated, 6to4, NAT64), else ip itself."""
    return _embedded_v4(ip) or ip


def _inet_aton(text: str) -> int | None:
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = [_aton_part(part) for part in parts]
    if any(v is None for v in values):
        return None
    numbers = [v for v in values if v is not None]
    *head, last = numbers
    if any(v > 0xFF for v in head) or last >= 1 << (8 * (5 - len(numbers))):
        return None
    value = 0
    for v in head:
        value = value << 8 | v
    return value << (8 * (5 - len(numbers))) | last


def _aton_part(part: str) -> int | None:
    if part.startswith("0x"):
        digits = part[2:]
        return int(digits, 16) if digits and set(digits) <= _HEX and len(digits) <= 64 else None
    if not part.isascii() or not part.isdigit() or len(part) > 64:
        return None
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8) if set(part) <= set("01234567") else None
    return int(part)


def _parse_v6(host: str) -> ipaddress.IPv6Address | None:
    head, _, tail = host.rpartition(":")
    if "." in tail:  # an IPv4 tail, which Python reads in dotted-decimal form only
        number = _inet_aton(tail)
        if number is None:
            return None
        host = f"{head}:{number >> 16:x}:{number & 0xFFFF:x}"
    try:
        return ipaddress.IPv6Address(host)
    except ValueError:
        return None


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))


def local_networks() -> tuple[set[IP], set[Network]]:
    """This machine's own addresses and the networks its interfaces are on (the
    Docker bridges among them), read from the interfaces now."""
    import psutil  # here: every pier command reads the settings, which import this module

    addresses: set[IP] = set()
    networks: set[Network] = set()
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                ip = ipaddress.ip_address(entry.address.split("%")[0])
            except ValueError:
                continue
            addresses.add(ip)
            if entry.netmask:
                with contextlib.suppress(ValueError):
                    networks.add(ipaddress.ip_network(f"{ip}/{entry.netmask}", strict=False))
    return addresses, networks


@dataclass(frozen=True)
class OutboundPolicy:
    allowed: tuple[Allowed, ...] = ()
    resolver: Resolver | None = field(default=None, compare=False)  # None: system_resolver
    # Extra ranges to refuse (the Docker networks a backend knows of, if any
    # is not on one of this machine's interfaces).
    extra_networks: tuple[Network, ...] = ()

    @classmethod
    def from_setting(cls, text: str, resolver: Resolver | None = None) -> OutboundPolicy:
        return cls(parse_allowed(text), resolver)

    def why_refused(self, address: str, port: int, host: str | None = None) -> str | None:
        """None when pier may connect to address:port (reached as host, when a
        name was given), else what the address is."""
        ip = parse_address(address)
        if ip is None:
            raise ValueError(f"{address!r} is not an address")
        if any(entry.permits(host, ip, port) for entry in self.allowed):
            return None
        return _kind(ip) or self._local_kind(judged_as(ip))

    def _local_kind(self, ip: IP) -> str | None:
        """A public address can still be this machine's, or on one of its networks;
        read from the interfaces each time, since Docker adds networks as it goes."""
        own, networks = local_networks()
        if ip in own:
            return "an address of this machine"
        if any(ip.version == n.version and ip in n for n in (*networks, *self.extra_networks)):
            return "an address on one of this machine's networks (a Docker network, a LAN)"
        return None

    def check(self, address: str, port: int, host: str | None = None, field_name: str | None = None) -> None:
        """Raises OutboundRefused unless pier may connect to address:port."""
        reason = self.why_refused(address, port, host)
        if reason is not None:
            shown = host if host and _bare(host) != _bare(address) else address
            raise OutboundRefused(_hostport(shown, port), _reason(reason, host, address), field_name)

    def resolve(self, host: str, port: int, field_name: str | None = None) -> list[str]:
        """The addresses to connect to for host:port, every one allowed: resolved
        once here, so the caller connects to what was checked. Raises
        OutboundRefused when any address the name has is refused (a name that
        points at loopback is refused, even beside a public address), OSError
        when it does not resolve."""
        literal = parse_address(host)
        bare = _bare(host)
        addresses = [str(literal)] if literal else (self.resolver or system_resolver)(bare, port)
        if not addresses:
            raise OSError(f"{host} does not resolve")
        for address in addresses:
            self.check(address, port, host, field_name)
        return addresses

    def check_name(self, host: str, port: int, field_name: str | None = None) -> None:
        """At accept time: refuse a destination that is, or resolves to, a refused
        address now. A name that does not resolve yet passes; it is judged again
        when pier connects."""
        with contextlib.suppress(OSError):
            self.resolve(host, port, field_name)


def _kind(ip: IP) -> str | None:
    embedded = _embedded_v4(ip)
    if embedded is not None:
        kind = _kind(embedded)
        return f"{kind} (as {ip})" if kind else None
    if ip in METADATA:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address (where cloud metadata is served)"
    if ip.is_unspecified:
        return "the unspecified address (this machine)"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved or shared address, not a public one"
    return None


def _reason(kind: str, host: str | None, address: str) -> str:
    if host and _bare(host) != _bare(address):
        return f"it resolves to {address}, {kind}"
    return f"it is {kind}"


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _embedded_v4(ip: IP) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, translated,
    6to4, NAT64), if any. `::` and `::1` are IPv6's own."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _COMPATIBLE:
        return None if int(ip) <= 1 else low
    if ip in _TRANSLATED or ip in _NAT64 or ip in _NAT64_LOCAL:
        return low
    return None


def allowing(entries: Iterable[str], resolver: Resolver | None = None) -> OutboundPolicy:
    """A policy that allows entries (tests, and callers building one by hand)."""
    return OutboundPolicy.from_setting(",".join(entries), resolver)
