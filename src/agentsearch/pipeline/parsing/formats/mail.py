"""An e-mail (RFC 822 / MIME, ``.eml``): its text as parts, its attachments as files of their own.

- The first part opens with the headers a reader asks about, one a line (``From:``, ``To:``, ``Cc:``, ``Date:``,
  ``Subject:``), followed by the body's text before any heading, at ``{}``: every chunk of the mail's opening says
  who wrote it to whom, when and about what.
- The body is the text/plain alternative if there is one, else the text/html one read as a web page
  (``agentsearch.pipeline.parsing.formats.html``), whose headings give sections (``{"section": "..."}``). Other inline
  text parts (a list's footer) are left out.
- Attachments: parts marked as attachments, non-text parts with a file name, and attached e-mails (``.eml``),
  as ``Attachment(name, bytes)``; the worker stores each as a document of its own. Past ``limits.max_attachments``
  the rest are left out and the notes say how many: the mail's own text is worth keeping for them.
- Names are bare file names (``agentsearch.pipeline.parsing.file_names.bare_name``): no folders, no control characters,
  at most ``MAX_NAME_BYTES`` bytes in UTF-8 (the extension kept), ``attachment-N`` plus an extension for its type when
  there is none.
- Parts nested more than ``limits.max_depth`` deep (multiparts in multiparts, e-mails attached to attached e-mails)
  are refused: a file of a few kilobytes could otherwise unpack to thousands of documents.

The title is the subject.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from pathlib import Path, PurePosixPath

from agentsearch.pipeline.parsing.file_names import MAX_NAME_BYTES, bare_name
from agentsearch.pipeline.parsing.formats.html import decode_html, read_page
from agentsearch.pipeline.parsing.formats.markdown import Sections
from agentsearch.pipeline.parsing.formats.plain import too_long
from agentsearch.pipeline.parsing.parsed import Attachment, ParsedFile, ParseLimits, ParseRefused, Part
from agentsearch.pipeline.parsing.text_encoding import decode_text

_HEADERS = ("From", "To", "Cc", "Date", "Subject")


def parse(path: Path, limits: ParseLimits, progress: Callable[[int, int], None], pages: range | None) -> ParsedFile:
    message = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
    assert isinstance(message, EmailMessage)
    attachments = _distinct_names(_attachments(message, limits))
    notes = []
    if len(attachments) > limits.max_attachments:
        notes.append(f"the e-mail has {len(attachments)} attachments; only the first {limits.max_attachments} "
                     "were kept")
        attachments = attachments[:limits.max_attachments]
    header_lines = []
    for name in _HEADERS:
        value = _header(message, name)
        if value:
            header_lines.append(f"{name}: {value}")
    body = _body(message, limits)
    parts = list(body.parts)
    if header_lines:
        if parts and not parts[0].location:
            parts[0] = Part("\n".join(header_lines) + "\n\n" + parts[0].text, {})
        else:
            parts.insert(0, Part("\n".join(header_lines), {}))
    if sum(len(part.text) for part in parts) > limits.max_chars:
        raise too_long(limits)
    if not parts and not attachments:
        raise ParseRefused("the e-mail has no text and no attachments")
    return ParsedFile(title=_header(message, "Subject") or None, parts=parts, notes=notes + body.notes,
                      attachments=attachments)


def _header(message: Message, name: str) -> str:
    try:
        value = message.get(name)
    except Exception:  # noqa: BLE001 - a malformed header is left out, not the whole mail
        return ""
    return " ".join(str(value).split()) if value is not None else ""


def _body(message: EmailMessage, limits: ParseLimits) -> ParsedFile:
    """The text of the message's body: text/plain preferred, else text/html read as a page."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ParsedFile(title=None, parts=[])
    data = part.get_payload(decode=True) or b""
    if not isinstance(data, bytes):
        return ParsedFile(title=None, parts=[])
    charset = part.get_content_charset()
    if part.get_content_subtype() == "html":
        return read_page(decode_html(data, charset), limits)
    sections = Sections(limits)
    sections.add(_decode(data, charset))
    return ParsedFile(title=None, parts=sections.finish())


