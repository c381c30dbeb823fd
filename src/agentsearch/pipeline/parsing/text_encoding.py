"""Bytes of text in any encoding into ``str`` (``decode_text``): the text readers' one way to decode a file.

The order:

1. a byte-order mark (UTF-8, UTF-16, UTF-32) decides, and is not part of the text returned;
2. strict UTF-8, which most files are and which no other encoding of non-ASCII text passes by accident;
3. cp1252 (Windows Western, a superset of Latin-1's letters) when it reads every byte and charset-normalizer's mess
   measure finds the result clean: on a short Western text the detector itself cannot tell cp1252 from its Baltic or
   Central European neighbours, or even from Big5 or Shift-JIS, and its first guess is often wrong, while the same
   bytes read as cp1252 from Cyrillic, Greek, Polish, Chinese or Korean text look like the mess they are;
4. what charset-normalizer finds most likely (Shift-JIS, GB18030, cp1251, UTF-16 without a mark, ...);
5. Latin-1, which reads any byte, so ``decode_text`` never fails.

Usage::

    decode_text("café".encode("cp1252"))          # "café"
    decode_text(b"\\xff\\xfeh\\x00i\\x00")           # "hi" (UTF-16 with its mark)
"""

from __future__ import annotations

import codecs

# Longest first: the UTF-32 little-endian mark begins with the UTF-16 one.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# Below this mess (charset-normalizer's measure: 0 for clean text; CJK, Cyrillic or Greek bytes read as cp1252 measure
# 1 and more), a text that reads as cp1252 is taken as cp1252.
_CP1252_MAX_MESS = 0.5
# The mess is measured on the text's first characters: enough to tell, cheap on a long file.
_MESS_SAMPLE_CHARS = 100_000


def decode_text(data: bytes) -> str:
    """The text ``data`` holds, in whatever encoding it was written (see the module's docstring for the order)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(encoding, "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    # Imported here: most files are UTF-8 and never need them.
    from charset_normalizer import from_bytes
    from charset_normalizer.md import mess_ratio

    try:
        western = data.decode("cp1252")
    except UnicodeDecodeError:
        western = None
    if western is not None and mess_ratio(western[:_MESS_SAMPLE_CHARS], 1.0) < _CP1252_MAX_MESS:
        return western
    best = from_bytes(data).best()
    if best is not None and best.encoding:
        return data.decode(best.encoding, "replace")
    return data.decode("latin-1")
