"""The egress guard: which addresses a call made on a user's behalf may reach, checked when the client connects.

Address classes and spellings are checked as values; the connect-time behaviour against a real HTTP server on
127.0.0.1 in this process, with resolvers the tests control (DNS rebinding: a name that answers one address when
looked at and another when connected to).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json

import httpx
import httpx2
import pytest
from pydantic import ValidationError

from agentsearch.pipeline.platform.egress import (
    EgressGuard,
    EgressPolicy,
    EgressRefused,
    classify,
    literal_address,
    system_resolver,
)
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.security.transports import egress_refusal, guarded_async_client, guarded_client
from tests.support.json_server import JsonServer

PUBLIC = "93.184.216.34"


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"), ("::1", "loopback"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("10.0.0.1", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.1.1", "private"),
    ("fc00::1", "private"), ("fd12:3456::1", "private"),
    ("169.254.1.1", "link-local"), ("fe80::1", "link-local"), ("fe80::1%eth0", "link-local"),
    ("169.254.169.254", "cloud metadata"), ("169.254.170.2", "cloud metadata"), ("fd00:ec2::254", "cloud metadata"),
    ("100.100.100.200", "cloud metadata"), ("192.0.0.192", "cloud metadata"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"), ("ff02::1", "multicast"),
    ("240.0.0.1", "private"),  # reserved (Python counts 240/4 as private too)
    ("255.255.255.255", "private"),
    ("100.64.0.1", "non-public"),  # carrier-grade NAT
    ("198.18.0.1", "private"),  # benchmarking
    # IPv6 spellings of IPv4 addresses are judged by the IPv4 address.
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.1.2.3", "private"), ("::ffff:169.254.169.254", "cloud metadata"),
    ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ("64:ff9b::a9fe:a9fe", "cloud metadata"),  # NAT64 of 169.254.169.254
])
def test_every_non_public_address_class_is_refused(address, reason):
    assert classify(ipaddress.ip_address(address)) == reason
    with pytest.raises(EgressRefused) as caught:
        EgressGuard().addresses(address, 80)
    assert caught.value.reason == reason and str(caught.value).startswith("egress refused: ")


@pytest.mark.parametrize("address", [PUBLIC, "8.8.8.8", "1.1.1.1", "172.32.0.1", "2606:4700:4700::1111",
                                     "::ffff:8.8.8.8"])
def test_public_addresses_are_allowed(address):
    assert classify(ipaddress.ip_address(address)) is None
    # What is connected to: the address itself (an IPv4-mapped one as the IPv4 address it stands for).
    expected = address.removeprefix("::ffff:")
    assert EgressGuard(resolver=_never).addresses(address, 443) == [expected]


def _never(host: str, port: int) -> list[str]:
    raise AssertionError(f"the resolver was asked about {host}")


@pytest.mark.parametrize("spelling", ["2130706433", "0x7f000001", "0177.0.0.1", "0x7f.1", "127.1", "017700000001",
                                      "0x7F.0.0.1", "[::ffff:127.0.0.1]", "[::1]"])
def test_other_spellings_of_loopback_are_read_as_the_address_they_are(spelling):
    address = literal_address(spelling)
    assert address is not None and (address.is_loopback or address.ipv4_mapped == ipaddress.ip_address("127.0.0.1"))
    # Read as an address by the guard itself: a resolver claiming a public answer is not consulted.
    with pytest.raises(EgressRefused, match="loopback"):
        EgressGuard(resolver=lambda host, port: [PUBLIC]).addresses(spelling, 80)


def test_the_system_resolver_reading_numeric_spellings_gives_the_same_verdict():
    # What glibc's getaddrinfo makes of these (inet_aton rules) is what the guard checks.
    for spelling in ("2130706433", "0x7f.1", "127.1", "localhost"):
        assert ipaddress.ip_address(system_resolver(spelling, 80)[0]).is_loopback, spelling
        with pytest.raises(EgressRefused, match="loopback"):
            EgressGuard(resolver=system_resolver).addresses(spelling, 80)


def test_names_that_are_not_addresses_go_to_the_resolver():
    for name in ("example.com", "1e100.net", "deadbeef", "0x7g.1"):
        assert literal_address(name) is None
    asked = []
    guard = EgressGuard(resolver=lambda host, port: asked.append((host, port)) or [PUBLIC])
    assert guard.addresses("api.example.org", 8443) == [PUBLIC]
    assert asked == [("api.example.org", 8443)]


def test_one_private_answer_among_public_ones_refuses_the_name():
    guard = EgressGuard(resolver=lambda host, port: [PUBLIC, "10.0.0.7"])
    with pytest.raises(EgressRefused, match=r"api\.example\.org resolves to 10\.0\.0\.7, a private address"):
        guard.addresses("api.example.org", 443)


def test_an_unresolvable_name_is_a_connection_error_not_a_refusal():
    def nxdomain(host, port):
        raise OSError("Name or service not known")

    with pytest.raises(OSError, match="not known"):
        EgressGuard(resolver=nxdomain).addresses("nowhere.invalid", 80)
    with pytest.raises(OSError, match="no address"):
        EgressGuard(resolver=lambda host, port: []).addresses("empty.test", 80)


# --- the operator's allowances ------------------------------------------------------------------------------------


def test_an_allowlisted_network_opens_its_addresses_only():
    guard = EgressGuard(EgressPolicy.parse(["10.0.0.0/8", "192.168.5.7"]))
    assert guard.addresses("10.1.2.3", 80) == ["10.1.2.3"]
    assert guard.addresses("192.168.5.7", 80) == ["192.168.5.7"]
    assert guard.addresses("::ffff:10.9.9.9", 80) == ["10.9.9.9"]  # the IPv4 it stands for, connected to as such
    for other in ("192.168.5.8", "127.0.0.1", "172.16.0.1"):
        with pytest.raises(EgressRefused):
            guard.addresses(other, 80)


def test_an_allowlisted_host_name_opens_that_name_whatever_it_resolves_to_but_not_other_names():
    policy = EgressPolicy.parse(["Tools.Internal."])
    resolver = {"tools.internal": ["10.0.0.5"], "other.internal": ["10.0.0.5"]}
    guard = EgressGuard(policy, resolver=lambda host, port: resolver[host])
    assert guard.addresses("tools.internal", 80) == ["10.0.0.5"]
    with pytest.raises(EgressRefused, match=r"other\.internal resolves to 10\.0\.0\.5"):
        guard.addresses("other.internal", 80)


def test_cloud_metadata_stays_refused_unless_its_exact_address_is_allowlisted():
    for entries in (["169.254.0.0/16"], ["0.0.0.0/0"], ["metadata.google.internal"]):
        guard = EgressGuard(EgressPolicy.parse(entries), resolver=lambda host, port: ["169.254.169.254"])
        with pytest.raises(EgressRefused, match="cloud metadata") as caught:
            guard.addresses("metadata.google.internal", 80)
        assert "only an AGENTSEARCH_EGRESS_ALLOW entry naming exactly 169.254.169.254" in str(caught.value)
    # --allow-internal on a tool whose host is the metadata address does not open it either.
    with pytest.raises(EgressRefused, match="cloud metadata"):
        EgressGuard(EgressPolicy().allowing_host("169.254.169.254")).addresses("169.254.169.254", 80)
    # Named exactly, it is open; the rest of link-local is not.
    guard = EgressGuard(EgressPolicy.parse(["169.254.169.254/32"]))
    assert guard.addresses("169.254.169.254", 80) == ["169.254.169.254"]
    with pytest.raises(EgressRefused, match="link-local"):
        guard.addresses("169.254.1.1", 80)


def test_allowing_one_tool_host_keeps_the_rest_closed():
    policy = EgressPolicy().allowing_host("127.0.0.1")
    assert EgressGuard(policy).addresses("127.0.0.1", 80) == ["127.0.0.1"]
    with pytest.raises(EgressRefused):
        EgressGuard(policy).addresses("127.0.0.2", 80)
    with pytest.raises(EgressRefused):  # the same address spelled another way is not the tool's host
        EgressGuard(policy).addresses("2130706433", 80)
    named = EgressPolicy().allowing_host("mcp.internal")
    assert EgressGuard(named, resolver=lambda h, p: ["10.1.1.1"]).addresses("mcp.internal", 80) == ["10.1.1.1"]


@pytest.mark.parametrize("entry", ["not a host!", "10.0.0.0/33", "http://tools.internal", "", "tools..internal"])
def test_a_bad_allowlist_entry_is_refused_when_the_settings_are_built(entry, monkeypatch):
    with pytest.raises(ValueError, match="egress allowlist entry"):
        EgressPolicy.parse([entry])
    monkeypatch.setenv("AGENTSEARCH_EGRESS_ALLOW", json.dumps(["10.0.0.0/8", entry]))
    with pytest.raises(ValidationError, match="egress allowlist entry"):
        Settings()


def test_the_setting_is_read_from_the_environment_as_a_json_list(monkeypatch):
    monkeypatch.setenv("AGENTSEARCH_EGRESS_ALLOW", '["10.20.0.0/16", "tools.internal"]')
    policy = Settings().egress_policy()
    assert policy == EgressPolicy((ipaddress.ip_network("10.20.0.0/16"),), frozenset({"tools.internal"}))
    monkeypatch.delenv("AGENTSEARCH_EGRESS_ALLOW")
    assert Settings().egress_policy() == EgressPolicy()  # nothing internal by default


# --- at connect time ----------------------------------------------------------------------------------------------


@pytest.fixture
def server():
    with JsonServer() as running:
        yield running


class Rebinding:
    """A resolver whose answers change: each call takes the next answer (the last one repeats)."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_a_loopback_url_is_refused_before_any_byte_is_sent(server):
    with guarded_client(EgressPolicy(), timeout=2) as client:
        for host in ("127.0.0.1", "localhost", "2130706433", "127.1", "[::ffff:127.0.0.1]"):
            with pytest.raises(httpx.ConnectError, match="egress refused") as caught:
                client.get(f"http://{host}:{server.port}/secret")
            assert isinstance(egress_refusal(caught.value), EgressRefused)
    assert server.requests == []


