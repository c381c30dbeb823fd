"""A server's own virtual environment, made from a pinned requirements list with the project's pip, once.

A real server the tests run beside the project (Infinity, Arize Phoenix) pins libraries the project has outgrown or
never needs, so it gets an environment of its own. A stamp holding the pins' digest makes a second install free;
changed pins install afresh; two installs at once (two test runs) wait for each other on a lock file.

Usage::

    pinned_venv(venv, digest, [["torch==2.13.0"], ["-r", "embedding-server.txt"]], name="embedding server")
    installed(venv, digest)       # True once made with these pins
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import time
from pathlib import Path


def installed(venv: Path, digest: str) -> bool:
    stamp = venv / ".installed"
    return stamp.is_file() and stamp.read_text().strip() == digest


def pinned_venv(venv: Path, digest: str, installs: list[list[str]], name: str, quiet: bool = True) -> Path:
    """Make ``venv`` (unless it holds ``digest``'s pins) by running ``pip install`` with each of ``installs`` in
    order; its path."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run installing: wait for it, then find it done
        if not installed(venv, digest):
            started = time.monotonic()
            shutil.rmtree(venv, ignore_errors=True)
            # No pip of its own (the project's installs into it) and no byte-compiling: half the install time.
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
            pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-compile",
                   *(["-q"] if quiet else [])]
            for arguments in installs:
                subprocess.run([*pip, *arguments], check=True)
            (venv / ".installed").write_text(digest + "\n")
            print(f"{name} installed in {venv} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return venv
