"""The deploy drill's own logic that runs without a Docker daemon: what the wheelhouse lacks for the image's
interpreter, what counts as a change to the host's network, and which jobs crossed the upgrade's roll."""

from __future__ import annotations

import zipfile

from agentsearch.devstack import docker_host
from agentsearch.devstack.docker_host import network_changes, network_snapshot, requirements_only_for, wheels_refusing
from agentsearch.devstack.upgrade_drill import ran_on_both


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


def test_wheels_a_later_patch_release_requires_are_found(tmp_path, monkeypatch):
    """soupsieve 4.1 requires Python 3.11.5: the host's 3.11.7 takes it, the image's 3.11.2 refuses it."""
    monkeypatch.setattr(docker_host, "WHEELHOUSE", tmp_path)
    for name, requires_python in (("soupsieve", ">=3.11.5"), ("anything", ">=3.8"), ("unsaid", None)):
        with zipfile.ZipFile(tmp_path / f"{name}-1.0-py3-none-any.whl", "w") as archive:
            archive.writestr(f"{name}-1.0.dist-info/METADATA", "\n".join(
                ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0",
                 *([f"Requires-Python: {requires_python}"] if requires_python else [])]))
    assert [w.name for w in wheels_refusing("3.11.2")] == ["soupsieve-1.0-py3-none-any.whl"]
    assert wheels_refusing("3.11.7") == []


def test_network_changes_name_the_part_that_differs():
    before = network_snapshot()
    assert set(before) == {"links", "addresses", "routes", "iptables", "nftables"}
    assert network_changes(before, network_snapshot()) == []
    assert network_changes(before, {**before, "links": before["links"] + "\nbr-0123456789ab"}) == ["links"]


def test_a_debootstrap_tree_is_slimmed_inside_itself_only(tmp_path):
    """Manuals, translations, documents but their copyright and apt's caches go; a link out of the tree is left
    alone, not followed to what it names (on the host, an absolute link would name the host's own files)."""
    outside = tmp_path / "host-doc"
    outside.mkdir()
    (outside / "changelog.gz").write_text("the host's")
    root = tmp_path / "rootfs"
    for folder in ("etc/dpkg/dpkg.cfg.d", "etc/apt/apt.conf.d", "var/cache/apt/archives", "var/lib/apt/lists",
                   "usr/share/man/man1", "usr/share/locale/de", "usr/share/info", "usr/share/doc/bash"):
        (root / folder).mkdir(parents=True)
    (root / "usr/share/doc/bash/copyright").write_text("GPL")
    (root / "usr/share/doc/bash/changelog.gz").write_text("changes")
    (root / "usr/share/doc/linked").symlink_to(outside)
    (root / "usr/share/man/man1/ls.1.gz").write_text("manual")
    (root / "var/cache/apt/pkgcache.bin").write_text("cache")
    (root / "var/lib/apt/lists/deb.debian.org_Packages").write_text("list")

    docker_host.slim_rootfs(root)

    assert [p.name for p in (root / "usr/share/doc/bash").iterdir()] == ["copyright"]
    assert (outside / "changelog.gz").read_text() == "the host's"
    assert not any((root / "usr/share/man").iterdir()) and not any((root / "usr/share/locale").iterdir())
    assert not (root / "var/cache/apt/pkgcache.bin").exists()
    assert not any((root / "var/lib/apt/lists").iterdir())
    excludes = (root / "etc/dpkg/dpkg.cfg.d/agentsearch-slim").read_text()
    assert "path-exclude /usr/share/doc/*" in excludes and "path-include /usr/share/doc/*/copyright" in excludes
    assert 'Dir::Cache::pkgcache ""' in (root / "etc/apt/apt.conf.d/agentsearch-clean").read_text()


def test_a_job_crossed_the_roll_when_its_agents_ran_on_both_releases_workers():
    release = {"a6997f11f3cc", "2546a0eb1f55"}
    runs = [{"agent_id": "language_detector", "worker": "a6997f11f3cc:7"},
            {"agent_id": "executive_summary", "worker": "9c1d00b7d470:12"}]
    assert ran_on_both({"agents": runs}, release)
    assert not ran_on_both({"agents": runs[:1]}, release)        # all on the release
    assert not ran_on_both({"agents": runs[1:]}, release)        # all on the current workers
    assert not ran_on_both({"agents": [{"agent_id": "x"}], "status": "queued"}, release)  # none ran yet
