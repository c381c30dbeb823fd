"""One reader per format, each a module with the same function::

    parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile

Readers run only inside the parsing child process (``pipeline.parsing.child``): they may import what they like and
trust no byte of the file. ``pages`` (0-based, paged formats only) asks for a window of a long file; ``progress(done,
total)`` reports pages read. A reader refuses a file with ``ParseRefused`` and a reason its sender can act on.
"""

READERS = {
    "pdf": "pipeline.parsing.formats.pdf",
    "image": "pipeline.parsing.formats.image",
    "office": "pipeline.parsing.formats.office",
    "docx": "pipeline.parsing.formats.docx",
    "pptx": "pipeline.parsing.formats.pptx",
    "xlsx": "pipeline.parsing.formats.sheets",
    "csv": "pipeline.parsing.formats.sheets",
    "html": "pipeline.parsing.formats.html",
    "markdown": "pipeline.parsing.formats.markdown",
    "text": "pipeline.parsing.formats.plain",
    "eml": "pipeline.parsing.formats.mail",
}