def _decode(data: bytes, charset: str | None) -> str:
    """A text part's bytes as text: strict UTF-8 first (parts often say ASCII and are UTF-8), then the charset the
    part declares, then ``decode_text``'s guess."""
    for encoding in ("utf-8", charset):
        if not encoding:
            continue
        try:
            return data.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            continue
    return decode_text(data)


def _attachments(message: Message, limits: ParseLimits) -> list[Attachment]:
    """The message's attachments in order, found by a walk over its parts with a stack (no recursion), refused when
    they nest deeper than ``limits.max_depth``."""
    found: list[Attachment] = []
    stack: list[tuple[Message, int]] = [(message, 0)]
    while stack:
        part, depth = stack.pop()
        if depth > limits.max_depth:
            raise ParseRefused(f"the e-mail's parts are nested more than {limits.max_depth} deep")
        if part.is_multipart() and part.get_content_type() != "message/rfc822":
            children = part.get_payload()
            if isinstance(children, list):
                stack.extend((child, depth + 1) for child in reversed(children) if isinstance(child, Message))
            continue
        if part.get_content_type() == "message/rfc822":
            inner = _attached_message(part)
            if inner is None:
                continue
            # Its own parts count towards the depth: read through the inner message's tree too.
            _check_depth(inner, depth + 1, limits)
            subject = _header(inner, "Subject")
            name = _file_name(part.get_filename() or (subject + ".eml" if subject else ""), len(found), ".eml")
            try:
                data = inner.as_bytes(policy=policy.default)
            except Exception:  # noqa: BLE001 - an attached e-mail too damaged to write out is left out
                continue
            found.append(Attachment(name, data))
            continue
        if not _is_attachment(part):
            continue
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            extension = mimetypes.guess_extension(part.get_content_type()) or ".bin"
            found.append(Attachment(_file_name(part.get_filename() or "", len(found), extension), payload))
    return found


def _check_depth(message: Message, depth: int, limits: ParseLimits) -> None:
    stack = [(message, depth)]
    while stack:
        part, level = stack.pop()
        if level > limits.max_depth:
            raise ParseRefused(f"the e-mail's parts are nested more than {limits.max_depth} deep")
        if part.get_content_type() == "message/rfc822":
            inner = _attached_message(part)
            if inner is not None:
                stack.append((inner, level + 1))
        elif part.is_multipart():
            children = part.get_payload()
            if isinstance(children, list):
                stack.extend((child, level + 1) for child in children if isinstance(child, Message))


def _attached_message(part: Message) -> Message | None:
    payload = part.get_payload()
    if isinstance(payload, list) and payload and isinstance(payload[0], Message):
        return payload[0]
    return None


def _is_attachment(part: Message) -> bool:
    """Marked as an attachment, or a file that is not text (a picture with a name, sent inline)."""
    if part.get_content_disposition() == "attachment":
        return True
    return part.get_filename() is not None and part.get_content_maintype() != "text"


def _distinct_names(attachments: list[Attachment]) -> list[Attachment]:
    """The attachments, those whose name repeats an earlier one's without its extension (two ``image001.png``, a
    ``report.pdf`` and a ``report.docx``) renamed ``image001 (2).png``: the worker names an attachment's document
    by that part of its name."""
    seen: set[str] = set()
    named = []
    for attachment in attachments:
        path = PurePosixPath(attachment.name)
        stem, name, copy = path.stem, attachment.name, 1
        while PurePosixPath(name).stem.lower() in seen:
            copy += 1
            short = stem.encode("utf-8")[:MAX_NAME_BYTES - 40].decode("utf-8", "ignore")
            name = f"{short} ({copy}){path.suffix}"
        seen.add(PurePosixPath(name).stem.lower())
        named.append(Attachment(name, attachment.data))
    return named


def _file_name(name: str, index: int, extension: str) -> str:
    """``name`` as a bare file name; ``attachment-N`` plus ``extension`` when nothing is left."""
    return bare_name(name, f"attachment-{index + 1}{extension}")
