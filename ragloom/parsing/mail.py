"""Email (.eml) -> Markdown-like text through the standard library's email package (policy.default): the subject as
the title and `#` heading, From/To/Cc/Date lines, the text/plain body (else the HTML body through the HTML parser),
and the attachments handed back to be parsed as documents of their own."""

from __future__ import annotations

from email import policy
from email.headerregistry import AddressHeader
from email.message import EmailMessage
from email.parser import BytesParser

from ragloom.errors import ParseError
from ragloom.parsing.base import Attachment, Parsed, file_metadata
from ragloom.parsing.html import html_to_text

_ADDRESS_HEADERS = ("from", "to", "cc")


def eml_to_text(data: bytes) -> Parsed:
    if not data.strip():
        raise ParseError("empty", "zero-byte or blank email")
    if b"\x00" in data:  # a saved message is text (attachments are base64 or quoted-printable in it)
        raise ParseError("binary", "NUL bytes: not a saved email message")
    try:
        message = BytesParser(policy=policy.default).parsebytes(data)
        subject = " ".join(str(message.get("subject", "")).split())
        addresses = {name: _addresses(message, name) for name in _ADDRESS_HEADERS}
        date_header = message.get("date")
        sent = getattr(date_header, "datetime", None)
        body = _body(message)
        attachments = list(_attachments(message))
    except (ValueError, TypeError, IndexError, AttributeError, LookupError) as e:
        raise ParseError("malformed", f"unreadable email: {type(e).__name__}: {e}") from e
    if not body.strip() and not attachments:
        raise ParseError("empty", "an email without a body or attachments")
    lines = [f"{label}: {', '.join(addresses[name])}" for name, label in (("from", "From"), ("to", "To"), ("cc", "Cc"))
             if addresses[name]]
    if date_header is not None and str(date_header).strip():
        lines.append(f"Date: {' '.join(str(date_header).split())}")
    if attachments:
        lines.append("Attachments: " + ", ".join(a.filename for a in attachments))
    blocks = [f"# {subject}"] if subject else []
    blocks += ["\n".join(lines)] if lines else []
    blocks += [body.strip()] if body.strip() else []
    sender = _sender(message)
    metadata = file_metadata(**{"author": sender, "from": ", ".join(addresses["from"]), "to": addresses["to"],
                                "cc": addresses["cc"], "date": sent})
    return Parsed(text="\n\n".join(blocks), title=subject, metadata=metadata, attachments=attachments)


def _addresses(message: EmailMessage, name: str) -> list[str]:
    header = message.get(name)
    if header is None:
        return []
    if isinstance(header, AddressHeader):
        return [str(address) for address in header.addresses]
    return [" ".join(str(header).split())]


def _sender(message: EmailMessage) -> str:
    """The sender's display name, else address: the email's author."""
    header = message.get("from")
    if isinstance(header, AddressHeader) and header.addresses:
        address = header.addresses[0]
        return address.display_name or address.addr_spec
    return " ".join(str(header or "").split())


def _body(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except LookupError:  # an unknown charset: the bytes as UTF-8, damaged characters replaced
        content = (part.get_payload(decode=True) or b"").decode("utf-8", "replace")
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        text, _ = html_to_text(content)
        return text
    return content.replace("\r\n", "\n")


def _attachments(message: EmailMessage):  # noqa: ANN202
    for number, part in enumerate(message.iter_attachments(), start=1):
        if part.get_content_type() == "message/rfc822":
            inner = part.get_payload()
            data = inner[0].as_bytes() if isinstance(inner, list) and inner else b""
            default = f"attachment-{number}.eml"
        else:
            data = part.get_payload(decode=True) or b""
            default = f"attachment-{number}"
        filename = " ".join((part.get_filename() or default).split()).replace("/", "_").replace("\\", "_")
        yield Attachment(filename=filename or default, data=data)
