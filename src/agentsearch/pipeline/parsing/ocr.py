"""The text of a page image, read by the tesseract engine (``read_image``): scanned PDF pages and image files.

The engine runs as a process of its own (``tesseract stdin stdout``, one thread: the parsing child sets
``OMP_THREAD_LIMIT=1``), under the parsing child's limits, which it inherits, and a timeout. Its CPU time is its
own, not the child's: the child's wall-clock backstop is what bounds a window of scanned pages.

Languages: all 16 packs of the default setting at once take 3.0-4.9 CPU s on a full A4 page (40 lines, 150 or 200
dpi) that English alone reads in 1.0-1.6 s, and read worse than the right pack (Arabic: 0.55-0.76 of its words
against 0.69-0.90 on a small page), so each page gets the packs of its own script. Tesseract's orientation and
script detection (``--psm 0``, 0.6-1.0 s a page) tells the script and a quarter turn; the page is turned upright
first. The allowed packs of that script are then used, English after them where it is allowed (a Russian report
quotes English names; not after Arabic, which it reads worse). Latin is written by most packs, and English alone
misreads the others (German: 0.73-0.90 of its words, Spanish 0.80, Turkish 0.43), while the ten Latin packs at once
cost two to four English readings: a Latin page is read in English first, its language named by ``py3langid``
among the allowed Latin ones (0.6 s to load, once per file), and a page in another language read again with that
language's pack and English (German, Spanish and French then 1.00, Turkish 0.89-1.00).

Measured (CPU seconds of the child and the engine for one A4 page of 40 lines; ``tests.support.scans`` pages):

    allowed                     150 dpi                       200 dpi
    eng                         1.7-2.5 s (0.40-0.59 pages/s) 2.0-2.4 s (0.43-0.51 pages/s)
    all 16, by script           2.0-3.1 s (0.32-0.49 pages/s) 2.0-4.4 s (0.23-0.51 pages/s)
    all 16 at once, no --psm 0  3.0-4.9 s (0.20-0.33 pages/s) 3.1-3.2 s (0.31-0.32 pages/s)

(English, German and Russian pages; German is the slow end of "by script", read twice.)

Usage::

    reading = read_image(Image.open("scan.png"), ParseLimits(ocr_languages="eng+deu+rus"), dpi=150)
    reading.text, reading.languages          # ("Der Umsatz stieg ...", "deu+eng")
"""

from __future__ import annotations

import io
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from PIL import Image

from agentsearch.pipeline.parsing.parsed import ParseLimits, ParseRefused

# The script each pack reads, as tesseract's orientation and script detection names it; a pack not named is Latin.
PACK_SCRIPTS = {
    "rus": "Cyrillic", "ukr": "Cyrillic", "bel": "Cyrillic", "bul": "Cyrillic", "mkd": "Cyrillic", "srp": "Cyrillic",
    "kaz": "Cyrillic", "ara": "Arabic", "fas": "Arabic", "urd": "Arabic", "ell": "Greek", "chi_sim": "Han",
    "chi_tra": "Han", "jpn": "Japanese", "kor": "Hangul", "hin": "Devanagari", "mar": "Devanagari",
    "nep": "Devanagari", "tha": "Thai", "heb": "Hebrew", "ben": "Bengali", "tam": "Tamil",
}
# English after these scripts' packs read worse: Arabic 0.76-0.93 of its words against 0.83-0.93 alone.
RIGHT_TO_LEFT = {"Arabic", "Hebrew"}
# Script names of the detection that are one of the scripts above.
_SCRIPT_ALIASES = {"HanS": "Han", "HanT": "Han", "Katakana": "Japanese", "Hiragana": "Japanese", "Korean": "Hangul"}
# ISO 639-1 codes of the Latin packs ``py3langid`` names.
LATIN_CODES = {
    "eng": "en", "deu": "de", "fra": "fr", "spa": "es", "ita": "it", "por": "pt", "nld": "nl", "tur": "tr",
    "ron": "ro", "vie": "vi", "pol": "pl", "ces": "cs", "slk": "sk", "hun": "hu", "swe": "sv", "dan": "da",
    "nor": "no", "fin": "fi", "est": "et", "lav": "lv", "lit": "lt", "slv": "sl", "hrv": "hr", "cat": "ca",
    "ind": "id", "msa": "ms", "afr": "af", "gle": "ga", "isl": "is",
}
# The detection turns a page only when this sure; a page of few words gives low confidences.
MIN_ORIENTATION_CONFIDENCE = 2.0
MIN_LANGUAGE_CONFIDENCE = 0.5
# Images sharper than this are scaled down first: the engine reads 300 dpi as well and takes longer on more pixels.
MAX_DPI = 300


@dataclass(frozen=True)
class Reading:
    text: str
    languages: str       # the packs the text was read with, +-joined
    rotated: int = 0     # degrees turned clockwise to stand the page upright


@dataclass(frozen=True)
class Detection:
    rotate: int = 0
    script: str | None = None


