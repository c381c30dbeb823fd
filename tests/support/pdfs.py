"""PDF files written byte by byte for the tests of PDF reading: small files whose pages cost what a test wants.

Usage::

    slow = pdf_file([shared_stream(1_800_000)] * 3)     # three pages sharing one stream of 1.8 M operators, ~4 KB
    many = pdf_file([page_text(f"Page {n}.") for n in range(5)])
"""

from __future__ import annotations

import zlib


def page_text(text: str) -> bytes:
    """A content stream drawing ``text`` (ASCII, no parentheses) in Helvetica."""
    return f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET\n".encode("ascii")


def shared_stream(operators: int) -> bytes:
    """One line of text and then ``operators`` path ends (``n``): nothing to see, every one parsed when text is read."""
    return page_text("A page of little text.") + b"n\n" * operators


def pdf_file(contents: list[bytes]) -> bytes:
    """A PDF with one page per entry of ``contents``, each stream compressed; equal entries become one stream object
    that those pages share."""
    streams: dict[bytes, int] = {}
    objects: list[bytes] = [b"", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]  # 1 catalog, 2 pages
    page_numbers = []
    for content in contents:
        if content not in streams:
            packed = zlib.compress(content, 9)
            objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(packed), packed))
            streams[content] = len(objects)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
                       b" /Contents %d 0 R >>" % streams[content])
        page_numbers.append(len(objects))
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    kids = b" ".join(b"%d 0 R" % n for n in page_numbers)
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_numbers))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