def test_dns_rebinding_a_name_public_when_checked_and_loopback_when_connected_is_refused(server):
    resolver = Rebinding([PUBLIC], ["127.0.0.1"])
    guard = EgressGuard(EgressPolicy(), resolver)
    assert guard.addresses("rebind.test", server.port) == [PUBLIC]  # what a check ahead of time would have seen
    with (
        guarded_client(EgressPolicy(), resolver=resolver, timeout=2) as client,
        pytest.raises(httpx.ConnectError, match=r"rebind\.test resolves to 127\.0\.0\.1, a loopback address"),
    ):
        client.get(f"http://rebind.test:{server.port}/")
    assert resolver.calls == ["rebind.test", "rebind.test"]  # looked up again at connect time
    assert server.requests == []


def test_the_connection_goes_to_the_checked_address_with_the_host_name_kept(server):
    # "svc.test" exists only in this resolver; the request can only arrive if the client connects to the address the
    # guard checked (allowed by name here) instead of resolving the name again.
    resolver = Rebinding(["127.0.0.1"])
    with guarded_client(EgressPolicy.parse(["svc.test"]), resolver=resolver, timeout=2) as client:
        assert client.get(f"http://svc.test:{server.port}/named").json() == {"ok": True}
        client.get(f"http://svc.test:{server.port}/again")
    assert server.requests == [("/named", f"svc.test:{server.port}"), ("/again", f"svc.test:{server.port}")]
    # This server closes each connection: every new connection was looked up, and checked, again.
    assert resolver.calls == ["svc.test", "svc.test"]


