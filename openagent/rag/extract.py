"""Turn a file's bytes into positioned sections of text, one reader per format.

- PDF with pypdf (one section per page; encrypted and corrupt files are refused),
- DOCX with python-docx (sections start at headings; zip bombs are refused before
  anything is decompressed),
- HTML with the standard library's parser (scripts and styles dropped, sections at headings),
- Markdown (sections at ``#`` headings), plain text (line ranges), CSV (row ranges), JSON.

Why these libraries: pypdf and python-docx add 19 MB to an environment and read a
50-page PDF in about 0.2 s; MarkItDown (pdfminer, magika, onnxruntime) adds 267 MB and
took 9 s on the same PDF. See the README's RAG section for the measurements.

:func:`extract_sections` is synchronous CPU work (run it in a thread). Problems with the
file raise :class:`~openagent.errors.DocumentError` naming the file. Pages or images
without text are listed in :attr:`Extraction.needs_vision` with an image to transcribe,
for the caller to send to a vision model when one is configured.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import zipfile
from dataclasses import dataclass, field
from html.parser import HTMLParser

from openagent.errors import DocumentError
from openagent.rag.formats import Format, FormatMismatch, detect_format

__all__ = ["Extraction", "Limits", "Section", "VisionRequest", "extract_sections"]

logger = logging.getLogger("openagent.rag")


@dataclass(frozen=True, slots=True)
class Section:
    """A run of text and where it is in the file (``page 3``, ``section: Intro``, ``lines 1-40``)."""

    position: str
    text: str


@dataclass(frozen=True, slots=True)
class VisionRequest:
    """A page or image with no text layer, and an image of it for a vision model."""

    position: str
    image: bytes
    mime_type: str


@dataclass(slots=True)
class Extraction:
    """What :func:`extract_sections` found in one file."""

    format: Format
    sections: list[Section] = field(default_factory=list)
    needs_vision: list[VisionRequest] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pages: int | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """Guards against hostile files."""

    max_pages: int = 1000
    """PDF pages read at most."""
    max_unzipped_bytes: int = 64 * 1024 * 1024
    """Total uncompressed size a DOCX may declare."""
    max_compression_ratio: float = 100.0
    """Uncompressed/compressed ratio of any DOCX member (zip bombs reach thousands)."""
    max_zip_members: int = 5000


def extract_sections(
    data: bytes, *, filename: str, mime_type: str, limits: Limits | None = None
) -> Extraction:
    """Read ``data`` as the format its type and content agree on.

    Raises:
        DocumentError: The file is empty, lies about its type, or cannot be read.
    """
    limits = limits or Limits()
    if not data:
        raise DocumentError(filename, "the file is empty (0 bytes)")
    try:
        fmt = detect_format(data, mime_type, filename)
    except FormatMismatch as exc:
        raise DocumentError(filename, str(exc)) from None
    result = Extraction(format=fmt)
    if fmt == "pdf":
        _pdf(data, filename, limits, result)
    elif fmt == "docx":
        _docx(data, filename, limits, result)
    elif fmt == "image":
        result.needs_vision.append(VisionRequest("image", data, mime_type))
    else:
        text = _decode(data)
        if fmt == "html":
            result.sections = _html(text)
        elif fmt == "markdown":
            result.sections = _markdown(text)
        elif fmt == "csv":
            result.sections = _csv(text)
        elif fmt == "json":
            result.sections = _json(text, filename)
        else:
            result.sections = _lines(text)
    result.sections = [section for section in result.sections if section.text.strip()]
    if not result.sections and not result.needs_vision:
        raise DocumentError(filename, "no extractable text in the file")
    return result


# --------------------------------------------------------------------------- PDF


def _pdf(data: bytes, filename: str, limits: Limits, result: Extraction) -> None:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = bool(
                    reader.decrypt("")
                )  # owner-password-only files open with an empty user password
            except (DependencyError, NotImplementedError, PyPdfError):
                opened = False
            if not opened:
                raise DocumentError(
                    filename, "the PDF is encrypted (password-protected); send it unencrypted"
                )
        pages = reader.pages
        count = len(pages)
    except DocumentError:
        raise
    except (PdfReadError, FileNotDecryptedError, PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise DocumentError(
            filename, f"the PDF is corrupt or truncated ({exc or type(exc).__name__})"
        ) from None
    except RecursionError:
        raise DocumentError(filename, "the PDF is corrupt (its object tree is cyclic or too deep)") from None
    result.pages = count
    if count > limits.max_pages:
        result.warnings.append(f"only the first {limits.max_pages} of {count} pages were read")
    for number in range(1, min(count, limits.max_pages) + 1):
        position = f"page {number}"
        try:
            page = pages[number - 1]
            text = page.extract_text() or ""
        except Exception as exc:  # one bad page must not lose the others
            result.warnings.append(f"{position} could not be read ({type(exc).__name__}: {exc})")
            continue
        if text.strip():
            result.sections.append(Section(position, text))
            continue
        image = _first_image(page)
        if image is None:
            result.warnings.append(f"{position} has no extractable text")
        else:
            result.needs_vision.append(VisionRequest(position, image[0], image[1]))


def _first_image(page: object) -> tuple[bytes, str] | None:
    """The largest embedded image of a page without text (a scan), if pypdf can export it."""
    try:
        images = list(page.images)  # type: ignore[attr-defined]
    except Exception:  # image export needs optional codecs (Pillow); best effort
        return None
    best = max(images, key=lambda image: len(image.data), default=None)
    if best is None:
        return None
    name = str(best.name).lower()
    mime = "image/jpeg" if name.endswith((".jpg", ".jpeg")) else "image/png"
    return bytes(best.data), mime


# --------------------------------------------------------------------------- DOCX


def _docx(data: bytes, filename: str, limits: Limits, result: Extraction) -> None:
    _check_zip(data, filename, limits)
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise DocumentError(filename, f"the Word document is corrupt ({exc or type(exc).__name__})") from None
    except Exception as exc:  # lxml raises its own errors on broken XML
        raise DocumentError(filename, f"the Word document is corrupt ({type(exc).__name__}: {exc})") from None
    heading = "start"
    lines: list[str] = []

    def flush() -> None:
        if lines:
            result.sections.append(Section(f"section: {heading}", "\n".join(lines)))
            lines.clear()

    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            style = (block.style.name if block.style is not None else "") or ""
            text = block.text.strip()
            if style.lower().startswith(("heading", "title")) and text:
                flush()
                heading = text[:80]
                lines.append(text)
            elif text:
                lines.append(text)
        elif isinstance(block, Table):
            for row in block.rows:
                cells = [cell.text.strip() for cell in row.cells]
                if any(cells):
                    lines.append(" | ".join(cells))
    flush()


def _check_zip(data: bytes, filename: str, limits: Limits) -> None:
    """Refuse zip bombs from the central directory, before decompressing anything.

    Python's zipfile stops reading a member at its declared size (and checks the CRC), so
    declared sizes bound what python-docx can decompress.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise DocumentError(filename, f"the Word document is not a valid zip archive ({exc})") from None
    if len(members) > limits.max_zip_members:
        raise DocumentError(
            filename, f"the Word document has {len(members)} parts (limit {limits.max_zip_members}): refused"
        )
    total = sum(member.file_size for member in members)
    if total > limits.max_unzipped_bytes:
        raise DocumentError(
            filename,
            f"the Word document would unpack to {total} bytes (limit {limits.max_unzipped_bytes}): "
            "refused as a possible zip bomb",
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > 1024 * 1024 and ratio > limits.max_compression_ratio:
            raise DocumentError(
                filename,
                f"part {member.filename!r} of the Word document is compressed {ratio:.0f}:1 "
                f"(limit {limits.max_compression_ratio:.0f}:1): refused as a possible zip bomb",
            )


# --------------------------------------------------------------------------- text formats


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8", errors="replace")


def _lines(text: str, lines_per_section: int = 40) -> list[Section]:
    rows = text.splitlines()
    sections = []
    for start in range(0, len(rows), lines_per_section):
        block = rows[start : start + lines_per_section]
        end = start + len(block)
        sections.append(Section(f"lines {start + 1}-{end}", "\n".join(block)))
    return sections


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _markdown(text: str) -> list[Section]:
    sections: list[Section] = []
    heading = "start"
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        match = None if fenced else _HEADING.fullmatch(line)
        if match:
            if any(part.strip() for part in lines):
                sections.append(Section(f"section: {heading}", "\n".join(lines)))
            heading = match.group(2)[:80]
            lines = [line]
        else:
            lines.append(line)
    if any(part.strip() for part in lines):
        sections.append(Section(f"section: {heading}", "\n".join(lines)))
    return sections


def _csv(text: str, rows_per_section: int = 40) -> list[Section]:
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:4096])
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    sections = []
    for start in range(0, len(body), rows_per_section):
        block = body[start : start + rows_per_section]
        lines = [" | ".join(header)]
        lines += [
            "; ".join(f"{name}: {value}" for name, value in zip(header, row, strict=False) if value)
            for row in block
        ]
        sections.append(Section(f"rows {start + 2}-{start + 1 + len(block)}", "\n".join(lines)))
    if not body:
        sections.append(Section("row 1", " | ".join(header)))
    return sections


