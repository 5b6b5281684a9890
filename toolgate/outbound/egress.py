"""Outbound HTTP of declared calls: which addresses a connection may go to, and a transport that connects
only to an address it checked.

Rules (on while ``HITL_HTTP_DENY_PRIVATE`` is true: the production settings' default):

- **Resolve once, check every address, connect to a checked one.** The host of each connection is
  resolved once; every address it resolves to is checked; the socket is opened to one of those very
  addresses (in the resolver's order), never by resolving the name again. A name that answers a public
  address to the check and a private one to a second lookup (DNS rebinding) can therefore not reach the
  private one. The request keeps its ``Host`` header, TLS server name (SNI) and certificate check for the
  host name: only the socket is opened by address.
- **Refused**: every address that is not public (``address_allowed``): loopback, link-local (cloud
  metadata included), private, carrier-grade NAT, unspecified, multicast, reserved and documentation
  ranges, whatever spelling the URL used (decimal, hex, octal, short IPv4 forms, IPv4-mapped IPv6). A
  host is refused when **any one** of its addresses is refused; nothing is sent.
- **Allowed** (``HITL_HTTP_ALLOW_PRIVATE``, comma-separated host names and networks an operator trusts):
  a host whose name is listed, whatever it resolves to; an address inside a listed network. A host name
  is compared without case and without one trailing dot; a bare address is a one-address network.
- Redirects are never followed (``toolgate.outbound.http_requests``), so a public server cannot send a call on to a
  private one.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import httpcore
import httpx

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The IPv6 prefix whose low 32 bits are an IPv4 address a NAT64 gateway forwards to (RFC 6052).
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_HOST_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")
# A last label like these makes an address in another spelling (127.1, 2130706433, 0x7f000001), not a name.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


class EgressRefused(Exception):
    """A connection the egress rules refuse; the message names the host, never an address or a secret."""


@dataclass(frozen=True)
class AllowList:
    """The parsed ``HITL_HTTP_ALLOW_PRIVATE``: host names (lower case, no trailing dot) and networks."""

    names: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()


def parse_allow_list(value: str | Iterable[str]) -> tuple[AllowList, list[str]]:
    """(what ``value`` allows, one problem per bad entry). ``value`` is a comma-separated text or a list of
    entries; an entry is a host name, an address or a network in CIDR form. A bad entry allows nothing
    (fail closed) and is reported by the system check (toolgate/checks.py); a problem quotes the entry."""
    entries = value.split(",") if isinstance(value, str) else [str(entry) for entry in value]
    names: set[str] = set()
    networks: list[IPNetwork] = []
    problems: list[str] = []
    for entry in (raw.strip() for raw in entries):
        if not entry:
            continue
        if ("/" in entry and "://" not in entry) or _is_address(entry):
            try:
                networks.append(ipaddress.ip_network(entry))
            except ValueError as error:
                problems.append(f"{entry!r} is not a network: {error}")
            continue
        name = _normal_name(entry)
        if not _HOST_NAME.fullmatch(name) or len(name) > 253 or _NUMERIC_LABEL.fullmatch(name.split(".")[-1]):
            problems.append(
                f"{entry!r} is neither a host name nor a network (no scheme, port, path or wildcard; "
                "an address is written in dotted or IPv6 form)"
            )
            continue
        names.add(name)
    return AllowList(frozenset(names), tuple(networks)), problems


def configured_allow_list() -> AllowList:
    """``HITL_HTTP_ALLOW_PRIVATE`` as the rules read it (its bad entries left out)."""
    from django.conf import settings

    value = getattr(settings, "HITL_HTTP_ALLOW_PRIVATE", "") or ""
    return _cached_allow_list(value if isinstance(value, str) else tuple(str(entry) for entry in value))


def allow_list_problems() -> list[str]:
    """The problems of ``HITL_HTTP_ALLOW_PRIVATE`` (empty when every entry is good)."""
    from django.conf import settings

    return parse_allow_list(getattr(settings, "HITL_HTTP_ALLOW_PRIVATE", "") or "")[1]


def address_allowed(address: IPAddress, *, allowed: AllowList) -> bool:
    """A connection may go to ``address`` when it is inside a network of the allow-list, or when it is
    public: ``ipaddress`` calls it global and it is neither multicast nor reserved. An IPv6 address that
    carries an IPv4 address a host or gateway would forward to (IPv4-mapped ``::ffff:0:0/96``, NAT64
    ``64:ff9b::/96``, 6to4 ``2002::/16``) is judged by that IPv4 address, so ``::ffff:127.0.0.1`` is
    loopback."""
    carried = _carried_ipv4(address)
    candidates = [address] if carried is None else [address, carried]
    if any(candidate in network for network in allowed.networks for candidate in candidates):
        return True
    judged = address if carried is None else carried
    return judged.is_global and not judged.is_multicast and not judged.is_reserved


def checked_addresses(*, host: str, port: int, allowed: AllowList) -> list[IPAddress]:
    """Resolve ``host`` once and return its addresses in the resolver's order, each one allowed: a host
    whose name is on the allow-list may use them all; otherwise every address must pass
    ``address_allowed``, and a single one that does not refuses the host (EgressRefused, naming the host
    only: the address it resolved to is logged for the operator, not told to the caller)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise httpcore.ConnectError(str(error)) from error
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]))
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise httpcore.ConnectError(f"{host} resolves to no address")
    if _normal_name(host) in allowed.names:
        return addresses
    for address in addresses:
        if not address_allowed(address, allowed=allowed):
            logger.warning("outbound call to %s refused: it resolves to non-public %s", host, address)
            raise EgressRefused(
                f"refusing to call {host}: it resolves to a non-public address (HITL_HTTP_DENY_PRIVATE is "
                "on; an operator can allow a trusted internal host with HITL_HTTP_ALLOW_PRIVATE)"
            )
    return addresses


