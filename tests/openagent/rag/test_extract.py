"""openagent.rag.extract and openagent.rag.formats: every format, and every kind of bad file."""

from __future__ import annotations

import json

import pytest

from openagent.errors import DocumentError
from openagent.rag.extract import Limits, extract_sections
from openagent.rag.formats import FormatMismatch, detect_format
from tests.factories import make_docx, make_encrypted_pdf, make_pdf, make_zip_bomb_docx

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_pdf_gives_one_section_per_page() -> None:
    data = make_pdf(["The reactor runs at 300 kelvin.", "Page two talks about turbines."])
    result = extract_sections(data, filename="plant.pdf", mime_type=PDF)
    assert result.format == "pdf"
    assert result.pages == 2
    assert [section.position for section in result.sections] == ["page 1", "page 2"]
    assert "300 kelvin" in result.sections[0].text


def test_docx_sections_start_at_headings() -> None:
    data = make_docx([("Budget", "We spend 40 euros."), ("Staff", "Three people work here.")])
    result = extract_sections(data, filename="plan.docx", mime_type=DOCX)
    assert [section.position for section in result.sections] == ["section: Budget", "section: Staff"]
    assert "40 euros" in result.sections[0].text


def test_html_drops_scripts_and_styles() -> None:
    page = b"<html><head><style>p{}</style></head><body><h1>Intro</h1><p>Hello &amp; welcome</p><script>steal()</script></body></html>"
    result = extract_sections(page, filename="page.html", mime_type="text/html")
    text = "\n".join(section.text for section in result.sections)
    assert "Hello & welcome" in text
    assert "steal" not in text
    assert result.sections[-1].position == "section: Intro"


def test_markdown_csv_json_and_text() -> None:
    markdown = extract_sections(b"# A\none\n## B\ntwo", filename="n.md", mime_type="text/markdown")
    assert [s.position for s in markdown.sections] == ["section: A", "section: B"]
    table = extract_sections(b"city,people\nLyon,500\n", filename="t.csv", mime_type="text/csv")
    assert table.sections[0].position == "rows 2-2"
    assert "city: Lyon; people: 500" in table.sections[0].text
    data = extract_sections(
        json.dumps({"owner": "Ann"}).encode(), filename="d.json", mime_type="application/json"
    )
    assert data.sections[0].position == "key: owner"
    text = extract_sections(b"line\n" * 100, filename="log.txt", mime_type="text/plain")
    assert [s.position for s in text.sections] == ["lines 1-40", "lines 41-80", "lines 81-100"]


def test_empty_file_is_named() -> None:
    with pytest.raises(DocumentError, match=r"^empty\.pdf: the file is empty \(0 bytes\)"):
        extract_sections(b"", filename="empty.pdf", mime_type=PDF)


def test_corrupt_pdf_is_named() -> None:
    data = make_pdf(["hello"])
    broken = data[:60] + b"garbage" * 10
    with pytest.raises(DocumentError, match=r"^broken\.pdf: .*corrupt"):
        extract_sections(broken, filename="broken.pdf", mime_type=PDF)


def test_encrypted_pdf_is_named() -> None:
    with pytest.raises(DocumentError, match=r"^locked\.pdf: the PDF is encrypted"):
        extract_sections(make_encrypted_pdf("secret plans"), filename="locked.pdf", mime_type=PDF)


def test_zip_bomb_docx_is_refused_before_decompressing() -> None:
    with pytest.raises(DocumentError, match=r"^bomb\.docx: .*zip bomb"):
        extract_sections(make_zip_bomb_docx(), filename="bomb.docx", mime_type=DOCX)


def test_compression_ratio_guard() -> None:
    limits = Limits(max_unzipped_bytes=10**12)
    with pytest.raises(DocumentError, match=r"compressed \d+:1"):
        extract_sections(
            make_zip_bomb_docx(8 * 1024 * 1024), filename="b.docx", mime_type=DOCX, limits=limits
        )


@pytest.mark.parametrize(
    ("data", "mime", "problem"),
    [
        (b"just some words", PDF, "declared as application/pdf but the content is plain text"),
        (make_pdf(["x"]), "text/plain", "declared as text/plain but the content is a PDF"),
        (b"%PDF-1.4 not really", DOCX, "but the content is a PDF"),
        (b"\x89PNG\r\n\x1a\n\0\0\0", "text/markdown", "but the content is an image"),
    ],
)
def test_lying_type_is_named(data: bytes, mime: str, problem: str) -> None:
    with pytest.raises(DocumentError) as caught:
        extract_sections(data, filename="liar.bin", mime_type=mime)
    assert str(caught.value).startswith("liar.bin: ")
    assert problem in str(caught.value)


def test_generic_type_uses_extension_then_content() -> None:
    assert detect_format(make_pdf(["x"]), "application/octet-stream", "a.bin") == "pdf"
    assert detect_format(b"# hi", "application/octet-stream", "notes.md") == "markdown"
    assert detect_format(b"# hi", "text/plain", "notes.md") == "markdown"
    with pytest.raises(FormatMismatch, match="unsupported file type"):
        detect_format(b"\0\1\2\3binary", "application/octet-stream", "blob")


def test_pdf_page_without_text_is_reported() -> None:
    data = make_pdf(["real text here", ""])
    result = extract_sections(data, filename="scan.pdf", mime_type=PDF)
    assert result.warnings == ["page 2 has no extractable text"]
