"""A run's network allow-list: which host names (and ports) its sandbox may reach
through pier's egress proxy. Pure."""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from pier.errors import InputError
from pier.outbound import OutboundPolicy, OutboundRefused, parse_address

DEFAULT_PORTS: tuple[int, ...] = (443, 80)
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-.*")


@dataclass(frozen=True)
class Rule:
    pattern: str  # a host name, *.suffix, or an IP literal; lower case
    ports: tuple[int, ...]

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.pattern.startswith("*."):
            return host.endswith(self.pattern[1:]) and fnmatch.fnmatchcase(host, self.pattern)
        return host == self.pattern


@dataclass(frozen=True)
class AllowList:
    rules: tuple[Rule, ...]

    @property
    def patterns(self) -> list[str]:
        return [r.pattern + ("" if r.ports == DEFAULT_PORTS else f":{r.ports[0]}") for r in self.rules]

    def rule_for(self, host: str, port: int) -> Rule | None:
        literal = parse_address(host)  # an address in any spelling matches its rule
        host = str(literal) if literal else host.lower().rstrip(".")
        return next((rule for rule in self.rules if rule.matches(host, port)), None)


def allow_list(entries: Iterable[str], field: str = "network.allow") -> AllowList:
    """Rules from entries such as "pypi.org", "*.npmjs.org", "git.corp:8443" or
    "10.0.0.5:5432". Raises InputError naming the entry that is not one."""
    return AllowList(tuple(_rule(str(entry), field) for entry in entries))


def refuse_disallowed(entries: Iterable[str], policy: OutboundPolicy, field: str = "network.allow") -> None:
    """Raises OutboundRefused naming the first entry that is, or resolves now to, an
    address the outbound policy refuses (127.0.0.1, localhost, ::1, 10.0.0.1...).
    A wildcard has no address until a name is asked for: the proxy judges that name
    when it connects, as it judges every other."""
    for entry in entries:
        rule = _rule(str(entry), field)
        if "*" in rule.pattern:
            continue
        for port in rule.ports:
            try:
                policy.check_name(rule.pattern, port)
            except OutboundRefused as exc:
                raise OutboundRefused(f"'{entry}'", exc.reason, field) from None


def _rule(entry: str, field: str) -> Rule:
    text = entry.strip().lower()
    host = text
    ports: tuple[int, ...] = DEFAULT_PORTS
    if text.startswith("["):  # [v6]:port
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            ports = (_port(rest[1:], entry, field),)
    elif text.count(":") == 1:
        host, port = text.split(":")
        ports = (_port(port, entry, field),)
    literal = parse_address(host)  # 0177.0.0.1, 2130706433, [::127.0.0.1]: the address they spell
    if literal is not None or _is_name(host):
        return Rule(str(literal) if literal else host, ports)
    raise InputError(
        f"{field}: '{entry}' is not a host: give a name (pypi.org), a wildcard for subdomains "
        "(*.npmjs.org), or an IP address, optionally with :port (443 and 80 otherwise)"
    )


def _port(text: str, entry: str, field: str) -> int:
    if text.isdigit() and 0 < int(text) < 65536:
        return int(text)
    raise InputError(f"{field}: '{entry}' has no valid port after ':' (1-65535)")


def is_ip(host: str) -> bool:
    """Whether host is an IPv4 or IPv6 address (not a name)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_name(host: str) -> bool:
    if not host or not set(host) <= _NAME_CHARS or ".." in host or host.startswith((".", "-")):
        return False
    return "*" not in host or (host.startswith("*.") and "*" not in host[2:] and "." in host[2:])