class CheckedNetworkBackend(httpcore.SyncBackend):
    """httpcore's own sockets, opened only to an address ``checked_addresses`` returned for the host."""

    def __init__(self, *, allowed: AllowList) -> None:
        self.allowed = allowed

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = checked_addresses(host=host, port=port, allowed=self.allowed)
        for address in addresses[:-1]:
            try:
                return self._connect(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout):
                continue  # as socket.create_connection does: the next address
        return self._connect(addresses[-1], port, timeout, local_address, socket_options)

    def _connect(
        self,
        address: IPAddress,
        port: int,
        timeout: float | None,
        local_address: str | None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None,
    ) -> httpcore.NetworkStream:
        # An address literal: the operating system parses it; no name is looked up again.
        return super().connect_tcp(
            str(address), port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )


class CheckedTransport(httpx.HTTPTransport):
    """httpx's transport (its request and exception mapping untouched) over a connection pool whose every
    socket comes from ``CheckedNetworkBackend``.

    httpx gives ``HTTPTransport`` no public way to choose httpcore's network backend, so the pool it built
    is replaced by an equivalent one that has ours. Should a later httpx keep its pool elsewhere, this
    refuses to build (fail closed) rather than send unchecked; tests/toolgate/test_egress_guard.py pins it.
    Environment proxies are not used: a proxy would resolve the host itself, after the check.
    """

    def __init__(self, *, allowed: AllowList) -> None:
        ssl_context = httpx.create_ssl_context(trust_env=True)  # what httpx.Client() itself would verify with
        super().__init__(verify=ssl_context)
        if not isinstance(getattr(self, "_pool", None), httpcore.ConnectionPool):
            raise RuntimeError("httpx.HTTPTransport keeps no httpcore.ConnectionPool in _pool")
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context, network_backend=CheckedNetworkBackend(allowed=allowed)
        )


def checked_transport() -> CheckedTransport:
    """A transport that enforces the module rules with the configured allow-list."""
    return CheckedTransport(allowed=configured_allow_list())


@lru_cache(maxsize=8)
def _cached_allow_list(value: str | tuple[str, ...]) -> AllowList:
    return parse_allow_list(value)[0]


def _carried_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _is_address(entry: str) -> bool:
    try:
        ipaddress.ip_address(entry)
    except ValueError:
        return False
    return True


def _normal_name(host: str) -> str:
    name = host.lower()
    return name[:-1] if name.endswith(".") else name
