"""The two files the deploy drill uploads: a PDF and a Word document, made here, holding the figure its job asks for.

Usage::

    files = [("files", ("annual-report.pdf", drill_pdf(), "application/pdf")),
             ("files", ("minutes.docx", drill_docx(), DOCX_TYPE))]
"""

from __future__ import annotations

import io

REPORT = ("Northwind Energy annual report 2024. Northwind Energy's revenue in 2024 was $412 million, up 9% on 2023, "
          "driven by offshore wind contracts in the North Sea.")
MINUTES = ("Minutes of the Northwind Energy board, March 2025. The board noted the 2024 revenue of $412 million and "
           "approved a dividend of 40 cents per share.")


def drill_pdf() -> bytes:
    """A one-page PDF with a text layer (reportlab), as an office suite would export it."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=A4)
    text = page.beginText(72, 770)
    for start in range(0, len(REPORT), 80):  # short lines: the page is 595 points wide
        text.textLine(REPORT[start:start + 80])
    page.drawText(text)
    page.showPage()
    page.save()
    return out.getvalue()


def drill_docx() -> bytes:
    """A Word document with a heading and a paragraph (python-docx)."""
    from docx import Document

    document = Document()
    document.add_heading("Board minutes", level=1)
    document.add_paragraph(MINUTES)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