def _json(text: str, filename: str) -> list[Section]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(filename, f"the JSON is invalid ({exc})") from None
    if isinstance(value, dict):
        items = [(f"key: {key}"[:90], item) for key, item in value.items()]
    elif isinstance(value, list):
        items = [(f"item {index}", item) for index, item in enumerate(value)]
    else:
        items = [("value", value)]
    return [Section(position, json.dumps(item, indent=1, ensure_ascii=False)) for position, item in items]


_BLOCK_TAGS = frozenset(
    "p div br li ul ol tr table section article header footer blockquote pre dt dd h1 h2 h3 h4 h5 h6 title".split()
)
_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "svg"})


class _HTMLText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self._heading = "start"
        self._parts: list[str] = []
        self._skip = 0
        self._in_heading = False
        self._heading_parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag in {"h1", "h2", "h3", "h4", "h5", "h6"}:
            self._flush()
            self._in_heading = True
            self._heading_parts = []
        if tag in _BLOCK_TAGS:
            self._parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag in {"h1", "h2", "h3", "h4", "h5", "h6"} and self._in_heading:
            self._in_heading = False
            self._heading = " ".join("".join(self._heading_parts).split())[:80] or self._heading
        if tag in _BLOCK_TAGS:
            self._parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self._parts.append(data)
        if self._in_heading:
            self._heading_parts.append(data)

    def _flush(self) -> None:
        text = "\n".join(" ".join(line.split()) for line in "".join(self._parts).splitlines())
        text = re.sub(r"\n{3,}", "\n\n", text).strip()
        if text:
            self.sections.append(Section(f"section: {self._heading}", text))
        self._parts = []

    def close(self) -> None:
        super().close()
        self._flush()


def _html(text: str) -> list[Section]:
    parser = _HTMLText()
    parser.feed(text)
    parser.close()
    return parser.sections
