"""The BM25 lane's text analysis: lower-cased words without possessive 's and English stopwords, each written
twice: as itself and as its Snowball stem (PyStemmer) marked with ``STEM_MARK``.

Weaviate's BM25 tokenizes words but does not stem, so "studies" never meets "study". Chunks are therefore
written with an extra property, ``bm25_text``: this analysis of the document title, the heading path and the
text (``bm25_source``), whitespace-joined,
which the BM25 lane (and native hybrid's keyword half) searches with the query analysed the same way. The
stem term lets word forms meet ("studies" / "study"); the word term ranks the exact form above a mere stem
match, so "performer" prefers "performer" to "performance" (Snowball gives both "perform"). The mark keeps
the two vocabularies apart (a stem never counts as a word). The analyzer's name is recorded in each
collection's description; a collection written with another analyzer (or none) is rebuilt by the next sync
(vectors come from the embedding cache).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from functools import lru_cache

ANALYZER = "words-and-snowball-stems-stop-possessive-title-v3"  # bump when the analysis changes: rebuilt
STEM_MARK = "~"  # before a stem term: not a word character, so no word term starts with it
_WORD = re.compile(r"\w+", re.UNICODE)
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s\b")  # "Bonetti's" -> "Bonetti" (else a lone "s" term everywhere)
# A standard English stopword list (the classic Lucene/Snowball set): function words only, so negations
# ("not", "no") are kept out of it on purpose — claims hinge on them.
STOPWORDS = frozenset("""
a an and are as at be but by for if in into is it its of on or such that the their then there these they
this to was will with were been being have has had do does did from than so which who whom what when where
why how all any both each few more most other some our ours you your yours he him his she her hers we us
i me my mine them those am can could should would may might must shall also about above after again
against below between during before over under up down out off once here further same own too very just
""".split())
_local = threading.local()  # PyStemmer objects are not thread-safe: one per thread


def _stemmer():
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def bm25_source(title: str, heading_path: Sequence[str], text: str) -> str:
    """What a chunk's BM25 text is made of: its document's title (a chunk of a long document rarely repeats
    it, yet queries name it), unless the first heading already is the title, then the heading path and text."""
    parts = [title] if title and (not heading_path or heading_path[0] != title) else []
    return "\n".join([*parts, " ".join(heading_path), text])


def analyze(text: str) -> str:
    """``text`` as the BM25 lane indexes and queries it: each non-stopword word, then its marked stem."""
    words = [w for w in _WORD.findall(_POSSESSIVE.sub("", text.lower())) if w not in STOPWORDS]
    stems = _stemmer().stemWords(words)
    return " ".join(term for word, stem in zip(words, stems, strict=True) for term in (word, STEM_MARK + stem))


@lru_cache(maxsize=4096)
def analyze_query(query: str) -> str:
    return analyze(query)
