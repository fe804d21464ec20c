"""Counting in the embedder's own tokens, so a chunk's size means what the model will see."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer

from ragloom.embedding.base import resolve_model_path, tokenizer_file
from ragloom.errors import ChunkingError
from ragloom.types import sha256_hex

_FALLBACK_MAX_TOKENS = 512


class TokenCounter:
    """A model's tokenizer with truncation and padding off, plus its input limit.

    Counts include the special tokens the model adds ([CLS] and [SEP] for BERT-style models), so
    ``count(text) <= max_tokens`` means the model reads all of ``text``.
    """

    def __init__(self, tokenizer: Tokenizer, max_tokens: int, fingerprint: str) -> None:
        # tokenizer.json files often ship with truncation (MiniLM: 128) and padding on; either would
        # make every count wrong, and semantic-text-splitter would see capped sizes.
        self.tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.max_tokens = max_tokens
        self.fingerprint = fingerprint  # changes when the tokenizer does: part of every chunk id
        self.special_tokens = len(self.tokenizer.encode("", add_special_tokens=True).ids)

    @classmethod
    def from_model_dir(cls, model_dir: str | Path) -> TokenCounter:
        path = tokenizer_file(str(model_dir))
        if path is None:
            raise ChunkingError(f"no tokenizer.json in {model_dir}: chunk sizes must be counted in the model's tokens")
        raw = path.read_bytes()
        try:
            tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as e:  # tokenizers raises a bare Exception on a bad file
            raise ChunkingError(f"cannot load {path}: {e}") from e
        return cls(tokenizer, _model_max_tokens(Path(model_dir)), sha256_hex(raw)[:12])

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=True).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=True)]

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` (cut at a token boundary) whose count is at most ``max_tokens``."""
        budget = max_tokens - self.special_tokens
        if budget <= 0:
            return ""
        # Tokenize a window, not the whole text (a parent can be thousands of tokens): WordPiece tokens
        # never span whitespace, so a window cut at whitespace tokenizes like the same prefix of the text.
        window = max(256, budget * 8)
        while True:
            head = text if window >= len(text) else text[: max(text.rfind(" ", 0, window), window // 2)]
            offsets = self.tokenizer.encode(head, add_special_tokens=False).offsets
            if len(offsets) > budget or head is text:
                break
            window *= 2
        if len(offsets) <= budget:
            return text
        # A cut inside a word can tokenize differently from the whole word: shrink until it fits.
        while budget > 0:
            prefix = text[: offsets[budget - 1][1]]  # offsets are character offsets
            if self.count(prefix) <= max_tokens:
                return prefix
            budget -= 1
        return ""


def _model_max_tokens(model_dir: Path) -> int:
    """sentence-transformers' max_seq_length, else the tokenizer's model_max_length."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        try:
            value = json.loads((model_dir / name).read_text()).get(key)
        except (OSError, ValueError):
            continue
        if isinstance(value, int) and 0 < value < 100_000:
            return value
    return _FALLBACK_MAX_TOKENS


@functools.lru_cache(maxsize=8)
def get_token_counter(model: str = "") -> TokenCounter:
    """The cached counter for a model name or path ('' = the default embedding model)."""
    return TokenCounter.from_model_dir(resolve_model_path(model))
