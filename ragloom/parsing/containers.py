"""Office files are zip packages: checked (corrupt, encrypted, zip bomb) before any parser unpacks them."""

from __future__ import annotations

import io
import zipfile

from ragloom.errors import ParseError
from ragloom.parsing.base import ParseLimits

# A password-protected .docx/.xlsx/.pptx is not a zip at all: Office wraps the encrypted package in an OLE
# compound file (the format of legacy .doc/.xls), whose directory names the stream "EncryptedPackage".
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")


def checked_zip(data: bytes, limits: ParseLimits) -> io.BytesIO:
    """``data`` as a stream for python-docx / python-pptx / openpyxl, once it is known to be a readable, unencrypted
    zip whose entries, decompressed, stay under ``limits.max_unpacked_bytes``.

    The sizes come from the central directory (``infolist``), read before anything is decompressed. A header
    that understates an entry cannot inflate past it: Python's zipfile stops reading an entry at its declared
    size and fails its CRC check.
    """
    if data.startswith(_OLE_MAGIC):
        if _ENCRYPTED_PACKAGE in data:
            raise ParseError("encrypted", "password-protected Office file (an encrypted package): needs the password")
        raise ParseError("unsupported", "a legacy binary Office file (.doc/.xls/.ppt) under an Office Open XML name; "
                                        "save it as .docx/.xlsx/.pptx")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            entries = package.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as e:
        raise ParseError("corrupt", f"not a readable zip package: {e}") from e
    if any(info.flag_bits & 0x1 for info in entries):
        raise ParseError("encrypted", "zip entries are encrypted: needs the password")
    unpacked = sum(info.file_size for info in entries)
    if unpacked > limits.max_unpacked_bytes:
        raise ParseError("oversized", f"unpacks to {unpacked} bytes > limit {limits.max_unpacked_bytes} "
                                      f"(RAGLOOM_PARSE_MAX_UNPACKED_BYTES): a zip bomb or a huge embedded file")
    return io.BytesIO(data)
