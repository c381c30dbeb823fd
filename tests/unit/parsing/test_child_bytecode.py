"""The parsing child's imports read bytecode compiled at install (make install, the Dockerfile), so a child that
may not write a cache (the image's venv belongs to root) does not compile its libraries again for every file.

The probe runs what a refused PDF's child runs, in the child's environment, writing no bytecode of its own: what it
finds compiled, install put there.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

from agentsearch.pipeline.parsing.sandbox import CHILD_ENVIRONMENT

REPO = Path(__file__).resolve().parents[3]
PROBE = """
import importlib, json, sys
from agentsearch.pipeline.parsing.child import main
from agentsearch.pipeline.parsing.formats import READERS
from agentsearch.pipeline.parsing.parsed import ParseLimits

main(sys.argv[1], "pdf", ParseLimits(), None)  # refuses the file, as its child does
for reader in sorted(set(READERS.values())):
    importlib.import_module(reader)
print(json.dumps({name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())}))
"""


def child_imports(tmp_path: Path) -> dict[str, str]:
    """The Python source files a refused PDF's child imports, with every reader module, by module name."""
    pdf = tmp_path / "refused.pdf"
    pdf.write_bytes(b"%PDF-1.7\nnot a PDF past its header\n")
    done = subprocess.run([sys.executable, "-P", "-c", PROBE, str(pdf)], capture_output=True, text=True, timeout=120,
                          env={**CHILD_ENVIRONMENT, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    refusal, modules = done.stdout.strip().splitlines()[-2:]
    assert "refused" in json.loads(refusal)
    return {name: file for name, file in json.loads(modules).items() if file and file.endswith(".py")}


def compiled(source: Path) -> bool:
    """Whether an import of ``source`` reads its bytecode rather than compiling it: a .pyc for this interpreter whose
    header matches the source (its time and size, or its hash; an unchecked hash-based one always does)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.is_file():
        return False
    header = cached.read_bytes()[:16]
    if header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags == 0:
        stat = source.stat()
        return header[8:16] == ((int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                                + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    if flags & 0b10:  # hash-based, checked against the source
        return header[8:16] == importlib.util.source_hash(source.read_bytes())
    return True


def test_every_library_the_child_imports_has_bytecode_for_this_interpreter(tmp_path):
    """The venv's libraries (in the image the project too, installed among them; a clone's own sources, edited as
    they are, get theirs from any import that may write it)."""
    imports = child_imports(tmp_path)
    expected = {"agentsearch.pipeline.parsing.child", "agentsearch.pipeline.parsing.formats.pdf", "pypdfium2"}
    assert expected <= imports.keys()
    installed = {Path(sysconfig.get_path(where)).resolve() for where in ("purelib", "platlib")}
    libraries = {name: Path(file) for name, file in imports.items()
                 if any(Path(file).resolve().is_relative_to(root) for root in installed)}
    assert "pypdfium2" in libraries
    missing = sorted(name for name, file in libraries.items() if not compiled(file))
    assert not missing, f"imported by the parsing child without bytecode (make install compiles it): {missing}"


def test_make_install_compiles_the_libraries_and_every_package_of_the_project():
    recipe = (REPO / "Makefile").read_text().split("$(STAMP): pyproject.toml", 1)[1].split("\ninstall:", 1)[0]
    lines = recipe.replace("\\\n", " ").splitlines()
    installs = [i for i, line in enumerate(lines) if "pip install" in line and "-e " in line]
    compiles = [i for i, line in enumerate(lines) if "-m compileall" in line]
    assert installs and compiles and compiles[-1] > installs[-1], "no compileall after the project's install"
    command = lines[compiles[-1]]
    assert 'sysconfig.get_path("purelib")' in command
    includes = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    # The package is found under these folders (a src/ layout): compileall walks each of them whole.
    assert set(includes["where"]) <= set(re.findall(r"\b[a-z_]+\b", command)), includes["where"]
