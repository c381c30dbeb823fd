"""The egress guard: which addresses the service may connect to when it calls a URL on a user's behalf.

A worker sits next to Redis, PostgreSQL, the API's own ``/metrics`` and, in a cloud, the instance metadata service.
Any URL a job makes the service call (an enricher endpoint, an MCP server over HTTP, a webhook delivery) is therefore
resolved and every address it resolves to is checked before a connection is made; refused are

- loopback (127.0.0.0/8, ::1), unspecified (0.0.0.0, ::),
- private (10/8, 172.16/12, 192.168/16, fc00::/7, ...), link-local (169.254/16, fe80::/10),
- multicast, reserved, and anything else not globally routable (100.64/10, documentation ranges, ...),
- cloud metadata endpoints (169.254.169.254, 169.254.170.2, fd00:ec2::254, 100.100.100.200, 192.0.0.192),

and IPv6 forms that carry an IPv4 address (``::ffff:127.0.0.1``, 6to4, NAT64) are judged by that address too.
Host names spelled as numbers (``2130706433``, ``0x7f.1``, ``127.1``) are read the way the C resolver reads them.

An operator opens the guard in two ways, never a user:

- ``AGENTSEARCH_EGRESS_ALLOW``: a JSON list of CIDRs, addresses or host names allowed although not public
  (``["10.20.0.0/16", "tools.internal"]``); for every outbound call;
- ``agentsearch tools add ... --allow-internal``: the registered tool's own host may be internal
  (``EgressPolicy.allowing_host``); a redirect or a second host reached from it is still checked.

Cloud metadata addresses stay refused unless the allowlist names the exact address (``169.254.169.254/32``): a
broad internal range or ``--allow-internal`` never opens them.

The check runs at connect time, inside the HTTP client (``agentsearch.pipeline.security.transports``), and the
connection goes to the address that was checked: a name that resolved to a public address when a config was saved and to
127.0.0.1 now (DNS rebinding), or a redirect to an internal host, is refused all the same. The policy is here, with
the platform, because the settings check ``AGENTSEARCH_EGRESS_ALLOW`` with it when a process starts.

Usage::

    policy = EgressPolicy.parse(["10.20.0.0/16", "tools.internal"])
    guard = EgressGuard(policy)
    guard.addresses("api.example.org", 443)      # ["93.184.216.34"]: the checked addresses to connect to
    guard.addresses("127.0.0.1", 6379)           # raises EgressRefused: "127.0.0.1 is a loopback address ..."
    classify(ipaddress.ip_address("169.254.169.254"))   # "cloud metadata"
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# host, port -> the addresses it resolves to, as strings ("127.0.0.1", "::1")
Resolver = Callable[[str, int], Sequence[str]]

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata and credentials
        "169.254.169.253",  # AWS VPC DNS
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
HOW_TO_ALLOW = ("operators allow internal hosts with `agentsearch tools add --allow-internal` or "
                "AGENTSEARCH_EGRESS_ALLOW")
# What inet_aton reads as an IPv4 address: decimal, octal and hex parts, one to four of them.
_NUMERIC_HOST = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)(?:\.(?:0[xX][0-9a-fA-F]*|[0-9]+)){0,3}")
_HOST_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*")


class EgressRefused(Exception):
    """A connection the guard refused; the message says which address, why, and who can allow it."""

    def __init__(self, host: str, address: str | None, reason: str, literal: bool = False) -> None:
        self.host, self.address, self.reason, self.literal = host, address, reason, literal
        kind = f"{_article(reason)} {reason} address"
        if address is None:
            text = f"egress refused: {host}: {reason}"
        elif address == host:
            text = f"egress refused: {address} is {kind}"
        elif literal:  # another spelling of an address: 2130706433, ::ffff:127.0.0.1
            text = f"egress refused: {host} ({address}) is {kind}"
        else:
            text = f"egress refused: {host} resolves to {address}, {kind}"
        if address is None:
            super().__init__(text)
        elif reason == "cloud metadata":
            super().__init__(f"{text}; only an AGENTSEARCH_EGRESS_ALLOW entry naming exactly {address} opens it")
        else:
            super().__init__(f"{text}; {HOW_TO_ALLOW}")


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def classify(address: IPAddress) -> str | None:
    """Why an address is not public ("loopback", "private", "cloud metadata", ...), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return classify(address.ipv4_mapped)
        embedded = address.sixtofour or (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
                                         if address in NAT64 else None)
        if embedded is not None and (reason := classify(embedded)) is not None:
            return reason
        if address.scope_id:
            address = ipaddress.IPv6Address(str(address).split("%", 1)[0])
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address in METADATA_ADDRESSES:
        return "cloud metadata"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_private:
        return "private"
    if address.is_reserved:
        return "reserved"
    if not address.is_global:
        return "non-public"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address a host spelled as an IP literal stands for (brackets, zone ids and inet_aton spellings too)."""
    bare = host.strip().strip("[]").replace("%25", "%")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if _NUMERIC_HOST.fullmatch(bare):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


def _normal(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.scope_id:
            return ipaddress.IPv6Address(str(address).split("%", 1)[0])
    return address


def _host_key(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


@dataclass(frozen=True)
class EgressPolicy:
    """What an operator allows beyond public addresses: networks (CIDRs, single addresses) and host names."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressPolicy:
        """From ``["10.0.0.0/8", "127.0.0.1", "tools.internal"]``; ValueError names an entry that is neither."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in entries:
            text = str(entry).strip()
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
                continue
            except ValueError:
                pass
            name = _host_key(text)
            if not _HOST_NAME.fullmatch(name) or literal_address(name) is not None:
                raise ValueError(f"egress allowlist entry {entry!r} is neither a CIDR, an address nor a host name")
            hosts.add(name)
        return cls(tuple(networks), frozenset(hosts))

    def allowing_host(self, host: str) -> EgressPolicy:
        """This policy, plus one host (a registered tool's, with ``--allow-internal``) whatever it resolves to.

        The host as spelled (a name, or an address literal): another spelling or another host reached from it (a
        redirect) is checked as usual, and a cloud metadata address is never opened this way.
        """
        return EgressPolicy(self.networks, self.hosts | {_host_key(host)})

    def refusal(self, host: str, address: IPAddress) -> str | None:
        """Why connecting to ``address`` (found for ``host``) is refused, or None when it is allowed."""
        reason = classify(address)
        if reason is None:
            return None
        address = _normal(address)
        if reason == "cloud metadata" or address in METADATA_ADDRESSES:
            # Only an entry naming exactly this address opens it: never a range, a host name or --allow-internal.
            exact = any(n.num_addresses == 1 and address in n for n in self.networks)
            return None if exact else "cloud metadata"
        if _host_key(host) in self.hosts or any(address in n for n in self.networks):
            return None
        return reason


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the operating system's resolver gives for a host, in its order, each once."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class EgressGuard:
    """Resolves a host and checks every address against a policy: what a connection may then use."""

    def __init__(self, policy: EgressPolicy | None = None, resolver: Resolver | None = None) -> None:
        self.policy = policy or EgressPolicy()
        self.resolver = resolver or system_resolver

    def addresses(self, host: str, port: int) -> list[str]:
        """The checked addresses to connect to, in order; EgressRefused if any of them is refused, OSError if the
        name does not resolve.

        One refused address refuses the host: a name that answers with a public and a private address is not
        something a user's URL should reach, whichever answer a connection would take.
        """
        literal = literal_address(host)
        if literal is not None:
            found: list[IPAddress] = [literal]
        else:
            # A name that does not resolve is a connection error (OSError), as without the guard.
            found = [ipaddress.ip_address(a.replace("%25", "%")) for a in self.resolver(host, port)]
            if not found:
                raise OSError(f"{host} resolves to no address")
        for address in found:
            reason = self.policy.refusal(host, address)
            if reason is not None:
                raise EgressRefused(host.strip("[]"), str(_normal(address)), reason, literal=literal is not None)
        # An IPv4-mapped answer is connected to as the IPv4 address it is.
        return [str(a.ipv4_mapped) if a.version == 6 and a.ipv4_mapped is not None else str(a) for a in found]
