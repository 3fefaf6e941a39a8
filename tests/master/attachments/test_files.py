"""master.attachments.files: limits, base64 and type checks, filename sanitizing."""

from __future__ import annotations

import base64

import pytest

from master.attachments.files import decode_attachments, sanitize_filename
from master.errors import QueryRejected
from protocol import Attachment


def attach(name: str, data: bytes, mime: str = "text/plain") -> Attachment:
    return Attachment(filename=name, mime_type=mime, content_base64=base64.b64encode(data).decode())


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\ann\\notes.txt", "notes.txt"),
        ("evil\u202etxt.exe", "eviltxt.exe"),
        ("line\nbreak.md", "linebreak.md"),
        ("<script>.html", "_script_.html"),
        ("...", "attachment"),
        ("", "attachment"),
        ("a" * 300 + ".pdf", "a" * 116 + ".pdf"),  # 120 characters in all
    ],
)
def test_sanitize_filename(raw: str, shown: str) -> None:
    assert sanitize_filename(raw) == shown


def test_same_content_gets_the_same_ref() -> None:
    one, two = decode_attachments(
        [attach("a.txt", b"same"), attach("b.txt", b"same")], max_count=5, max_bytes=100
    )
    assert one.ref == two.ref and one.ref.startswith("att_") and len(one.ref) == 28


def test_limits_name_the_file_and_the_limit() -> None:
    with pytest.raises(QueryRejected) as caught:
        decode_attachments([attach("big.txt", b"x" * 101)], max_count=5, max_bytes=100)
    assert caught.value.code == "attachment_too_large"
    assert "'big.txt' is 101 bytes; the limit is 100 bytes" in caught.value.message
    with pytest.raises(QueryRejected) as caught:
        decode_attachments([attach("a.txt", b"x")] * 3, max_count=2, max_bytes=100)
    assert caught.value.code == "too_many_attachments"
    huge = Attachment(filename="huge.txt", content_base64="QUFB" * 1000)
    with pytest.raises(QueryRejected, match="'huge.txt' is larger than allowed"):
        decode_attachments([huge], max_count=5, max_bytes=100)  # refused before decoding


def test_bad_base64_and_lying_types() -> None:
    bad = Attachment(filename="x.txt", content_base64="%%%")
    with pytest.raises(QueryRejected, match="'x.txt': content_base64 is not valid base64"):
        decode_attachments([bad], max_count=5, max_bytes=100)
    with pytest.raises(
        QueryRejected, match="'r.pdf': declared as application/pdf but the content is plain text"
    ):
        decode_attachments([attach("r.pdf", b"hello", "application/pdf")], max_count=5, max_bytes=100)
    (empty,) = decode_attachments([attach("e.pdf", b"", "application/pdf")], max_count=5, max_bytes=100)
    assert empty.data == b""  # stored: the extractor says it is empty
