"""Images of text (PNG, JPEG, TIFF) read by OCR (``agentsearch.pipeline.parsing.ocr``), one part per page: a multi-page
TIFF's frames are its pages (``{"page": k}``), read by window like a PDF's.

An image's size is read from its header before a pixel is decoded: one of more than ``limits.max_pixels`` pixels is
refused (a PNG of a few kilobytes can claim 100000 x 100000), and Pillow's own guard is set to the same limit. A
photo's EXIF orientation is applied, and the OCR engine's detection turns a page lying on its side upright.

Usage (in the parsing child)::

    parsed = parse(Path("fax.tiff"), ParseLimits(), progress, pages=None)
    [(p.location, p.text[:30]) for p in parsed.parts]     # [({"page": 1}, "Invoice 2291 ..."), ...]
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path

from agentsearch.pipeline.parsing.parsed import ParsedFile, ParseLimits, ParseRefused, Part


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    from PIL import Image, ImageOps, UnidentifiedImageError

    from agentsearch.pipeline.parsing.ocr import ocr_note, read_image

    Image.MAX_IMAGE_PIXELS = limits.max_pixels
    warnings.simplefilter("error", Image.DecompressionBombWarning)
    too_large = ParseRefused(f"the image is larger than {limits.max_pixels} pixels")
    try:
        image = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise too_large from None
    except UnidentifiedImageError:
        raise ParseRefused("the image is damaged or in a format that cannot be read (PNG, JPEG and TIFF can)") from None
    total = getattr(image, "n_frames", 1) if image.format == "TIFF" else 1
    if total > limits.max_pages:
        raise ParseRefused(f"the image has more than {limits.max_pages} pages")
    window = range(total) if pages is None else range(max(0, pages.start), min(total, pages.stop))
    parts: list[Part] = []
    empty: list[int] = []
    began, read_until = time.monotonic(), None
    for number in window:
        if limits.window_s and number > window.start and time.monotonic() - began > limits.window_s:
            read_until = number
            window = range(window.start, number)
            break
        try:
            image.seek(number)
            if image.width * image.height > limits.max_pixels:
                raise too_large
            page = _upright(ImageOps, image)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise too_large from None
        except OSError as exc:
            raise ParseRefused(f"the image is damaged and cannot be read ({exc})"[:300]) from None
        text = read_image(page, limits, dpi=_dpi(image)).text
        if text:
            parts.append(Part(text, {"page": number + 1}))
        else:
            empty.append(number + 1)
        progress(number + 1, total)
    notes = [] if not window else ["the image was read by OCR"] if total == 1 else [ocr_note([n + 1 for n in window])]
    notes += [f"page {number}: no text was found" if total > 1 else "no text was found in the image"
              for number in empty]
    return ParsedFile(title=None, parts=parts, pages=total, notes=notes, read_until=read_until)


def _upright(image_ops, frame):
    """The frame decoded, turned by its EXIF orientation, transparency on white."""
    page = image_ops.exif_transpose(frame)
    if page.mode in ("RGBA", "LA", "PA") or (page.mode == "P" and "transparency" in page.info):
        from PIL import Image

        rgba = page.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if page.mode not in ("1", "L", "RGB"):
        return page.convert("RGB")
    page.load()
    return page


def _dpi(image) -> int | None:
    """The image's resolution where its header gives a likely one."""
    dpi = image.info.get("dpi")
    try:
        value = round(float(dpi[0])) if dpi else None
    except (TypeError, ValueError, IndexError):
        return None
    return value if value and 70 <= value <= 2400 else None
