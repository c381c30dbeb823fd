"""py3langid's language model unpacked once into plain arrays that every process maps instead of copying.

py3langid ships its model LZMA-compressed and unpacks it into each process that reads a text's language: a table of
100,053 n-gram features by 142 languages in float16 (27 MiB) and a byte automaton of 9.8 million transitions as
32-bit integers (37 MiB), 75 MiB resident once loaded. A query's language needs a few hundred of the table's rows
and as many of the automaton's states. So the model is unpacked once, into one ``.npy`` file per array in the
model cache folder, and mapped read-only: a process holds only the pages its texts touched, and the processes of one
host share them through the page cache.

The mapping is advised as random access and the files leave the page cache as they are written, so a page is read
in alone when a text first needs it, not as part of a large block read ahead. The identifier is py3langid's own
``LanguageIdentifier`` over the mapped arrays, so every score is the one py3langid computes
(``tests/unit/text/test_mapped_language_model.py``).

Usage::

    identifier = load_identifier(Path("~/.cache/agentsearch/models").expanduser())
    identifier.classify("Ceci est une phrase en français.")      # ('fr', 0.99...)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import lzma
import mmap
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format
from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

log = logging.getLogger(__name__)

PACKAGED_MODEL = MODEL_DIR / MODEL_FILE
# The arrays py3langid's model file holds (``py3langid.modelio.save_model``).
ARRAYS = ("ptc", "pc", "classes", "nextmove", "nextmove_row", "out_feat")


def model_folder(cache_dir: Path, packaged: Path = PACKAGED_MODEL) -> Path:
    """The folder the packaged model unpacks to: named by py3langid's version and the file's digest, so an upgrade
    unpacks its own model beside the old one."""
    digest = hashlib.sha256(packaged.read_bytes()).hexdigest()[:12]
    return cache_dir / f"py3langid-{importlib.metadata.version('py3langid')}-{digest}"


def unpack(packaged: Path, folder: Path) -> Path:
    """Unpack the packaged model into ``folder`` (one ``.npy`` per array), unless an earlier process did.

    The arrays are written into a folder of their own and renamed into place, so a reader never sees half a model;
    of two processes unpacking at once, the second one's rename fails and its copy is dropped."""
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        partial.chmod(0o755)  # mkdtemp's folder is its owner's alone; the model is read by every service's user
        # The npz is streamed to a file first so that its uncompressed bytes are never all resident.
        with tempfile.TemporaryFile(dir=folder.parent) as npz:
            with lzma.open(packaged) as compressed:
                shutil.copyfileobj(compressed, npz, length=1 << 20)
            npz.seek(0)
            with np.load(npz, allow_pickle=False) as arrays:
                for name in ARRAYS:
                    _write(partial / f"{name}.npy", arrays[name])
        try:
            partial.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def _write(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as file:
        np.save(file, array, allow_pickle=False)
        file.flush()
        os.fsync(file.fileno())
        # Written pages stay cached in large blocks, and a mapping takes a whole block when one of its pages is
        # touched: dropping them lets the first reader bring in single pages.
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def map_array(path: Path) -> np.ndarray:
    """A read-only array over the mapped file, advised as random access: nothing is read until a page is used.

    Mapped here rather than by ``np.load(mmap_mode="r")``, whose mapping is reachable only through a private
    attribute, and the advice must be given to the mapping itself."""
    with open(path, "rb") as file:
        read_header = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}
        shape, fortran_order, dtype = read_header[npy_format.read_magic(file)](file)
        offset = file.tell()
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    mapped.madvise(mmap.MADV_RANDOM)
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset)
    return array.reshape(shape, order="F" if fortran_order else "C")


def load_identifier(cache_dir: Path, packaged: Path = PACKAGED_MODEL) -> LanguageIdentifier:
    """py3langid's identifier, normalised probabilities on, over the model mapped from ``cache_dir``.

    A cache folder this process cannot write, and where the model is not unpacked yet, costs memory, not service:
    the model is then loaded as py3langid loads it."""
    try:
        folder = unpack(packaged, model_folder(cache_dir, packaged))
    except OSError as error:
        log.warning("language model not unpacked into %s (%s): loaded into this process instead", cache_dir, error)
        return LanguageIdentifier.from_model_file(packaged, norm_probs=True)
    arrays = {name: map_array(folder / f"{name}.npy") for name in ARRAYS}
    # The automaton is walked one byte at a time: a memoryview answers an index with a plain int, as the stdlib
    # array py3langid builds does, where a NumPy array would box each one (``ndarray.data`` is that view).
    return LanguageIdentifier(
        arrays["ptc"], np.array(arrays["pc"]), arrays["classes"].tolist(), arrays["nextmove"].data,
        arrays["out_feat"].data, norm_probs=True, tk_row=arrays["nextmove_row"].data)


def main() -> None:
    """Unpack the model into the configured cache folder (``make install``, the image's build)."""
    from agentsearch.pipeline.platform.settings import get_settings

    print(unpack(PACKAGED_MODEL, model_folder(get_settings().model_cache_dir)))


if __name__ == "__main__":
    main()
