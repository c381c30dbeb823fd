"""The deploy drill's own logic that runs without a Docker daemon: what the wheelhouse lacks for the image's
interpreter, and what counts as a change to the host's network."""

from __future__ import annotations

import zipfile

from agentsearch.devstack import docker_host
from agentsearch.devstack.docker_host import network_changes, network_snapshot, requirements_only_for


def wheel(directory, name: str, requires: list[str]) -> None:
    with zipfile.ZipFile(directory / f"{name}-1.0-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{name}-1.0.dist-info/METADATA", "\n".join(
            ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0", *(f"Requires-Dist: {r}" for r in requires)]))


def test_requirements_of_an_earlier_patch_release_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(docker_host, "WHEELHOUSE", tmp_path)
    wheel(tmp_path, "redis", ['async-timeout>=4.0.3; python_full_version < "3.11.3"',
                              'tomli; python_version < "3.11"', 'extra-thing; extra == "all"'])
    wheel(tmp_path, "present", ['redis; python_full_version < "3.11.3"'])
    assert requirements_only_for("3.11.2") == ["async-timeout>=4.0.3"]
    assert requirements_only_for("3.11.9") == []


def test_network_changes_name_the_part_that_differs():
    before = network_snapshot()
    assert set(before) == {"links", "addresses", "routes", "iptables", "nftables"}
    assert network_changes(before, network_snapshot()) == []
    assert network_changes(before, {**before, "links": before["links"] + "\nbr-0123456789ab"}) == ["links"]
