"""The SSRF guard: a tenant-supplied URL may only reach public addresses, unless the operator
allows some private networks (`connectors.allowed_private_networks`). Every address the host
resolves to is checked, before each request and each redirect hop.

NOTE: the check resolves the name and the HTTP client resolves it again; a DNS server that answers
differently in between (rebinding) is not stopped here. Deployments that crawl untrusted sites
should also deny private egress at the network level.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from ingestion.connectors.base import SourceError


class AddressGuard:
    def __init__(self, allowed_networks: list[str]) -> None:
        self.allowed = [ipaddress.ip_network(n, strict=False) for n in allowed_networks]

    def _permitted(self, address: str) -> bool:
        ip = ipaddress.ip_address(address.split("%")[0])
        if any(ip in net for net in self.allowed):
            return True
        return ip.is_global and not ip.is_multicast

    def check(self, url: str) -> None:
        """Raise SourceError unless `url` is http(s) to a host whose every address is permitted."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise SourceError(f"only http and https URLs are allowed, not {parts.scheme or 'none'!r}")
        if not parts.hostname:
            raise SourceError(f"no host in URL {url!r}")
        try:
            infos = socket.getaddrinfo(parts.hostname, parts.port or 443, proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError) as exc:
            raise SourceError(f"cannot resolve {parts.hostname!r}: {exc}") from None
        for info in infos:
            if not self._permitted(info[4][0]):
                raise SourceError(
                    f"{parts.hostname} resolves to {info[4][0]}, a private, loopback or link-local "
                    "address; the operator has not allowed it (connectors.allowed_private_networks)"
                )
