"""Move installed distributions out of a venv into a tree of their own, for an image's build stages.

Each file the distribution's RECORD lists, and the bytecode compiled beside each of its modules, moves to the same
absolute path under the target directory, so that ``COPY --from=<stage> <target>/ /`` puts it back where it was in
another stage. The Dockerfile uses it to keep milvus-lite (with pyarrow and faiss) out of the default image and to
add it to the ``standalone`` one, and to copy the project apart from its dependencies (a change to the code then
rebuilds neither the dependencies' layer nor their copy).

Usage::

    python move_dists.py /opt/vectorstore milvus-lite pyarrow faiss-cpu
    python move_dists.py /opt/project agentsearch
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import sys
from pathlib import Path


def files_of(name: str) -> list[Path]:
    """Every file of the installed distribution ``name``, absolute, with its modules' compiled bytecode."""
    dist = importlib.metadata.distribution(name)
    found: dict[Path, None] = {}  # ordered, each once: RECORD may list bytecode pip compiled, found again below
    for entry in dist.files or []:
        path = Path(str(dist.locate_file(entry))).resolve()
        if path.is_file():
            found[path] = None
        if path.suffix == ".py":
            # Bytecode compiled after the install (hash-based, at build time) is not in RECORD.
            cached = Path(importlib.util.cache_from_source(str(path)))
            if cached.is_file():
                found[cached] = None
    return list(found)


def move(target: Path, names: list[str]) -> int:
    """Move the files of ``names`` under ``target``; returns the count of files moved."""
    files = [path for name in names for path in files_of(name)]
    for path in files:
        destination = target / path.relative_to("/")
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, destination)
    for directory in sorted({path.parent for path in files}, key=lambda d: len(d.parts), reverse=True):
        _prune_empty(directory)
    return len(files)


def _prune_empty(directory: Path) -> None:
    # A package's directory left empty (but for an empty __pycache__) would import as an empty namespace package:
    # `import pyarrow` would then succeed, and a library that tries it to learn whether it is installed be misled.
    while directory != directory.parent and directory.is_dir():
        if any(p.name != "__pycache__" or any(p.iterdir()) for p in directory.iterdir()):
            return
        shutil.rmtree(directory)
        directory = directory.parent


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    count = move(Path(argv[0]), argv[1:])
    print(f"moved {count} files of {', '.join(argv[1:])} to {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
