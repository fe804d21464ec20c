"""spaCy over chunks -> resolved entities, mentions, and relations (sentence co-occurrence and SVO triples)."""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from multiprocessing import get_all_start_methods, get_context
from typing import TYPE_CHECKING, Any

from ragloom.errors import ConfigError
from ragloom.extraction.blas import one_blas_thread, worker_blas_thread
from ragloom.extraction.cues import NO_MAIL, Mail, span_cues
from ragloom.extraction.nlp import VerbLemmatizer, deferred_parse, load_nlp
from ragloom.extraction.resolution import EntityResolver, KnownEntity, Resolution
from ragloom.settings import may_start_processes, usable_cpus
from ragloom.types import COOCCURS, Chunk, Entity, Log, Mention, Relation

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

    from ragloom.settings import Settings

DEFAULT_ENTITY_TYPES = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
                        "LANGUAGE")
NUMERIC_ENTITY_TYPES = ("DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")
# The automatic process count (RAGLOOM_SPACY_PROCESSES=0): one per usable CPU, as long as each worker can have
# this much of the memory available (forked workers share the loaded pipeline; their own pages are ~0.2-0.3 GB).
WORKER_MEMORY_BYTES = 512 * 2**20
# extract_waves: waves of at least this many chunks, at most this many waves (resolution re-reads every
# known entity per wave).
MIN_WAVE_CHUNKS = 400
MAX_WAVES = 8
_SUBJECT_DEPS = ("nsubj", "nsubjpass")
# Modifiers whose entity names the noun they hang on: "the [Data Services] team", "the [HarborSight] platform".
_NAMING_DEPS = ("compound", "nmod", "poss")
# Sentence-opening pronouns read as the previous sentence's first entity of a fitting kind ("It is led by
# Rafael Moreno" after "The Data Services team builds ..."); True: a person.
_PRONOUNS = {"it": False, "they": False, "he": True, "she": True}
_RELATION_TYPE = re.compile(r"[^A-Z0-9_]+")



