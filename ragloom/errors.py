"""One error family: callers catch RagloomError, or a specific kind below it."""


class RagloomError(Exception):
    """Root of every error ragloom raises on purpose."""


class ConfigError(RagloomError):
    """A setting is missing or invalid; the message names it."""


class ScopeError(RagloomError, ValueError):
    """A scope path or scope fields are malformed (a ValueError too, for callers that validate input)."""


class ParseError(RagloomError):
    """A source could not be parsed; ``reason`` is a short kind (empty, binary, corrupt, ...)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ChunkingError(RagloomError):
    """A chunker was misconfigured or produced an invalid chunk."""


class EmbeddingError(RagloomError):
    """The embedding model could not be loaded or run."""


class StoreError(RagloomError):
    """Weaviate or Neo4j refused, failed or could not be reached."""


class StackError(RagloomError):
    """The local stack could not be provisioned or started; the message says what to do."""


class FilterError(RagloomError):
    """A metadata filter is malformed; the message names the field."""


class RetrievalError(RagloomError):
    """A retrieval strategy failed in a way no fallback covers."""
