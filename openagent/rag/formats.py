"""What kind of file a blob is: from its first bytes, checked against its declared type.

Pure standard library, so the master can run the same check when a file is attached.
:func:`detect_format` returns the format to extract with, or raises
:class:`FormatMismatch` when the declared MIME type (or the filename's extension)
contradicts the content: a "PDF" that does not start with ``%PDF-``, a Word file that
is not a zip holding ``word/document.xml``, a PNG that is text.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath
from typing import Literal

__all__ = ["Format", "FormatMismatch", "detect_format", "sniff"]

Format = Literal["pdf", "docx", "html", "markdown", "text", "csv", "json", "image"]

_MIME: dict[str, Format] = {
    "application/pdf": "pdf",
    "application/x-pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/plain": "text",
    "text/csv": "csv",
    "application/csv": "csv",
    "application/json": "json",
    "text/json": "json",
    "image/png": "image",
    "image/jpeg": "image",
    "image/gif": "image",
    "image/webp": "image",
}
_EXTENSIONS: dict[str, Format] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".csv": "csv",
    ".json": "json",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".gif": "image",
    ".webp": "image",
}
_TEXT_FORMATS: frozenset[Format] = frozenset({"html", "markdown", "text", "csv", "json"})
_GENERIC_MIME = frozenset({"", "application/octet-stream", "binary/octet-stream"})

Sniffed = Literal["pdf", "docx", "zip", "image", "text", "binary", "empty"]


class FormatMismatch(ValueError):
    """The declared type contradicts the content (the message says both)."""


def sniff(data: bytes) -> Sniffed:
    """What the content looks like, from its magic bytes (and, for zips, their members)."""
    if not data:
        return "empty"
    if b"%PDF-" in data[:1024]:
        return "pdf"
    if data.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")) or (
        data.startswith(b"RIFF") and data[8:12] == b"WEBP"
    ):
        return "image"
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError, ValueError):
            return "zip"
        return "docx" if "word/document.xml" in names else "zip"
    head = data[:4096]
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "binary"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the 4 KiB edge
            return "binary"
    return "text"


def detect_format(data: bytes, mime_type: str, filename: str) -> Format:
    """The format to extract ``data`` with.

    The declared ``mime_type`` wins when it is specific, then the extension of
    ``filename``, then the content. Raises :class:`FormatMismatch` when the declared
    type and the content disagree, or the content is of no supported format.
    """
    declared = _MIME.get(mime_type.split(";")[0].strip().lower())
    label = mime_type
    by_extension = _EXTENSIONS.get(PurePosixPath(filename).suffix.lower())
    if declared == "text" and by_extension in _TEXT_FORMATS:
        declared = by_extension  # text/plain for a .md or .csv file: the extension says more
    if declared is None:
        declared = by_extension
        label = (
            f"a {PurePosixPath(filename).suffix.lower() or 'extensionless'} file ({mime_type or 'no type'})"
        )
    found = sniff(data)
    if found == "empty":
        return declared or "text"
    if declared is None:
        if found in ("pdf", "docx", "image"):
            return found
        if found == "text":
            return "text"
        raise FormatMismatch(
            f"unsupported file type {mime_type!r}: the content is {_describe(found)}, not PDF, DOCX, "
            "HTML, Markdown, text, CSV, JSON or an image"
        )
    if declared in _TEXT_FORMATS:
        if found != "text":
            raise FormatMismatch(f"declared as {label} but the content is {_describe(found)}")
        return declared
    if found != declared:
        raise FormatMismatch(f"declared as {label} but the content is {_describe(found)}")
    return declared


def _describe(found: Sniffed) -> str:
    return {
        "pdf": "a PDF",
        "docx": "a Word (DOCX) document",
        "zip": "a zip archive that is not a Word document",
        "image": "an image",
        "text": "plain text",
        "binary": "binary data of an unknown type",
        "empty": "empty",
    }[found]
