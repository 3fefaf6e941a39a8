"""Checking what a query attaches, before anything is stored.

Every file is checked first, then all are stored, so a query refused for one file
stores none. The errors are :class:`~master.errors.QueryRejected` with codes
``too_many_attachments`` and ``attachment_too_large`` (HTTP 413) and
``invalid_attachment`` (HTTP 400), each naming the file and the limit or problem.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import unicodedata
from base64 import b64decode
from dataclasses import dataclass

from master.errors import QueryRejected
from openagent.rag import FormatMismatch, detect_format
from protocol import Attachment
from protocol.rag import ref_for_digest

_MAX_NAME = 120
_UNSAFE = re.compile(r"[\x00-\x1f\x7f<>:\"|?*]")


@dataclass(frozen=True, slots=True)
class NewFile:
    """A decoded attachment, ready to store."""

    filename: str
    """Sanitized, for display only (never a path)."""
    mime_type: str
    data: bytes
    sha256: str

    @property
    def ref(self) -> str:
        return ref_for_digest(self.sha256)


def sanitize_filename(name: str) -> str:
    """A name safe to show and to put in a prompt: no directories, control or bidi characters,
    at most 120 characters; ``attachment`` when nothing is left."""
    name = unicodedata.normalize("NFC", name)
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp"))
    name = _UNSAFE.sub("_", name).strip().strip(".").strip()
    name = " ".join(name.split())
    if len(name) > _MAX_NAME:
        stem, dot, suffix = name.rpartition(".")
        keep = suffix if dot and len(suffix) <= 10 else ""
        name = name[: _MAX_NAME - len(keep) - 1].rstrip() + ("." + keep if keep else "")
    return name or "attachment"


def decode_attachments(attachments: list[Attachment], *, max_count: int, max_bytes: int) -> list[NewFile]:
    """Decode and check every attachment; raise ``QueryRejected`` naming the first bad one."""
    if len(attachments) > max_count:
        raise QueryRejected(
            "too_many_attachments",
            f"{len(attachments)} files attached; at most {max_count} per query (RAG_MAX_ATTACHMENTS)",
        )
    files: list[NewFile] = []
    for attachment in attachments:
        filename = sanitize_filename(attachment.filename)
        encoded = attachment.content_base64
        # A cheap bound before decoding: base64 is 4 characters per 3 bytes.
        if (len(encoded) - encoded.count("\n") - encoded.count("\r")) * 3 // 4 > max_bytes + 3:
            raise _too_large(filename, max_bytes)
        try:
            data = b64decode("".join(encoded.split()), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise QueryRejected(
                "invalid_attachment", f"attachment {filename!r}: content_base64 is not valid base64 ({exc})"
            ) from None
        if len(data) > max_bytes:
            raise _too_large(filename, max_bytes, len(data))
        mime_type = attachment.mime_type.strip().lower() or "application/octet-stream"
        try:
            detect_format(data, mime_type, filename)
        except FormatMismatch as exc:
            raise QueryRejected("invalid_attachment", f"attachment {filename!r}: {exc}") from None
        files.append(NewFile(filename, mime_type, data, hashlib.sha256(data).hexdigest()))
    return files


def _too_large(filename: str, max_bytes: int, size: int | None = None) -> QueryRejected:
    got = f" is {size} bytes;" if size is not None else " is larger than allowed;"
    return QueryRejected(
        "attachment_too_large",
        f"attachment {filename!r}{got} the limit is {max_bytes} bytes per file (RAG_MAX_ATTACHMENT_BYTES)",
    )
