"""A Docker host for the deploy drill: the daemon (started if none runs), the images made without a registry, the
project's image built from a wheelhouse, and the host network as it was found.

Usage::

    with DockerDaemon(workdir) as docker:          # starts dockerd when `docker info` fails, stops it at the end
        ensure_local_images(workdir)               # deploy/local/README.md: the images made from Debian's packages
        fill_wheelhouse()                          # wheelhouse/: the host's wheels for the build
        build_image("agentsearch:0.1.0")
        image_size_bytes("agentsearch:0.1.0")

A daemon started here runs with ``--iptables=false --bridge=none``: it adds no firewall rule and no docker0 link to
the host, whose network other work shares; its builds use the host's network (``--network host``), and the compose
network it makes is removed with the stack. ``network_snapshot`` is what the drill compares before and after.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Self

from agentsearch.devstack.processes import BIN, REPO

DOCKER = shutil.which("docker") or "/usr/local/bin/docker"
DEBIAN_IMAGE = "agentsearch-local/debian:bookworm"
PYTHON_IMAGE = "agentsearch-local/python:3.11-bookworm"
# Each image the no-registry override runs, with the file under deploy/local that makes it.
LOCAL_IMAGES = {PYTHON_IMAGE: "python.Dockerfile",
                "agentsearch-local/postgres:15-bookworm": "postgres.Dockerfile",
                "agentsearch-local/redis:7-bookworm": "redis.Dockerfile"}
LOCAL_DIR = REPO / "deploy" / "local"
WHEELHOUSE = REPO / "wheelhouse"
DEBIAN_MIRROR = os.environ.get("AGENTSEARCH_DEBIAN_MIRROR", "http://deb.debian.org/debian")
EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
# The image's interpreter (Debian bookworm's): a dependency may be required below a patch release only (redis needs
# async-timeout before 3.11.3), which pip run on the host, a later 3.11, leaves out.
IMAGE_PYTHON = "3.11.2"
# The torch the Makefile pins: the wheelhouse holds this CPU build, the one the builder stage exports with.
TORCH_PIN = "torch==2.13.0"


def docker(*args: str, timeout_s: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """One docker CLI command, its output captured; a failure raises with the command's stderr."""
    done = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout_s)
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def daemon_up() -> bool:
    try:
        return docker("info", "--format", "{{.ServerVersion}}", timeout_s=20, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class DockerDaemon:
    """``dockerd`` for as long as the ``with`` block lasts, when none runs; an existing daemon is used and left."""

    def __init__(self, workdir: Path) -> None:
        self.log = Path(workdir) / "dockerd.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Self:
        if daemon_up():
            return self
        if shutil.which("dockerd") is None:
            raise RuntimeError("no Docker daemon runs and dockerd is missing: apt-get install docker.io (as root)")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(["dockerd", "--iptables=false", "--ip-masq=false", "--bridge=none",
                                          "--storage-driver=overlay2"], stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 60
        while not daemon_up():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.5)
        return self

    @property
    def started_here(self) -> bool:
        return self.proc is not None

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def image_size_bytes(tag: str) -> int:
    return int(docker("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())


def build(tag: str, dockerfile: Path, context: Path, build_args: dict[str, str] | None = None,
          log: Path | None = None, timeout_s: float = 3600, target: str | None = None) -> None:
    """``docker build`` on the host's network (a daemon started here has no bridge); its output to ``log``."""
    args = [DOCKER, "build", "--network", "host", "-t", tag, "-f", str(dockerfile)]
    if target:
        args += ["--target", target]
    for name, value in (build_args or {}).items():
        args += ["--build-arg", f"{name}={value}"]
    out = log.open("ab") if log else subprocess.DEVNULL
    try:
        done = subprocess.run([*args, str(context)], stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
    finally:
        if log:
            out.close()  # type: ignore[union-attr]
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:] if log else ""
        raise RuntimeError(f"docker build {tag} failed ({done.returncode}):\n{tail}")


def ensure_local_images(workdir: Path) -> list[str]:
    """The images of deploy/local/README.md that are missing, made; returns the tags made."""
    made = []
    if not image_exists(DEBIAN_IMAGE):
        rootfs = Path(workdir) / "rootfs"
        shutil.rmtree(rootfs, ignore_errors=True)
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), DEBIAN_MIRROR], check=True,
                       stdout=subprocess.DEVNULL, timeout=1800)
        slim_rootfs(rootfs)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run([DOCKER, "import", "-", DEBIAN_IMAGE], stdin=tar.stdout, check=True,
                       stdout=subprocess.DEVNULL, timeout=600)
        tar.wait(60)
        shutil.rmtree(rootfs, ignore_errors=True)
        made.append(DEBIAN_IMAGE)
    certs = LOCAL_DIR / "certs"
    for cert in EXTRA_CA_DIR.glob("*.crt"):  # a TLS-intercepting proxy's CA must be trusted inside builds
        shutil.copy2(cert, certs / cert.name)
    for tag, dockerfile in LOCAL_IMAGES.items():
        if not image_exists(tag):
            build(tag, LOCAL_DIR / dockerfile, LOCAL_DIR, {"DEBIAN_IMAGE": DEBIAN_IMAGE},
                  log=Path(workdir) / "local-images.log")
            made.append(tag)
    return made


