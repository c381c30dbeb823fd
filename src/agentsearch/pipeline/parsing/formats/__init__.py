"""One reader per format, each a module with the same function::

    parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile

Readers run only inside the parsing child process (``agentsearch.pipeline.parsing.child``): they may import what they
like and trust no byte of the file. ``pages`` (0-based, paged formats only) asks for a window of a long file;
``progress(done, total)`` reports pages read. A reader refuses a file with ``ParseRefused`` and a reason its sender can
act on.
"""

READERS = {
    "pdf": "agentsearch.pipeline.parsing.formats.pdf",
    "image": "agentsearch.pipeline.parsing.formats.image",
    "office": "agentsearch.pipeline.parsing.formats.office",
    "docx": "agentsearch.pipeline.parsing.formats.docx",
    "pptx": "agentsearch.pipeline.parsing.formats.pptx",
    "xlsx": "agentsearch.pipeline.parsing.formats.sheets",
    "csv": "agentsearch.pipeline.parsing.formats.sheets",
    "html": "agentsearch.pipeline.parsing.formats.html",
    "markdown": "agentsearch.pipeline.parsing.formats.markdown",
    "text": "agentsearch.pipeline.parsing.formats.plain",
    "eml": "agentsearch.pipeline.parsing.formats.mail",
}
