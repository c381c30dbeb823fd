"""An Office file as the API stores it (``"office"``, ``agentsearch.pipeline.parsing.sniff``): which of Word, PowerPoint
and Excel it is, told from the main part its directory lists, then read by that format's reader, which names the format
found (``ParsedFile.format``). The directory is read here, in the parsing child, because a crafted one costs seconds and
hundreds of MB to read: the end record is checked first (``agentsearch.pipeline.parsing.zip_end``), as the readers check
it.

Usage::

    parsed = parse(Path("report.pdf"), ParseLimits(), lambda done, total: None, None)   # a Word file so named
    parsed.format                                                                      # "docx"
"""

from __future__ import annotations

import importlib
import zipfile
from collections.abc import Callable
from pathlib import Path

from agentsearch.pipeline.parsing.formats import READERS
from agentsearch.pipeline.parsing.parsed import ParsedFile, ParseLimits, ParseRefused
from agentsearch.pipeline.parsing.zip_end import check_directory, end_record

_MAIN_PARTS = {"word/document.xml": "docx", "ppt/presentation.xml": "pptx", "xl/workbook.xml": "xlsx"}


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    file_format = office_format(path)
    parsed: ParsedFile = importlib.import_module(READERS[file_format]).parse(path, limits, progress, pages)
    parsed.format = file_format
    return parsed


def office_format(path: Path) -> str:
    """``"docx"``, ``"pptx"`` or ``"xlsx"`` for the Office file at ``path``; ``ParseRefused`` saying what to save it
    as when it is a ZIP of another kind."""
    with path.open("rb") as file:
        check_directory(end_record(file))
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except zipfile.BadZipFile:
        raise ParseRefused("a damaged ZIP file (Office files are ZIP files): it cannot be opened; save it again and "
                           "upload it whole") from None
    for part, found in _MAIN_PARTS.items():
        if part in names:
            return found
    if "xl/workbook.bin" in names:
        raise ParseRefused("an Excel binary workbook (.xlsb); save it as .xlsx")
    if "mimetype" in names or "content.xml" in names:
        raise ParseRefused("an OpenDocument file (.odt, .ods, .odp); save it as .docx, .xlsx or .pptx")
    raise ParseRefused("a ZIP archive that is no Word, PowerPoint or Excel file; upload the files inside it")