# As Debian's own slim images: no manuals or translations, and apt keeps no package caches (about 70 MB a layer
# that runs apt-get) in this image nor in any built on it.
DPKG_EXCLUDES = ["path-exclude /usr/share/doc/*", "path-include /usr/share/doc/*/copyright",
                 "path-exclude /usr/share/man/*", "path-exclude /usr/share/info/*", "path-exclude /usr/share/locale/*"]
APT_CLEAN = ['DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };',
             'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";']


def slim_rootfs(rootfs: Path) -> None:
    """A debootstrap tree made as small as Debian's slim images: what the excludes leave out later removed now, the
    package caches and lists gone (each image's own apt-get update brings the lists back)."""
    (rootfs / "etc/dpkg/dpkg.cfg.d/agentsearch-slim").write_text("\n".join(DPKG_EXCLUDES) + "\n")
    (rootfs / "etc/apt/apt.conf.d/agentsearch-clean").write_text("\n".join(APT_CLEAN) + "\n")
    for cache in ("var/cache/apt/archives", "var/cache/apt", "var/lib/apt/lists"):
        for item in (rootfs / cache).glob("*"):
            if item.is_file():
                item.unlink()
    for shared in ("man", "info", "locale"):
        shutil.rmtree(rootfs / "usr/share" / shared, ignore_errors=True)
        (rootfs / "usr/share" / shared).mkdir()
    # Never through a link: an absolute one points into the host's own tree, not the rootfs.
    for package in (rootfs / "usr/share/doc").iterdir():
        if package.is_symlink() or not package.is_dir():
            continue
        for item in package.iterdir():
            if item.name == "copyright":
                continue
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item)
            else:
                item.unlink()


def fill_wheelhouse() -> int:
    """wheelhouse/ filled from the host's pip configuration (indexes, mirrors, local wheels) unless it already holds
    torch; returns the number of wheels in it."""
    if not any(WHEELHOUSE.glob("torch-*.whl")):
        subprocess.run([str(BIN / "python"), "-m", "pip", "wheel", "-q", "--wheel-dir", str(WHEELHOUSE), TORCH_PIN,
                        f"{REPO}[multilingual]", "pip", "setuptools", "wheel"], check=True, timeout=3600)
    # A wheel the host's later 3.11 takes and the image's refuses (soupsieve 4.1 wants 3.11.5): the latest release
    # that the image's interpreter takes instead, as pip run there would have chosen.
    for refused in wheels_refusing(IMAGE_PYTHON):
        subprocess.run([str(BIN / "python"), "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", IMAGE_PYTHON, "--dest", str(WHEELHOUSE), refused.name.split("-")[0]],
                       check=True, timeout=600)
        refused.unlink()
    missing = requirements_only_for(IMAGE_PYTHON)
    if missing:
        subprocess.run([str(BIN / "python"), "-m", "pip", "wheel", "-q", "--wheel-dir", str(WHEELHOUSE), *missing],
                       check=True, timeout=3600)
    # The project's own wheel, just built, would be stale at the next change: the build installs it from the tree.
    for own in WHEELHOUSE.glob("agentsearch-*.whl"):
        own.unlink()
    return len(list(WHEELHOUSE.glob("*.whl")))