def auto_processes(cpus: int | None = None, available_bytes: int | None = None) -> int:
    """Extraction worker processes when none are configured: one per usable CPU, fewer when the memory available
    would not give each ``WORKER_MEMORY_BYTES``; at least one."""
    if cpus is None:
        cpus = usable_cpus()
    if available_bytes is None:
        import psutil  # deferred: only when the count is automatic

        available_bytes = int(psutil.virtual_memory().available)
    return max(1, min(cpus, available_bytes // WORKER_MEMORY_BYTES))


@dataclass
class Extraction:
    """What a batch of chunks yielded. One Relation per (source, target, type, chunk), weight = count there."""

    entities: list[Entity]
    mentions: list[Mention]
    relations: list[Relation]
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)  # entity id -> normalized names, canonical first
    forms: set[tuple[str, str]] = field(default_factory=set)  # the (type, surface form) pairs resolved
    chunk_ids: list[str] = field(default_factory=list)  # the chunks this extraction covers
    type_merges: list[tuple[str, str, str]] = field(default_factory=list)  # (name key, label, merged onto label)
    seconds: float = 0.0  # time spent producing it (for a wave: from the caller's request to the yield)

    @property
    def chunks(self) -> int:
        return len(self.chunk_ids)


@dataclass
class _Span:
    label: str
    text: str
    sentence: int
    cues: tuple[str, ...] = ()  # the type cue rules the span fires (ragloom.extraction.cues)


@dataclass
class _ChunkParse:
    chunk_id: str
    spans: list[_Span]
    triples: list[tuple[int, str, int]]  # (subject span index, relation type, object span index)


class EntityExtractor:
    """Runs ``nlp.pipe`` over chunk texts in batches and resolves what NER found into entities.

    ``n_process`` > 1 forks that many worker processes, each with the loaded pipeline, for batches of at
    least ``parallel_min_chunks`` chunks (smaller ones are not worth a fork); 0 means ``auto_processes()``
    (one per usable CPU, memory permitting). Workers send back only the entity spans and triples of each
    chunk, not spaCy Docs.
    """

    def __init__(self, nlp: Language, *, entity_types: Iterable[str] = DEFAULT_ENTITY_TYPES,
                 resolver: EntityResolver | None = None, batch_size: int = 64, n_process: int = 1,
                 parallel_min_chunks: int = 256, min_wave_chunks: int = MIN_WAVE_CHUNKS, svo: bool = True,
                 cooccurrence_window: int = 10, max_chars: int = 100_000) -> None:
        if n_process < 0:
            raise ConfigError(f"spaCy processes must be >= 0 (0 = one per CPU), got {n_process}")
        self.nlp = nlp
        self.entity_types = frozenset(entity_types)
        self.resolver = resolver or EntityResolver()
        self.batch_size = batch_size
        self.n_process = n_process or auto_processes()
        self.parallel_min_chunks = parallel_min_chunks
        self.min_wave_chunks = max(1, min_wave_chunks)
        # The parser runs either in the main pass over whole documents, or (pipelines from load_nlp) later,
        # on the sentences that name two entities only.
        self._deferred_parse = deferred_parse(nlp) if svo else []
        self.svo = svo and ("parser" in nlp.pipe_names or bool(self._deferred_parse))
        # Pairs further apart than this many entities in one sentence are not linked: a sentence listing
        # 40 names would otherwise add 780 edges that say little.
        self.cooccurrence_window = cooccurrence_window
        self.max_chars = max_chars
        self._verb_lemma = VerbLemmatizer(nlp)

    def processes_for(self, n_chunks: int) -> int:
        """Worker processes an extraction of this many chunks runs in (1: in this process)."""
        if (self.n_process <= 1 or n_chunks < self.parallel_min_chunks or "fork" not in get_all_start_methods()
                or not may_start_processes()):
            return 1
        return min(self.n_process, -(-n_chunks // self.batch_size))

    def waves_for(self, n_chunks: int) -> int:
        """How many waves ``extract_waves`` cuts this many chunks into: one unless worker processes run."""
        if self.processes_for(n_chunks) == 1:
            return 1
        return max(1, min(MAX_WAVES, n_chunks // self.min_wave_chunks))

    def extract(self, chunks: list[Chunk], *, known: Iterable[KnownEntity] = (),
                log: Log | None = None) -> Extraction:
        """Entities, mentions and relations of these chunks, resolved together; ``known`` entities keep their ids."""
        with closing(self._waves(chunks, known, 1, log)) as waves:
            return next(waves)

    def extract_waves(self, chunks: list[Chunk], *, known: Iterable[KnownEntity] = (),
                      log: Log | None = None) -> Iterator[Extraction]:
        """The extraction of ``chunks`` in consecutive waves (``waves_for``), each resolved against ``known``
        and the entities of the waves before it, as an incremental ingest would.

        The worker processes go on parsing the next waves while the caller stores the one just yielded, and
        a wave once stored stays done if a later one fails. Close the iterator (``contextlib.closing``) when
        stopping early: that stops the workers.
        """
        return self._waves(chunks, known, self.waves_for(len(chunks)), log)

    def _waves(self, chunks: list[Chunk], known: Iterable[KnownEntity], n_waves: int,
               log: Log | None) -> Iterator[Extraction]:
        started = time.perf_counter()
        size = max(1, -(-len(chunks) // n_waves))
        waves = [chunks[i: i + size] for i in range(0, len(chunks), size)] or [[]]
        batches = [[(c.chunk_id, c.text[: self.max_chars]) for c in wave[i: i + self.batch_size]]
                   for wave in waves for i in range(0, len(wave), self.batch_size)]
        processes = self.processes_for(len(chunks))
        known_by_id = {k.entity_id: k for k in known}
        report_every = max(500, len(chunks) // 10)
        done = reported = 0
        with ExitStack() as stack:
            if processes > 1:
                # fork: the workers inherit the loaded pipeline instead of unpickling one each.
                pool = ProcessPoolExecutor(processes, mp_context=get_context("fork"), initializer=_adopt,
                                           initargs=(self,))
                stack.callback(pool.shutdown, wait=True, cancel_futures=True)
                results = pool.map(_parse_in_worker, batches)
            else:
                stack.enter_context(one_blas_thread())
                results = map(self._parse_batch, batches)
            for wave in waves:
                resumed = time.perf_counter()
                parses: list[_ChunkParse] = []
                while len(parses) < len(wave):
                    parses.extend(next(results))
                    if log and done + len(parses) - reported >= report_every:
                        reported = done + len(parses)
                        log(f"extraction: {reported}/{len(chunks)} chunks ({time.perf_counter() - started:.1f}s, "
                            f"{processes} process{'es' if processes > 1 else ''})")
                done += len(wave)
                extraction = self._resolve(parses, known_by_id.values())
                extraction.seconds = time.perf_counter() - resumed
                for entity in extraction.entities:
                    previous = known_by_id.get(entity.entity_id)
                    keys = extraction.keys.get(entity.entity_id, ())
                    merged = tuple(dict.fromkeys([*previous.keys, *keys])) if previous else keys
                    known_by_id[entity.entity_id] = KnownEntity(entity.entity_id, entity.type, merged)
                yield extraction

    def _resolve(self, parses: list[_ChunkParse], known: Iterable[KnownEntity]) -> Extraction:
        surfaces: Counter[tuple[str, str]] = Counter()
        for parse in parses:
            for span in parse.spans:
                surfaces[(span.label, span.text)] += 1
        resolution = self.resolver.resolve(surfaces, known)
        mentions, relations = self._link(parses, resolution)
        return Extraction(entities=list(resolution.entities.values()), mentions=mentions, relations=relations,
                          keys=resolution.keys, forms=set(resolution.entity_of),
                          chunk_ids=[parse.chunk_id for parse in parses], type_merges=resolution.type_merges)

    def _parse_batch(self, items: list[tuple[str, str]]) -> list[_ChunkParse]:
        """Entity spans (with their sentence) and SVO triples of (chunk id, text) pairs."""
        parses: list[_ChunkParse] = []
        token_spans: list[dict[int, int]] = []
        to_parse: list[tuple[int, Span]] = []  # (index in parses, sentence naming two or more entities)
        for (chunk_id, _), doc in zip(items, self.nlp.pipe((text for _, text in items),
                                                            batch_size=self.batch_size), strict=True):
            parse, token_span, sentences = self._entities(chunk_id, doc)
            if self.svo and token_span:
                if self._deferred_parse:
                    per_sentence = Counter(span.sentence for span in parse.spans)
                    to_parse.extend((len(parses), sentences[i]) for i, n in per_sentence.items()
                                    if n > 1 or (i > 0 and sentences[i][0].lower_ in _PRONOUNS))
                else:
                    parse.triples = self._triples(doc, token_span, spans=parse.spans)
            parses.append(parse)
            token_spans.append(token_span)
        if to_parse:
            docs: Iterable[Doc] = (_tokens_only(sentence) for _, sentence in to_parse)
            for _, component in self._deferred_parse:
                docs = component.pipe(docs, batch_size=self.batch_size)
            for (i, sentence), doc in zip(to_parse, docs, strict=True):
                parses[i].triples.extend(self._triples(doc, token_spans[i], offset=sentence.start,
                                                       spans=parses[i].spans))
        return parses

    def _entities(self, chunk_id: str, doc: Doc) -> tuple[_ChunkParse, dict[int, int], list[Span]]:
        spans: list[_Span] = []
        token_span: dict[int, int] = {}  # token index -> span index, for SVO
        sentences = list(doc.sents) if doc.has_annotation("SENT_START") else [doc[:]]
        sentence = 0
        words = [t.text for t in doc]
        mail = Mail.of(doc.text) if "@" in doc.text else NO_MAIL
        for ent in doc.ents:
            if ent.label_ not in self.entity_types or not ent.text.strip():
                continue
            while sentence + 1 < len(sentences) and sentences[sentence + 1].start <= ent.start:
                sentence += 1
            for t in range(ent.start, ent.end):
                token_span[t] = len(spans)
            spans.append(_Span(ent.label_, ent.text, sentence, span_cues(words, ent.start, ent.end, mail)))
        return _ChunkParse(chunk_id, spans, []), token_span, sentences

    def _triples(self, doc: Doc, token_span: dict[int, int], offset: int = 0,
                 spans: list[_Span] | None = None) -> list[tuple[int, str, int]]:
        """(subject, VERB[_PREP], object) where both ends are entities: dobj, passive agent, and prepositional
        objects of the verb, with their conjuncts ("founded X and Y"); a copula's noun with a preposition
        ("X is the founder of Y": FOUNDER_OF), an apposition ("X, the founder of Y"), and a reduced passive
        ("the team, led by X": X LEAD team). A noun counts as the entity that names it ("the Data Services
        team"), and a sentence-opening pronoun as the previous sentence's first entity of its kind. ``doc`` may
        be one sentence of the chunk, starting at token ``offset``."""
        def entity(token: Token) -> int | None:
            found = token_span.get(token.i + offset)
            if found is None:
                found = next((token_span[c.i + offset] for c in token.children
                              if c.dep_ in _NAMING_DEPS and c.i + offset in token_span), None)
            if found is None and spans is not None and token.lower_ in _PRONOUNS and token.i == token.sent.start:
                found = _antecedent(spans, token_span, token.i + offset, _PRONOUNS[token.lower_])
            return found

        def prep_objects(head: Token) -> Iterator[tuple[str, Token]]:
            for prep in head.children:
                if prep.dep_ == "prep":
                    for p in prep.children:
                        if p.dep_ == "pobj":
                            yield prep.text, p

        triples: list[tuple[int, str, int]] = []

        def add(subject: int | None, rel: str, objects: Iterable[Token], reverse: bool = False) -> None:
            rel_type = _RELATION_TYPE.sub("_", rel.upper()).strip("_")
            if subject is None or not rel_type or rel_type == COOCCURS:
                return
            for o in objects:
                b = entity(o)
                if b is not None and b != subject:
                    triples.append((b, rel_type, subject) if reverse else (subject, rel_type, b))

        for token in doc:
            if token.dep_ == "appos":  # "Maja Eriksen, the founder of Nordlys Optics"
                noun = token.lemma_ or token.lower_
                for prep, obj in prep_objects(token):
                    add(entity(token.head), f"{noun}_{prep}", _with_conjuncts(obj))
                continue
            if token.dep_ == "acl" and token.head.i != token.i:  # "the Optics team, led by Maja Eriksen"
                lemma = token.lemma_ or self._verb_lemma(token.text)
                for child in token.children:
                    if child.dep_ == "agent":
                        add(entity(token.head), lemma, [g for p in child.children if p.dep_ == "pobj"
                                                        for g in _with_conjuncts(p)], reverse=True)
                continue
            if token.dep_ not in _SUBJECT_DEPS:
                continue
            verb = token.head
            if verb.i == token.i:
                continue
            first = entity(token)
            if first is None:
                continue
            subjects = [first, *(e for c in token.conjuncts if (e := entity(c)) is not None)]
            # "X was developed by Y and is now owned by Z": the second verb shares the subject
            shared = [c for c in verb.conjuncts if not any(d.dep_ in _SUBJECT_DEPS for d in c.children)]
            for v in (verb, *shared):
                self._verb_triples(v, subjects, token.dep_ == "nsubjpass" or v is not verb, add, prep_objects)
        return triples

    def _verb_triples(self, verb: Token, subjects: list[int], passive: bool,
                      add: Callable[..., None], prep_objects: Callable[[Token], Iterator[tuple[str, Token]]]) -> None:
        """The triples of one verb whose subject entities are ``subjects``."""
        lemma = verb.lemma_ or self._verb_lemma(verb.text)
        for child in verb.children:
            if child.dep_ == "dobj":
                found = [(lemma, _with_conjuncts(child), False)]
            elif child.dep_ == "agent":  # "X was founded by Y": Y founded X
                found = [(lemma, [g for p in child.children if p.dep_ == "pobj" for g in _with_conjuncts(p)],
                          passive)]
            elif child.dep_ == "prep":
                found = [(f"{lemma}_{child.text}", [g for p in child.children if p.dep_ == "pobj"
                                                    for g in _with_conjuncts(p)], False)]
            elif child.dep_ == "attr":  # "X is the founder of Y"
                noun = child.lemma_ or child.lower_
                found = [(f"{noun}_{prep}", _with_conjuncts(obj), False) for prep, obj in prep_objects(child)]
            else:
                continue
            for rel, objects, reverse in found:
                for s in subjects:
                    add(s, rel, objects, reverse)

    def _link(self, parses: list[_ChunkParse], resolution: Resolution) -> tuple[list[Mention], list[Relation]]:
        mentions: list[Mention] = []
        relations: list[Relation] = []
        for parse in parses:
            ids = [resolution.entity_of.get((s.label, s.text)) for s in parse.spans]
            counts = Counter(eid for eid in ids if eid is not None)
            labels: dict[str, Counter[str]] = defaultdict(Counter)  # entity id -> NER label -> spans
            cues: dict[str, Counter[str]] = defaultdict(Counter)  # entity id -> type cue rule -> spans
            for span, eid in zip(parse.spans, ids, strict=True):
                if eid is not None:
                    labels[eid][span.label] += 1
                    cues[eid].update(span.cues)
            mentions.extend(Mention(parse.chunk_id, eid, n, tuple(sorted(labels[eid].items())),
                                    tuple(sorted(cues[eid].items())))
                            for eid, n in sorted(counts.items()))
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


def extractor_for(settings: Settings, **options: Any) -> EntityExtractor:
    """The configured extractor: RAGLOOM_SPACY_MODEL loaded with RAGLOOM_SPACY_GEMM, RAGLOOM_SPACY_PROCESSES
    workers; ``options`` go to EntityExtractor."""
    options.setdefault("n_process", settings.spacy_processes)
    return EntityExtractor(load_nlp(settings.spacy_model, gemm=settings.spacy_gemm), **options)


# The extractor a forked worker process inherited (set by the pool's initializer).
_worker_extractor: EntityExtractor | None = None


def _adopt(extractor: EntityExtractor) -> None:
    global _worker_extractor
    _worker_extractor = extractor
    worker_blas_thread()


def _parse_in_worker(items: list[tuple[str, str]]) -> list[_ChunkParse]:
    assert _worker_extractor is not None, "worker process started without an extractor"
    return _worker_extractor._parse_batch(items)


def _tokens_only(sentence: Span) -> Doc:
    """A new Doc with the sentence's tokens and nothing else (cheaper than ``Span.as_doc``, which also
    copies annotations and computes a vector)."""
    from spacy.tokens import Doc

    return Doc(sentence.doc.vocab, words=[t.text for t in sentence],
               spaces=[bool(t.whitespace_) for t in sentence])


def _antecedent(spans: list[_Span], token_span: dict[int, int], token: int, person: bool) -> int | None:
    """For a sentence-opening pronoun at chunk token ``token``: the first entity (a person or not, as asked) of
    the nearest earlier sentence naming any entity, if that sentence names one of the kind."""
    before = sorted({i for t, i in token_span.items() if t < token})
    if not before:
        return None
    nearest = spans[before[-1]].sentence
    return next((i for i in before if spans[i].sentence == nearest and (spans[i].label == "PERSON") == person), None)


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
