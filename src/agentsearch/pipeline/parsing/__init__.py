"""Files into text with a place for every part: the readers of the formats a team keeps, each in a child process held
to limits (``sandbox.read_file``), and the format told from the file's bytes (``sniff.sniff``).

Usage::

    file_format = sniff(data, "report.docx")                       # "docx"
    parsed = read_file(path, file_format, ParseLimits.from_settings(settings))
    [(p.location, p.text[:40]) for p in parsed.parts]              # [({"section": "Results"}, "Revenue rose ..."), ...]

This package's top imports only the standard library: the child process imports it before anything else.
"""

from agentsearch.pipeline.parsing.parsed import Attachment, ParsedFile, ParseLimits, ParseRefused, Part
from agentsearch.pipeline.parsing.sandbox import read_file
from agentsearch.pipeline.parsing.sniff import FORMATS, sniff

__all__ = ["FORMATS", "Attachment", "ParseLimits", "ParseRefused", "ParsedFile", "Part", "read_file", "sniff"]