def test_a_redirect_to_an_internal_address_is_checked_like_the_first_connection(server):
    server.redirect_to = f"http://127.0.0.1:{server.port}/internal"
    with (
        guarded_client(EgressPolicy.parse(["svc.test"]), resolver=Rebinding(["127.0.0.1"]), timeout=2,
                       follow_redirects=True) as client,
        pytest.raises(httpx.ConnectError, match=r"egress refused: 127\.0\.0\.1 is a loopback address"),
    ):
        client.get(f"http://svc.test:{server.port}/hop")
    assert [path for path, _ in server.requests] == ["/hop"]  # the allowed name answered; the redirect went nowhere


def test_proxies_from_the_environment_are_not_used(server, monkeypatch):
    # A proxy would be the address checked, not the host behind it.
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{server.port}")
    with (
        guarded_client(EgressPolicy(), resolver=Rebinding(["10.0.0.1"]), timeout=2) as client,
        pytest.raises(httpx.ConnectError, match="egress refused"),
    ):
        client.get("http://api.example.org/")
    assert server.requests == []


def test_the_async_client_for_mcp_checks_at_connect_time_too(server):
    async def main():
        async with guarded_async_client(EgressPolicy(), resolver=Rebinding(["127.0.0.1"])) as client:
            with pytest.raises(httpx2.ConnectError, match="egress refused") as caught:
                await client.get(f"http://svc.test:{server.port}/a")
            assert egress_refusal(caught.value) is not None
        async with guarded_async_client(EgressPolicy().allowing_host("svc.test"),
                                        resolver=Rebinding(["127.0.0.1"])) as client:
            return (await client.get(f"http://svc.test:{server.port}/b")).json()

    assert asyncio.run(main()) == {"ok": True}
    assert [path for path, _ in server.requests] == ["/b"]


def test_egress_refusal_is_found_inside_exception_groups():
    refused = EgressRefused("127.0.0.1", "127.0.0.1", "loopback")
    try:
        try:
            raise refused
        except EgressRefused as inner:
            raise httpx.ConnectError(str(inner)) from inner
    except httpx.ConnectError as outer:
        group = BaseExceptionGroup("task group", [ValueError("other"), outer])
    assert egress_refusal(group) is refused
    assert egress_refusal(ValueError("x")) is None