def read_image(image: Image.Image, limits: ParseLimits, dpi: int | None = None) -> Reading:
    """The text of ``image`` (one page) in the packs of its script among ``limits.ocr_languages``; ``dpi`` is the
    image's resolution where known. Refuses when no allowed pack is installed or the engine runs past the limit."""
    packs = allowed_packs(limits.ocr_languages)
    if dpi and dpi > MAX_DPI:
        scale = MAX_DPI / dpi
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                             Image.Resampling.LANCZOS)
        dpi = MAX_DPI
    png = _png(image, dpi)
    multi_script = len({PACK_SCRIPTS.get(p, "Latin") for p in packs}) > 1
    detection = _detect(png, dpi, limits)
    if detection.rotate and detection.rotate % 90 == 0:
        image = image.rotate(-detection.rotate, expand=True)
        png = _png(image, dpi)
    script = detection.script if multi_script else None
    if script is None or not any(PACK_SCRIPTS.get(p, "Latin") == script for p in packs):
        script = PACK_SCRIPTS.get(packs[0], "Latin")
    languages = languages_for(script, packs)
    text = _recognise(png, languages, dpi, limits)
    if script == "Latin":
        better = _latin_language(text, packs, languages)
        if better is not None:
            languages = better
            text = _recognise(png, languages, dpi, limits)
    return Reading(text=text, languages=languages, rotated=detection.rotate % 360)


def ocr_note(pages: list[int]) -> str:
    """What a note says of the pages (1-based) read by OCR: "pages 1-3, 7 were read by OCR"."""
    spans: list[list[int]] = []
    for number in sorted(pages):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    named = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)
    return f"page {named} was read by OCR" if len(pages) == 1 else f"pages {named} were read by OCR"


def allowed_packs(ocr_languages: str) -> list[str]:
    """The packs of ``ocr_languages`` (+-joined) that are installed, in their order."""
    installed = installed_packs()
    packs = [p for p in ocr_languages.split("+") if p and p in installed and p not in ("osd", "equ")]
    if not packs:
        raise ParseRefused(f"scanned pages cannot be read here: no OCR language pack of {ocr_languages!r} is "
                           "installed")
    return packs


def languages_for(script: str, packs: list[str]) -> str:
    """The packs to read a page of ``script`` with first: the allowed packs of that script (of Latin only English,
    or the first Latin pack where English is not allowed), then English where allowed, but for a right-to-left
    script."""
    chosen = [p for p in packs if PACK_SCRIPTS.get(p, "Latin") == script]
    if script == "Latin" and chosen:
        chosen = ["eng"] if "eng" in chosen else chosen[:1]
    if not chosen:
        chosen = [packs[0]]
    if "eng" in packs and "eng" not in chosen and script not in RIGHT_TO_LEFT:
        chosen.append("eng")
    return "+".join(chosen)


@lru_cache(maxsize=1)
def installed_packs() -> frozenset[str]:
    try:
        listed = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise ParseRefused("scanned pages cannot be read here: the OCR engine (tesseract) is not installed") from None
    return frozenset(line.strip() for line in listed.stdout.splitlines()[1:] if line.strip())


def _png(image: Image.Image, dpi: int | None) -> bytes:
    if image.mode not in ("1", "L", "RGB"):
        image = image.convert("RGB")
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1, **({"dpi": (dpi, dpi)} if dpi else {}))
    return out.getvalue()


def _tesseract(png: bytes, arguments: list[str], dpi: int | None, limits: ParseLimits) -> subprocess.CompletedProcess:
    command = ["tesseract", "stdin", "stdout", *arguments, *(["--dpi", str(dpi)] if dpi else [])]
    try:
        return subprocess.run(command, input=png, capture_output=True, timeout=2 * limits.time_s + 5)
    except subprocess.TimeoutExpired:
        raise ParseRefused(f"reading the file took longer than {limits.time_s} s") from None
    except FileNotFoundError:
        raise ParseRefused("scanned pages cannot be read here: the OCR engine (tesseract) is not installed") from None


def _detect(png: bytes, dpi: int | None, limits: ParseLimits) -> Detection:
    """Orientation and script; nothing where the page has too few letters to tell."""
    done = _tesseract(png, ["--psm", "0"], dpi, limits)
    found = dict(re.findall(r"^([A-Za-z ]+):\s*(\S+)\s*$", done.stdout.decode("utf-8", "replace"), re.MULTILINE))
    try:
        rotate = int(found.get("Rotate", "0")) if float(found.get("Orientation confidence", "0")) >= \
            MIN_ORIENTATION_CONFIDENCE else 0
    except ValueError:
        rotate = 0
    script = found.get("Script")
    return Detection(rotate=rotate, script=_SCRIPT_ALIASES.get(script, script) if script else None)


def _recognise(png: bytes, languages: str, dpi: int | None, limits: ParseLimits) -> str:
    done = _tesseract(png, ["-l", languages], dpi, limits)
    if done.returncode < 0:
        raise ParseRefused(f"reading the file took longer than {limits.time_s} s")
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no reason given"]
        raise ParseRefused(f"the OCR engine could not read a page ({reason[0][:200]})")
    text = done.stdout.decode("utf-8", "replace").replace("\f", "")
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in text.splitlines())).strip()


def _latin_language(text: str, packs: list[str], read_with: str) -> str | None:
    """The packs to read a Latin page again with, when its text is in another allowed Latin language than the one
    it was read in; None when the reading stands."""
    latin = {LATIN_CODES[p]: p for p in packs if p in LATIN_CODES}
    if len(latin) < 2 or len(text) < 20:
        return None
    identifier = _identifier()
    if identifier is None:
        return None
    identifier.set_languages(sorted(latin))
    code, confidence = identifier.classify(text[:2000])
    pack = latin.get(code)
    if pack is None or confidence < MIN_LANGUAGE_CONFIDENCE or read_with.split("+")[0] == pack:
        return None
    return f"{pack}+eng" if "eng" in packs and pack != "eng" else pack


@lru_cache(maxsize=1)
def _identifier():
    """``py3langid``'s model (0.6 s to load, once per parsing child), or None without the package."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        return None
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
