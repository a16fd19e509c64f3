"""Plain HTTP through pier's egress proxy: a proxy client (curl, apt, pip, npm
with http_proxy set) sends `GET http://host/path HTTP/1.1` to the proxy, which
judges the URL's host as it judges a CONNECT's and, if the run may reach it,
sends the request on in origin form (`GET /path`) with the proxy's own headers
taken out. h11 reads and writes both sides; urllib splits the URL. Pure: what
the proxy forwards, where to and with which headers; the relaying is the
proxy's (pier.egress.proxy)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

HTTP_PORT = 80
# Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own: they end at the proxy.
# Transfer-Encoding stays: it frames the body h11 sends on.
_HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-authorization", b"proxy-connection", b"te",
               b"trailer", b"upgrade", b"host"}  # fmt: skip


class NotForwarded(ValueError):
    """A request the proxy does not forward, with what to do instead."""


@dataclass(frozen=True)
class Destination:
    host: str  # lower case, IPv6 without brackets
    port: int
    target: bytes  # origin form: /path?query
    authority: bytes  # the Host header sent on: host[:port] as the URL gave it

    @property
    def shown(self) -> str:
        """The host as a refusal names it: the port only when it is not HTTP's."""
        return shown(self.host, self.port, HTTP_PORT)


def destination(request: h11.Request) -> Destination:
    """Where an absolute-form request goes. Raises NotForwarded for a request that
    is not one (origin form, another scheme) or whose Host header names another
    host than its URL: the host judged is the host the request reaches."""
    text = request.target.decode("ascii", "replace")
    try:
        parts = urlsplit(text)
        port = parts.port or HTTP_PORT
    except ValueError:
        raise NotForwarded(f"pier egress: '{text[:200]}' is not a URL with a valid host and port") from None
    if parts.scheme.lower() != "http" or not parts.hostname:
        raise NotForwarded(
            "pier egress: the proxy forwards plain HTTP requests for http:// URLs (as a client that has "
            "http_proxy set sends them) and tunnels HTTPS with CONNECT (https_proxy); "
            f"'{text[:200]}' is neither"
        )
    host = parts.hostname.rstrip(".")
    named = _host_header(request.headers)
    if named is not None and named != (host, port):
        raise NotForwarded(
            f"pier egress: the request's Host header names {shown(*named, HTTP_PORT)} but its URL names "
            f"{shown(host, port, HTTP_PORT)}: they must be the same host"
        )
    authority = parts.netloc.rpartition("@")[2]
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(host, port, target.encode("ascii", "replace"), authority.encode("ascii", "replace"))


def outgoing_headers(headers: Iterable[tuple[bytes, bytes]], authority: bytes) -> list[tuple[bytes, bytes]]:
    """The request's headers as the host gets them: Host from the URL, the proxy's
    credentials and every hop-by-hop header (and those Connection names) left out,
    and `Connection: close` (one request per connection to the host)."""
    pairs = list(headers)
    named = {token.strip().lower() for name, value in pairs if name.lower() == b"connection"
             for token in value.split(b",")}  # fmt: skip
    kept = [(name, value) for name, value in pairs if name.lower() not in _HOP_BY_HOP | named]
    return [(b"host", authority), *kept, (b"connection", b"close")]


def shown(host: str, port: int, default_port: int) -> str:
    """host, host:port, or [v6]:port."""
    if port == default_port:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _host_header(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, int] | None:
    value = next((v for n, v in headers if n.lower() == b"host"), None)
    if value is None:
        return None
    try:
        parts = urlsplit("//" + value.decode("ascii", "replace"))
        return (parts.hostname or "").rstrip("."), parts.port or HTTP_PORT
    except ValueError:
        return ("", 0)
