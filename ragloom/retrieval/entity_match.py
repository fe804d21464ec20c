"""The entities a query names, matched against the graph snapshot's dictionary of normalised names: word
n-grams first (dictionary lookups), spaCy's NER only when a name it could return might add an entity.

NER returns spans of the query's tokens, normalised by type, and matched exactly, or (two words or more, no
exact match) partially: every entity whose name holds all the words, when at most three do. Either way every
word of the name is a word of some entity name (``RetrievalGraph.word_index``). So a query whose token spans
made only of such words (punctuation and determiners allowed) all normalise to names whose entities the
n-grams found already, and whose multi-word spans match no new entity partially, gets nothing from NER: the
pass is skipped (``ner_could_add``). The test is over every such span, a superset of what NER and the runs
of capitalised words can return, so skipping never changes the entities matched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ragloom.extraction import query_entities
from ragloom.extraction.blas import one_blas_thread
from ragloom.extraction.cues import singular
from ragloom.extraction.resolution import DEFAULT_PLURAL_TYPES, normalize_name

if TYPE_CHECKING:
    from ragloom.retrieval.graph_index import RetrievalGraph

MAX_NAME_WORDS = 6  # query word n-grams looked up as entity names
PARTIAL_LIMIT = 3  # a multi-word name with no exact match matches the entities holding all its words, if <= this
_WORD = re.compile(r"[^\W_][\w'’.&-]*")
_DROPPED = frozenset({"the", "a", "an"})  # leading determiners normalisation removes


def query_grams(text: str, stop_words: Iterable[str] = ()) -> list[str]:
    """Every normalised word n-gram of ``text`` up to ``MAX_NAME_WORDS`` words, single stop words and words
    under 3 letters left out (matched exactly: "first goal" must not match partially)."""
    stop = frozenset(stop_words)
    words = _WORD.findall(text)
    grams: list[str] = []
    for size in range(1, MAX_NAME_WORDS + 1):
        for start in range(len(words) - size + 1):
            gram = words[start:start + size]
            if size == 1 and (gram[0].casefold() in stop or len(gram[0]) < 3):
                continue
            grams.append(normalize_name(" ".join(gram)))
    return list(dict.fromkeys(g for g in grams if g))


def ner_names(nlp: Any, text: str) -> list[str]:
    """spaCy's names in ``text`` (``extraction.query_entities``), run with one BLAS thread: the matrices of
    one short query are tiny, and two OpenBLAS threads on a busy 2-core machine made this step 5-25x slower
    (p50 12-48 ms against 1.8 ms). The limit holds on whichever thread the query runs (``extraction.blas``)."""
    with one_blas_thread():
        return query_entities(nlp, text)


def _usable(token: str, vocabulary: Any) -> bool:
    """Whether every word ``token`` brings into a normalised name is a word of some entity name (a plural
    counts when its singular is: NORP names are folded to the singular)."""
    return token.casefold() in _DROPPED or all(w in vocabulary or singular(w) in vocabulary
                                                for w in normalize_name(token).split())


def ner_could_add(graph: RetrievalGraph, tokens: Sequence[str], text_of: Callable[[int, int], str],
                  found: Iterable[int]) -> bool:
    """Whether a name built from the query's tokens might match an entity not in ``found`` (module docstring).

    ``tokens``: the query's token texts; ``text_of(i, j)``: the query's text from token i to token j - 1 (what
    spaCy's span ``.text`` gives)."""
    known = set(found)
    vocabulary = graph.word_index
    usable = [_usable(token, vocabulary) for token in tokens]
    words = [normalize_name(token).split() for token in tokens]
    start = 0
    while start < len(tokens):
        if not usable[start]:
            start += 1
            continue
        end = start
        while end < len(tokens) and usable[end]:
            end += 1
        for i in range(start, end):  # every span of the run of usable tokens: as text, and as words (runs of
            held: set[str] = set()   # capitalised words are joined by spaces)
            for j in range(i + 1, end + 1):
                held.update(words[j - 1])
                if len(held) > graph.max_name_words + 1:  # no name holds them all (+1: a leading determiner)
                    break
                if _span_adds(graph, {text_of(i, j), " ".join(tokens[i:j])}, known):
                    return True
        start = end
    return False


def _span_adds(graph: RetrievalGraph, texts: set[str], known: set[int]) -> bool:
    keys = {normalize_name(text, t) for text in texts for t in ("", *DEFAULT_PLURAL_TYPES)}
    for key in keys:
        if not key:
            continue
        exact = graph.norm_index.get(key)
        if exact:
            if not known.issuperset(exact):
                return True
            continue
        words = key.split()
        if len(words) >= 2 and not known.issuperset(graph.match_names([key], partial_limit=PARTIAL_LIMIT)):
            return True
    return False


def match_query(graph: RetrievalGraph, text: str, nlp: Any) -> tuple[list[int], bool]:
    """(entity indexes the query names, whether NER ran). ``nlp`` None: the n-grams alone (spaCy unavailable)."""
    stop_words = frozenset(nlp.Defaults.stop_words) if nlp is not None else frozenset()
    found = dict.fromkeys(graph.match_names(query_grams(text, stop_words), partial_limit=0))
    if nlp is None:
        return list(found), False
    doc = nlp.make_doc(text)  # the tokenizer alone: the spans NER could return
    if not ner_could_add(graph, [t.text for t in doc], lambda i, j: doc[i:j].text, found):
        return list(found), False
    names = ner_names(nlp, text)
    return list(dict.fromkeys([*graph.match_names(names, partial_limit=PARTIAL_LIMIT), *found])), True
