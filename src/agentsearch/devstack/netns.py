"""Hosts made of Linux network namespaces on one bridge, and the network faults between them (root only).

Each host is a namespace with a private address on a bridge of the machine's own (10.77.0.0/24 by default; the
bridge itself holds .1, so the process that made the hosts reaches every one of them). A process started through
``command`` runs on that host: it sees only its loopback and its own address, and reaches the others over the
bridge. Cuts are nftables rules in one host's namespace that drop TCP to or from a peer's address and port, so the
peer's sockets stay open and a client meets what a real partition does: packets that go nowhere, no refusal.

Usage::

    with Hosts(["data", "api", "worker1"]) as hosts:
        proc = start_process(hosts.command("data", ["redis-server", "--bind", hosts.address("data")]), env, log)
        hosts.cut("worker1", "data", 6379)                     # worker1 and Redis hear nothing of each other
        hosts.cut("api", "data", 6379, direction="replies")    # the API's requests arrive; Redis's answers do not
        hosts.heal("worker1")                                  # every cut of that host removed
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
from typing import Literal

from agentsearch.devstack.processes import Started

Direction = Literal["both", "requests", "replies"]
# One table per host holds its cuts: healing is deleting it, whatever was cut.
CUT_TABLE = "agentsearch_cut"


def run(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


class Hosts(Started):
    """Namespaces named ``<prefix>-<host>``, each with a veth pair whose other end is on the bridge."""

    def __init__(self, names: list[str], subnet: str = "10.77.0.0/24", prefix: str | None = None) -> None:
        network = ipaddress.ip_network(subnet)
        if not network.is_private:
            raise ValueError(f"{subnet} is not a private range: the hosts must not take a public address")
        if len(names) > network.num_addresses - 3:
            raise ValueError(f"{subnet} has no room for {len(names)} hosts")
        self.prefix = prefix or f"as{os.getpid() % 100000}"
        self.names = list(names)
        self.prefix_len = network.prefixlen
        addresses = list(network.hosts())
        self.gateway = str(addresses[0])
        self.addresses = {name: str(addresses[i + 1]) for i, name in enumerate(self.names)}
        self.bridge = f"{self.prefix}br"[:15]
        self.made: list[str] = []

    def namespace(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def address(self, host: str) -> str:
        return self.addresses[host]

    def command(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` run on ``host``."""
        return ["ip", "netns", "exec", self.namespace(host), *argv]

    # -- life cycle -------------------------------------------------------------------------------------------

    def start(self) -> None:
        run("ip", "link", "add", self.bridge, "type", "bridge")
        self.made.append(self.bridge)
        run("ip", "addr", "add", f"{self.gateway}/{self.prefix_len}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for index, host in enumerate(self.names):
            ns, outside, inside = self.namespace(host), f"{self.prefix}v{index}"[:15], "eth0"
            run("ip", "netns", "add", ns)
            self.made.append(ns)
            run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside, "netns", ns)
            self.made.append(outside)
            run("ip", "link", "set", outside, "master", self.bridge)
            run("ip", "link", "set", outside, "up")
            run("ip", "-n", ns, "addr", "add", f"{self.addresses[host]}/{self.prefix_len}", "dev", inside)
            run("ip", "-n", ns, "link", "set", inside, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def stop(self) -> None:
        """Every veth pair, namespace and the bridge deleted; what fails is left to the next one, so a half-made
        set is removed as far as it was made. The links go first: a namespace's own are freed only once its last
        process has gone."""
        for made in reversed(self.made):
            is_link = made == self.bridge or not made.startswith(f"{self.prefix}-")
            cmd = ["ip", "link", "del", made] if is_link else ["ip", "netns", "del", made]
            subprocess.run(cmd, capture_output=True)
        self.made.clear()

    # -- faults -----------------------------------------------------------------------------------------------

    def cut(self, host: str, peer: str, port: int, direction: Direction = "both") -> None:
        """Drop TCP between ``host`` and ``peer``'s ``port``, in ``host``'s namespace: ``requests`` (what
        ``host`` sends never arrives), ``replies`` (what the peer answers never arrives) or ``both``."""
        peer_ip, ns = self.address(peer), self.namespace(host)
        rules = [f"add table inet {CUT_TABLE}",
                 f"add chain inet {CUT_TABLE} output {{ type filter hook output priority 0 ; }}",
                 f"add chain inet {CUT_TABLE} input {{ type filter hook input priority 0 ; }}"]
        if direction in ("both", "requests"):
            rules.append(f"add rule inet {CUT_TABLE} output ip daddr {peer_ip} tcp dport {port} drop")
        if direction in ("both", "replies"):
            rules.append(f"add rule inet {CUT_TABLE} input ip saddr {peer_ip} tcp sport {port} drop")
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input="\n".join(rules) + "\n", text=True,
                       check=True, capture_output=True)

    def heal(self, host: str) -> None:
        """Every cut of ``host`` removed."""
        subprocess.run(["ip", "netns", "exec", self.namespace(host), "nft", "delete", "table", "inet", CUT_TABLE],
                       capture_output=True)

    def cuts(self, host: str) -> str:
        """The host's rules as nftables lists them (empty when nothing is cut)."""
        return run("ip", "netns", "exec", self.namespace(host), "nft", "list", "ruleset")
