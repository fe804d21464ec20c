"""spaCy over chunks -> resolved entities, mentions, and relations (sentence co-occurrence and SVO triples)."""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragloom.extraction.nlp import VerbLemmatizer
from ragloom.extraction.resolution import EntityResolver, KnownEntity, Resolution
from ragloom.types import Chunk, Entity, Mention, Relation

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Token

DEFAULT_ENTITY_TYPES = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
                        "LANGUAGE")
NUMERIC_ENTITY_TYPES = ("DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")
COOCCURS = "CO_OCCURS"
_SUBJECT_DEPS = ("nsubj", "nsubjpass")
_RELATION_TYPE = re.compile(r"[^A-Z0-9_]+")

Log = Callable[[str], None]


@dataclass
class Extraction:
    """What a batch of chunks yielded. One Relation per (source, target, type, chunk), weight = count there."""

    entities: list[Entity]
    mentions: list[Mention]
    relations: list[Relation]
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)  # entity id -> normalized names, canonical first
    surface_forms: int = 0
    merge_ratio: float = 0.0
    chunks: int = 0
    seconds: float = 0.0


@dataclass
class _Span:
    label: str
    text: str
    sentence: int


@dataclass
class _ChunkParse:
    chunk_id: str
    spans: list[_Span]
    triples: list[tuple[int, str, int]]  # (subject span index, relation type, object span index)


