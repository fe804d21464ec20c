"""Entities and relations from chunks with spaCy (no LLM), resolved into canonical entities for the graph."""

from ragloom.extraction.extractor import (
    COOCCURS,
    DEFAULT_ENTITY_TYPES,
    NUMERIC_ENTITY_TYPES,
    EntityExtractor,
    Extraction,
    extractor_for,
    query_entities,
)
from ragloom.extraction.nlp import DISABLED_COMPONENTS, load_nlp
from ragloom.extraction.resolution import (
    EntityResolver,
    KnownEntity,
    Resolution,
    make_entity_id,
    normalize_name,
)

__all__ = [
    "COOCCURS",
    "DEFAULT_ENTITY_TYPES",
    "DISABLED_COMPONENTS",
    "NUMERIC_ENTITY_TYPES",
    "EntityExtractor",
    "EntityResolver",
    "Extraction",
    "extractor_for",
    "KnownEntity",
    "Resolution",
    "load_nlp",
    "make_entity_id",
    "normalize_name",
    "query_entities",
]