def wheel_metadata(wheel: Path) -> list[str]:
    """The lines of a wheel's METADATA."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(metadata).decode("utf-8", "replace").splitlines()


def wheels_refusing(python_full_version: str) -> list[Path]:
    """The wheelhouse's wheels whose Requires-Python excludes that interpreter."""
    from packaging.specifiers import SpecifierSet

    refusing = []
    for wheel in sorted(WHEELHOUSE.glob("*.whl")):
        for line in wheel_metadata(wheel):
            if line.startswith("Requires-Python:") and python_full_version not in SpecifierSet(
                    line.split(":", 1)[1].strip()):
                refusing.append(wheel)
    return refusing


def requirements_only_for(python_full_version: str) -> list[str]:
    """What the wheelhouse's wheels require on that interpreter and not on this one (their markers evaluated for
    both), not already in the wheelhouse."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    here: dict[str, str] = {**{k: str(v) for k, v in default_environment().items()}, "extra": ""}
    there: dict[str, str] = {**here, "python_full_version": python_full_version}
    present = {canonicalize_name(w.name.split("-")[0]) for w in WHEELHOUSE.glob("*.whl")}
    wanted = set()
    for wheel in WHEELHOUSE.glob("*.whl"):
        for line in wheel_metadata(wheel):
            if not line.startswith("Requires-Dist:"):
                continue
            requirement = Requirement(line.split(":", 1)[1].strip())
            marker = requirement.marker
            if marker and marker.evaluate(there) and not marker.evaluate(here) \
                    and canonicalize_name(requirement.name) not in present:
                wanted.add(f"{requirement.name}{requirement.specifier}")
    return sorted(wanted)


# The project's image from the wheelhouse alone, on the Python base made from Debian's packages.
IMAGE_BUILD_ARGS = {"PYTHON_IMAGE": PYTHON_IMAGE, "WHEELHOUSE_ONLY": "true"}


def build_image(tag: str, log: Path) -> None:
    """The project's image from the wheelhouse alone, on the Python base made from Debian's packages, and its
    ``standalone`` stage (with milvus-lite: the vector store of the no-registry stack) as ``<tag>-standalone``,
    made of the same layers and one more."""
    build(tag, REPO / "Dockerfile", REPO, IMAGE_BUILD_ARGS, log=log)
    build(f"{tag}-standalone", REPO / "Dockerfile", REPO, IMAGE_BUILD_ARGS, log=log, target="standalone")


def container_cpu_s(container: str) -> float:
    """CPU seconds a container's main process and its children have used so far (their ``/proc`` counters, read on
    this host: the daemon's). The API's own, under tini: what its start cost, whatever the host's load."""
    root = docker("inspect", "--format", "{{.State.Pid}}", container).stdout.strip()
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in [root, *Path(f"/proc/{root}/task/{root}/children").read_text().split()]:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return round(total, 2)


def network_snapshot() -> dict[str, str]:
    """The host network's state a daemon or a compose stack can change: links, addresses, routes, firewall rules."""
    def out(*cmd: str) -> str:
        try:
            return subprocess.run(list(cmd), capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unavailable: {exc}"

    links = "\n".join(line.split("@")[0].split(":")[1].strip() for line in out("ip", "-o", "link").splitlines()
                      if ":" in line)
    def rules(text: str) -> str:  # without iptables-save's dated comments
        return "\n".join(line for line in text.splitlines() if not line.startswith("#"))

    return {"links": links, "addresses": out("ip", "-br", "addr"), "routes": out("ip", "route"),
            "iptables": rules(out("iptables-save")), "nftables": rules(out("nft", "list", "ruleset"))}


def network_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two snapshots, by part; empty when the host network is as it was."""
    return [part for part in before if before[part] != after.get(part)]
