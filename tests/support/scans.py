"""Pages of text drawn as images, as a scanner gives them: rendered with Pillow at 150 dpi, turned by a small angle,
blurred a little and speckled. The tests of OCR read them back (as PNG, JPEG, TIFF or a scanned PDF) and count the
words found.

Fonts: DejaVu Sans (Debian's fonts-dejavu-core) draws Latin, Greek, Cyrillic and Arabic; Pillow's text layout
(libraqm) joins Arabic letters and sets them right to left.

Usage::

    page = scan_page(["Quarterly report", "Revenue rose by twelve percent."])      # a PIL image, mode "L"
    russian = scan_page(["Выручка выросла на двенадцать процентов."], seed=2)
    save_scanned_pdf([page, russian], tmp_path / "scan.pdf")                         # one image per page
    save_tiff([page, russian], tmp_path / "scan.tiff")                               # one frame per page
    png_bomb(tmp_path / "bomb.png")                     # 1.2 MB claiming 100000 x 100000 pixels, all of them valid
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

DPI = 150
FONT_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
              "/usr/share/fonts/dejavu/DejaVuSans.ttf",
              "/usr/share/fonts/truetype/dejavu-core/DejaVuSans.ttf")


def font_path() -> str:
    """DejaVu Sans on this machine (Latin, Greek, Cyrillic and Arabic glyphs)."""
    for candidate in FONT_PATHS:
        if Path(candidate).exists():
            return candidate
    raise FileNotFoundError("DejaVu Sans not found: install Debian's fonts-dejavu-core")


def scan_page(lines: list[str], *, width_in: float = 6.0, font_pt: float = 12, angle: float = 0.8,
              speckle: float = 0.001, seed: int = 1, dpi: int = DPI) -> Image.Image:
    """A grayscale page ``width_in`` inches wide and as tall as its lines, ``lines`` drawn at ``font_pt``; a line in
    a right-to-left script is set from the right margin. ``angle`` degrees of turn, ``speckle`` the share of pixels
    darkened at random (the same for the same ``seed``)."""
    font = ImageFont.truetype(font_path(), round(font_pt * dpi / 72))
    margin, leading = dpi // 2, round(font_pt * 1.6 * dpi / 72)
    width = round(width_in * dpi)
    page = Image.new("L", (width, 2 * margin + leading * len(lines)), 255)
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(lines):
        y = margin + number * leading
        if _right_to_left(line):
            draw.text((width - margin, y), line, font=font, fill=20, anchor="ra", direction="rtl")
        else:
            draw.text((margin, y), line, font=font, fill=20)
    page = page.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=255).filter(ImageFilter.GaussianBlur(0.6))
    return _speckled(page, speckle, seed)


def save_scanned_pdf(pages: list[Image.Image], path: Path, dpi: int = DPI) -> Path:
    """A PDF of one image per page and no text layer, as a scanner writes it."""
    first, *rest = _copies(pages)
    first.save(path, "PDF", resolution=dpi, save_all=True, append_images=rest)
    return path


def save_tiff(pages: list[Image.Image], path: Path, dpi: int = DPI) -> Path:
    """A multi-page TIFF, one frame per page."""
    first, *rest = _copies(pages)
    first.save(path, "TIFF", dpi=(dpi, dpi), compression="tiff_adobe_deflate", save_all=True, append_images=rest)
    return path


def _copies(pages: list[Image.Image]) -> list[Image.Image]:
    # Pillow leaves a save's settings on the images it appended, and a later save in another format trips on them.
    return [page.copy() for page in pages]


def png_bomb(path: Path, side: int = 100_000) -> Path:
    """A valid black-and-white PNG of ``side`` x ``side`` pixels (10 G for the default) in about 1.2 MB: its rows of
    zeros deflated once, the compressed block repeated (each starts afresh after a full flush) and the checksum of
    zeros computed, so making it takes a fraction of a second."""
    row, rows_per_block = bytes(1 + (side + 7) // 8), 1000
    assert side % rows_per_block == 0
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(row * rows_per_block) + deflate.flush(zlib.Z_FULL_FLUSH)
    size = len(row) * side
    # Adler-32 of zeros: a stays 1, b adds 1 per byte.
    checksum = struct.pack(">I", (size % 65521) << 16 | 1)
    stream = b"\x78\xda" + block * (side // rows_per_block) + deflate.flush() + checksum
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", stream) + _chunk(b"IEND", b""))
    return path


def words_found(expected: str, read: str) -> float:
    """The share of ``expected``'s words (case and punctuation aside) found among the words of ``read``."""
    wanted, seen = _words(expected), set(_words(read))
    return sum(word in seen for word in wanted) / len(wanted) if wanted else 1.0


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _words(text: str) -> list[str]:
    return ["".join(c for c in word if c.isalnum()) for word in text.casefold().split() if any(map(str.isalnum, word))]


def _right_to_left(line: str) -> bool:
    return any("\u0590" <= c <= "\u08ff" for c in line)


def _speckled(page: Image.Image, share: float, seed: int) -> Image.Image:
    rng = random.Random(seed)
    pixels = page.load()
    for _ in range(round(share * page.width * page.height)):
        pixels[rng.randrange(page.width), rng.randrange(page.height)] = rng.randrange(40, 140)
    return page
