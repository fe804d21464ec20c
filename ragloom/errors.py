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


class QueryError(RetrievalError):
    """A query is malformed: an unknown strategy, field or option, or a value out of bounds; the message names
    it and what is allowed (ragloom.query.parse_query, the one parser every door calls)."""


class LLMError(RagloomError):
    """The language model endpoint refused or failed a request; the message says which and why.

    ``status`` is the HTTP status when the endpoint answered with an error.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMUnavailableError(LLMError):
    """The endpoint could not be reached, or kept failing (connection, 429, 5xx) after the retries."""


class LLMTimeoutError(LLMError):
    """A model request, or a set of query transforms, ran past its timeout."""


class LLMOutputError(LLMError):
    """The model's output cannot be used: truncated (finish_reason "length") or not the JSON asked for."""


class RerankError(RagloomError):
    """The reranking model could not be loaded or run."""


class NotFoundError(RagloomError):
    """What a request names does not exist within the caller's reach (the same answer as someone else's, so ids
    cannot be probed)."""


class ForbiddenError(RagloomError):
    """A request that reaches outside the caller's own scope."""


class ConflictError(RagloomError):
    """A request that cannot apply to the current state; the message says what to do first."""

