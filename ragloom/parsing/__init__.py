"""Files -> Documents, parsed once: Markdown, text, HTML, PDF, JSONL, Word, PowerPoint, Excel, CSV and email, with
rejections for bad input."""

from ragloom.parsing.base import DEFAULT_MAX_BYTES, ParseLimits
from ragloom.parsing.sources import (
    ATTACHED_TO,
    FORMATS,
    SIDECAR_SUFFIX,
    ParseBatch,
    decode_text,
    document_hash,
    is_sidecar,
    jsonl_documents,
    parse_content,
    parse_path,
    parse_sources,
    scope_from_upload_path,
)

__all__ = [
    "ATTACHED_TO",
    "DEFAULT_MAX_BYTES",
    "FORMATS",
    "SIDECAR_SUFFIX",
    "ParseBatch",
    "ParseLimits",
    "decode_text",
    "document_hash",
    "is_sidecar",
    "jsonl_documents",
    "parse_content",
    "parse_path",
    "parse_sources",
    "scope_from_upload_path",
]
