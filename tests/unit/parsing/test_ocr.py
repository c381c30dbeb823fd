"""Images of text read by OCR through the real parsing child (``agentsearch.pipeline.parsing.read_file``) and the real
tesseract engine: PNG, JPEG and multi-page TIFF, a page lying on its side, pages in Latin, Cyrillic and Arabic script
read with the language packs of their script, an image bomb refused from its header.

The pages are drawn by ``tests.support.scans`` (150 dpi, a small turn, blur and speckles). OCR makes mistakes, so a
page passes when nearly all its words are found (Arabic: 85%, where one misread dot changes a word).
"""

from __future__ import annotations

import pytest

from agentsearch.pipeline.parsing import ParseLimits, ParseRefused, read_file
from agentsearch.pipeline.parsing.ocr import languages_for, ocr_note
from agentsearch.pipeline.platform.settings import Settings
from tests.support.scans import png_bomb, save_tiff, scan_page, words_found

ENGLISH = ["Quarterly report of the northern wind farms", "Revenue rose by twelve percent in the fourth quarter,",
           "while the output of the solar parks fell behind", "as prices dropped during the long winter months."]
GERMAN = ["Der Umsatz der Windparks im Norden stieg im vierten", "Quartal um zwölf Prozent, während die Leistung der",
          "Solarparks zurückblieb, weil die Preise im langen", "Winter fielen. Der Vorstand erwartet Wachstum."]
RUSSIAN = ["Выручка северных ветряных электростанций выросла", "на двенадцать процентов в четвёртом квартале, а",
           "выработка солнечных парков отстала, потому что цены", "упали за долгую зиму. Совет ожидает роста."]
ARABIC = ["ارتفعت إيرادات مزارع الرياح في الشمال بنسبة", "اثني عشر في المئة في الربع الرابع بينما تراجع",
          "إنتاج الطاقة الشمسية بسبب انخفاض الأسعار", "خلال فصل الشتاء الطويل ويتوقع المجلس النمو"]
EVERY_PACK = ParseLimits(ocr_languages=Settings().ocr_languages)


def test_a_png_of_english_text_is_read(tmp_path):
    path = tmp_path / "page.png"
    scan_page(ENGLISH).save(path, dpi=(150, 150))

    parsed = read_file(path, "image", EVERY_PACK)
    (part,) = parsed.parts
    assert part.location == {"page": 1} and words_found(" ".join(ENGLISH), part.text) >= 0.9
    assert parsed.pages == 1 and parsed.title is None and parsed.notes == ["the image was read by OCR"]


def test_a_jpeg_lying_on_its_side_is_turned_upright_and_read(tmp_path):
    path = tmp_path / "photo.jpg"
    scan_page(ENGLISH, seed=4).rotate(90, expand=True).convert("RGB").save(path, quality=85)

    (part,) = read_file(path, "image", ParseLimits(ocr_languages="eng")).parts
    assert words_found(" ".join(ENGLISH), part.text) >= 0.9


def test_a_german_page_is_read_again_with_the_german_pack(tmp_path):
    # English alone misses the umlauts: "zwölf", "während" and "zurückblieb" are the words it gets wrong.
    path = tmp_path / "german.png"
    scan_page(GERMAN, seed=5).save(path, dpi=(150, 150))

    (part,) = read_file(path, "image", ParseLimits(ocr_languages="eng+deu+fra+spa")).parts
    assert words_found(" ".join(GERMAN), part.text) >= 0.95
    assert words_found("zwölf während zurückblieb", part.text) >= 2 / 3


def test_the_pages_of_a_tiff_are_read_by_window_in_the_packs_of_their_script(tmp_path):
    path = save_tiff([scan_page(ENGLISH, seed=1), scan_page(RUSSIAN, seed=2), scan_page(ARABIC, seed=3, font_pt=16)],
                     tmp_path / "scans.tiff")
    progress: list[tuple[int, int]] = []

    parsed = read_file(path, "image", EVERY_PACK, on_progress=lambda done, total: progress.append((done, total)),
                       pages=range(1, 3))
    russian, arabic = parsed.parts
    assert (russian.location, arabic.location) == ({"page": 2}, {"page": 3})
    assert words_found(" ".join(RUSSIAN), russian.text) >= 0.9
    assert words_found(" ".join(ARABIC), arabic.text) >= 0.85
    assert parsed.pages == 3 and progress == [(2, 3), (3, 3)] and parsed.notes == ["pages 2-3 were read by OCR"]


def test_an_image_bomb_is_refused_from_its_header(tmp_path):
    bomb = png_bomb(tmp_path / "bomb.png")
    assert bomb.stat().st_size < 2 * 2**20

    with pytest.raises(ParseRefused) as refused:
        read_file(bomb, "image", ParseLimits())
    assert str(refused.value) == "the image is larger than 60000000 pixels"


def test_a_tiff_of_more_pages_than_the_limit_a_damaged_image_and_a_blank_one(tmp_path):
    blank = scan_page([""], speckle=0)
    many = save_tiff([blank, blank, blank], tmp_path / "many.tiff")
    with pytest.raises(ParseRefused) as refused:
        read_file(many, "image", ParseLimits(max_pages=2))
    assert str(refused.value) == "the image has more than 2 pages"

    damaged = tmp_path / "damaged.png"
    damaged.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    with pytest.raises(ParseRefused, match=r"^the image is damaged"):
        read_file(damaged, "image", ParseLimits())

    empty = tmp_path / "blank.png"
    blank.save(empty)
    parsed = read_file(empty, "image", ParseLimits())
    assert parsed.parts == [] and parsed.notes == ["the image was read by OCR", "no text was found in the image"]


def test_each_script_is_read_with_its_allowed_packs():
    packs = Settings().ocr_languages.split("+")
    assert languages_for("Latin", packs) == "eng"            # read again in the page's language where it is not
    assert languages_for("Cyrillic", packs) == "rus+eng"
    assert languages_for("Arabic", packs) == "ara"           # English beside Arabic reads Arabic worse
    assert languages_for("Han", packs) == "chi_sim+eng"
    assert languages_for("Latin", ["deu", "fra"]) == "deu"
    assert languages_for("Cyrillic", ["deu", "eng"]) == "deu+eng"   # no pack of the script: the first allowed


def test_the_note_names_pages_read_by_ocr_as_ranges():
    assert ocr_note([2]) == "page 2 was read by OCR"
    assert ocr_note([1, 2, 3, 7, 9, 10]) == "pages 1-3, 7, 9-10 were read by OCR"
