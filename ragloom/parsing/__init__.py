"""Files -> Documents, parsed once: Markdown, text, HTML, PDF and JSONL, with rejections for bad input."""

from ragloom.parsing.sources import (
    DEFAULT_MAX_BYTES,
    FORMATS,
    SIDECAR_SUFFIX,
    ParseBatch,
    decode_text,
    document_hash,
    is_sidecar,
    jsonl_documents,
    parse_path,
    parse_sources,
    scope_from_upload_path,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMATS",
    "SIDECAR_SUFFIX",
    "ParseBatch",
    "decode_text",
    "document_hash",
    "is_sidecar",
    "jsonl_documents",
    "parse_path",
    "parse_sources",
    "scope_from_upload_path",
]