class EntityExtractor:
    """Runs ``nlp.pipe`` over chunk texts in batches and resolves what NER found into entities.

    ``n_process`` > 1 uses spaCy's multiprocessing (one pipeline copy per process).
    """

    def __init__(self, nlp: Language, *, entity_types: Iterable[str] = DEFAULT_ENTITY_TYPES,
                 resolver: EntityResolver | None = None, batch_size: int = 64, n_process: int = 1,
                 svo: bool = True, cooccurrence_window: int = 10, max_chars: int = 100_000) -> None:
        self.nlp = nlp
        self.entity_types = frozenset(entity_types)
        self.resolver = resolver or EntityResolver()
        self.batch_size = batch_size
        self.n_process = n_process
        self.svo = svo and "parser" in nlp.pipe_names
        # Pairs further apart than this many entities in one sentence are not linked: a sentence listing
        # 40 names would otherwise add 780 edges that say little.
        self.cooccurrence_window = cooccurrence_window
        self.max_chars = max_chars
        self._verb_lemma = VerbLemmatizer(nlp)

    def extract(self, chunks: list[Chunk], *, known: Iterable[KnownEntity] = (),
                log: Log | None = None) -> Extraction:
        """Entities, mentions and relations of these chunks; ``known`` entities keep their ids."""
        started = time.perf_counter()
        texts = (chunk.text[: self.max_chars] for chunk in chunks)
        parses: list[_ChunkParse] = []
        report_every = max(500, len(chunks) // 10)
        for i, (chunk, doc) in enumerate(zip(chunks, self.nlp.pipe(texts, batch_size=self.batch_size,
                                                                     n_process=self.n_process), strict=True)):
            parses.append(self._parse(chunk.chunk_id, doc))
            if log and (i + 1) % report_every == 0:
                log(f"extraction: {i + 1}/{len(chunks)} chunks ({time.perf_counter() - started:.1f}s)")

        surfaces: Counter[tuple[str, str]] = Counter()
        for parse in parses:
            for span in parse.spans:
                surfaces[(span.label, span.text)] += 1
        resolution = self.resolver.resolve(surfaces, known)
        mentions, relations = self._link(parses, resolution)
        return Extraction(entities=list(resolution.entities.values()), mentions=mentions, relations=relations,
                          keys=resolution.keys, surface_forms=resolution.surface_forms,
                          merge_ratio=resolution.merge_ratio, chunks=len(chunks),
                          seconds=time.perf_counter() - started)

    def _parse(self, chunk_id: str, doc: Doc) -> _ChunkParse:
        spans: list[_Span] = []
        token_span: dict[int, int] = {}  # token index -> span index, for SVO
        sentence_starts = [s.start for s in doc.sents] if doc.has_annotation("SENT_START") else [0]
        sentence = 0
        for ent in doc.ents:
            if ent.label_ not in self.entity_types or not ent.text.strip():
                continue
            while sentence + 1 < len(sentence_starts) and sentence_starts[sentence + 1] <= ent.start:
                sentence += 1
            for t in range(ent.start, ent.end):
                token_span[t] = len(spans)
            spans.append(_Span(ent.label_, ent.text, sentence))
        triples = self._triples(doc, token_span) if self.svo and token_span else []
        return _ChunkParse(chunk_id, spans, triples)

    def _triples(self, doc: Doc, token_span: dict[int, int]) -> list[tuple[int, str, int]]:
        """(subject, VERB[_PREP], object) where both ends are entities: dobj, passive agent, and prepositional
        objects of the verb, with their conjuncts ("founded X and Y")."""
        triples = []
        for token in doc:
            if token.dep_ not in _SUBJECT_DEPS or token.i not in token_span:
                continue
            verb = token.head
            if verb.i == token.i:
                continue
            subjects = [token.i, *(c.i for c in token.conjuncts)]
            lemma = verb.lemma_ or self._verb_lemma(verb.text)
            for child in verb.children:
                if child.dep_ == "dobj":
                    rel, objects, reverse = lemma, _with_conjuncts(child), False
                elif child.dep_ == "agent":  # "X was founded by Y": Y founded X
                    rel, objects, reverse = lemma, [g for p in child.children if p.dep_ == "pobj"
                                                    for g in _with_conjuncts(p)], token.dep_ == "nsubjpass"
                elif child.dep_ == "prep":
                    rel = f"{lemma}_{child.text}"
                    objects = [g for p in child.children if p.dep_ == "pobj" for g in _with_conjuncts(p)]
                    reverse = False
                else:
                    continue
                rel_type = _RELATION_TYPE.sub("_", rel.upper()).strip("_")
                if not rel_type or rel_type == COOCCURS:
                    continue
                for s in subjects:
                    for o in objects:
                        a, b = token_span.get(s), token_span.get(o.i)
                        if a is None or b is None or a == b:
                            continue
                        triples.append((b, rel_type, a) if reverse else (a, rel_type, b))
        return triples

    def _link(self, parses: list[_ChunkParse], resolution: Resolution) -> tuple[list[Mention], list[Relation]]:
        mentions: list[Mention] = []
        relations: list[Relation] = []
        for parse in parses:
            ids = [resolution.entity_of.get((s.label, s.text)) for s in parse.spans]
            counts = Counter(eid for eid in ids if eid is not None)
            mentions.extend(Mention(parse.chunk_id, eid, n) for eid, n in sorted(counts.items()))
            weights: Counter[tuple[str, str, str]] = Counter()
            by_sentence: dict[int, list[str]] = defaultdict(list)
            for span, eid in zip(parse.spans, ids, strict=True):
                if eid is not None and eid not in by_sentence[span.sentence]:
                    by_sentence[span.sentence].append(eid)
            for order in by_sentence.values():
                for i, a in enumerate(order):
                    for b in order[i + 1: i + 1 + self.cooccurrence_window]:
                        source, target = sorted((a, b))  # co-occurrence has no direction: one edge per pair
                        weights[(source, target, COOCCURS)] += 1
            for s, rel_type, o in parse.triples:
                a, b = ids[s], ids[o]
                if a is not None and b is not None and a != b:
                    weights[(a, b, rel_type)] += 1
            relations.extend(Relation(a, b, t, parse.chunk_id, n) for (a, b, t), n in sorted(weights.items()))
        return mentions, relations


def _with_conjuncts(token: Token) -> list[Token]:
    return [token, *token.conjuncts]


def query_entities(nlp: Language, text: str, *, entity_types: Iterable[str] = DEFAULT_ENTITY_TYPES,
                   resolver: EntityResolver | None = None) -> list[str]:
    """Normalized names of the entities a query mentions, to seed graph retrieval.

    NER misses names in lower-cased or terse queries, so runs of capitalized words count as well.
    """
    resolver = resolver or EntityResolver()
    kept = frozenset(entity_types)
    doc = nlp(text)
    names: list[str] = []
    covered: set[int] = set()
    for ent in doc.ents:
        if ent.label_ in kept:
            names.append(resolver.normalize(ent.text, ent.label_))
            covered.update(range(ent.start, ent.end))
    run: list[str] = []
    for token in [*doc, None]:
        if token is not None and token.i not in covered and token.text[:1].isupper() and not token.is_stop \
                and token.is_alpha:
            run.append(token.text)
            continue
        if run:
            names.append(resolver.normalize(" ".join(run)))
            run = []
    return list(dict.fromkeys(n for n in names if n))
