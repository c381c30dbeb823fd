"""py-spy, the sampling profiler the profiling benches record a stack's worker with.

Usage::

    spy = py_spy()                                          # its path, or the bench exits saying how to install it
    recorder = record(spy, worker.pid, rate=100, raw=Path("stacks.txt"), seconds=40)
    recorder.wait()                                         # (without seconds: recorder.send_signal(SIGINT) ends it)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def py_spy() -> str:
    """py-spy's path (on PATH, else beside this interpreter); exits naming the install command when it is neither."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        sys.exit("py-spy is not installed: .venv/bin/pip install py-spy")
    return spy


def record(spy: str, pid: int, rate: int, raw: Path, seconds: int | None = None,
           quiet: bool = False) -> subprocess.Popen:
    """py-spy recording ``pid`` and its subprocesses, idle threads included, ``rate`` samples a second, as collapsed
    stacks into ``raw``: for ``seconds``, or until it gets SIGINT. ``quiet``: its own output dropped."""
    command = [spy, "record", "-p", str(pid), "--subprocesses", "--idle", "-r", str(rate), "-f", "raw", "-o", str(raw)]
    if seconds is not None:
        command += ["-d", str(seconds)]
    output = subprocess.DEVNULL if quiet else None
    return subprocess.Popen(command, stdout=output, stderr=output)
