"""Entity resolution: normalized names, and surface forms merged into canonical entities.

One name seen under several NER labels ("Bergen" as GPE and ORG) is one entity, typed by its most frequent
label, unless the mentions are evidence of two things (see ``two_things``). A batch resolves onto the types
already stored; the stored type itself follows the vote of every mention in the graph (``voted_type``), where
type cues (ragloom.extraction.cues) outrank the NER labels.

Pure Python (no spaCy), so the stores and tests can use it without loading a pipeline.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from ragloom.extraction.cues import cued_type, singular
from ragloom.types import Entity, sha256_hex

# Plural surface forms are folded into the singular for these types only: "Americans" is the people
# "American" names, but a plural-looking ORG or GPE is usually a different name ("Times" vs "Time",
# "Athens"). Near-duplicates that differ by a plural "s" still merge by evidence (see _compatible).
DEFAULT_PLURAL_TYPES = ("NORP",)
DEFAULT_FUZZY_THRESHOLD = 90.0  # rapidfuzz ratio (0..100) between two normalized names
DEFAULT_MIN_TOKEN_LENGTH = 5  # words shorter than this never merge fuzzily ("Dale"/"Dave", "Mets"/"Nets")

_DETERMINER = re.compile(r"^(?:the|a|an)\s+")
_POSSESSIVE = re.compile(r"(?:'s|')$")
_ABBREV_DOT = re.compile(r"(?<=\w)\.")  # "u.s." -> "us", "st. louis" -> "st louis"
_NOT_NAME = re.compile(r"[^\w&+#]+")  # hyphens, commas, brackets, quotes -> a space
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u00b4": "'"})
_EDGE_PUNCTUATION = " \t\"'`,;:-_"
_ROMAN = re.compile(r"^[ivxlcdm]+$")
# A well-formed numeral of two letters or more: "vi", "xiv", not "civil" or an initial ("George C. Marshall").
_ROMAN_NUMERAL = re.compile(r"^(?=[ivxlcdm]{2,}$)m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})$")
_ACRONYM = re.compile(r"(?:[A-Z]\.?){2,6}")  # "U.S.", "USA", "BJP": a surface written as initials
_NOT_INITIAL = frozenset({"of", "the", "and", "for", "&", "de", "du", "la", "le", "von", "van", "der", "in", "on",
                          "at", "to", "a", "an"})
# One name under several NER labels is one thing: spaCy's small models give the same thing different labels
# ("Bergen" GPE/ORG, "DeepCurrent API" PRODUCT/ORG, "Canada" GPE 59x/PERSON 1x and "Rotterdam" GPE 5x/PERSON 5x
# in the sample corpus). Evidence of two things is a name read as two *kinds* (a person, a work, a language,
# or anything else), each reading strong: at least SPLIT_MIN_MENTIONS mentions and SPLIT_MIN_SHARE of the
# name's mentions ("Jordan" the country and the player in a large corpus). Label noise stays far below that.
DISTINCT_KINDS = {"PERSON": "person", "WORK_OF_ART": "work", "LANGUAGE": "language"}
SPLIT_MIN_MENTIONS = 10
SPLIT_MIN_SHARE = 0.4


def type_kind(entity_type: str) -> str:
    """The kind of thing an NER label names; labels of one kind are always one thing."""
    return DISTINCT_KINDS.get(entity_type, "thing")


# Words that make two otherwise equal names different places or things: never merge across them.
_CONTRASTIVE = frozenset({
    "north", "south", "east", "west", "northern", "southern", "eastern", "western", "upper", "lower",
    "northeast", "northwest", "southeast", "southwest", "central", "new", "old", "great", "little",
    "junior", "senior", "jr", "sr", "first", "second", "third", "fourth", "fifth",
})


def _fold_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalize_name(name: str, entity_type: str = "", *, plural_types: Iterable[str] = DEFAULT_PLURAL_TYPES) -> str:
    """The key two surface forms of one name share: case, accents, whitespace, leading determiners,
    possessives, abbreviation dots and hyphenation folded; plurals folded for ``plural_types``.

    ``"The United States'"`` and ``"United States"`` -> ``"united states"``; ``"U.S."`` -> ``"us"``;
    ``"Kim Jong - il"`` -> ``"kim jong il"``; ``"Americans"`` (NORP) -> ``"american"``.
    """
    text = unicodedata.normalize("NFKC", name).translate(_APOSTROPHES)
    text = _fold_accents(text).casefold()
    text = " ".join(text.split())
    text = text.strip(_EDGE_PUNCTUATION + "!?()[]{}<>")
    text = _DETERMINER.sub("", text)
    text = text.rstrip(" .,;:!?-")
    text = _POSSESSIVE.sub("", text)
    text = _ABBREV_DOT.sub("", text)
    text = text.replace("'", "")  # "people's" -> "peoples", "o'brien" -> "obrien"
    text = " ".join(_NOT_NAME.sub(" ", text).split())
    text = text.replace("_", " ").strip()
    text = " ".join(text.split())
    if entity_type in tuple(plural_types) and text:
        head, _, last = text.rpartition(" ")
        text = f"{head} {singular(last)}" if head else singular(last)
    return text


def clean_surface(surface: str) -> str:
    """A surface form fit to show: whitespace collapsed, leading determiner and trailing possessive removed."""
    text = " ".join(unicodedata.normalize("NFKC", surface).translate(_APOSTROPHES).split())
    text = text.strip(_EDGE_PUNCTUATION)
    text = re.sub(r"^(?:the|The|THE|a|A|an|An)\s+", "", text)
    text = re.sub(r"'s$", "", text).strip(_EDGE_PUNCTUATION)
    if text.count("(") != text.count(")"):  # "Society of Jesus (" -> "Society of Jesus"
        text = text.replace("(", " ").replace(")", " ")
    return " ".join(text.split()).strip(_EDGE_PUNCTUATION)


def initials(key: str) -> str:
    """The acronym a normalized multi-word name abbreviates to ("peoples republic of china" -> "prc"); ''
    for single words."""
    words = [w for w in key.split() if w not in _NOT_INITIAL]
    return "".join(w[0] for w in words) if len(words) >= 2 else ""


def contrasting_names(a: str, b: str) -> bool:
    """Whether two names differ in a word that makes them different things however alike they read: a
    number or ordinal ("35th"/"36th Chess Olympiad"), a roman numeral ("Henry III"/"Henry VIII") or a
    contrastive word ("Southern"/"Northern Netherlands"). Embeddings barely see these words."""
    ta, tb = set(normalize_name(a).split()), set(normalize_name(b).split())
    return any(any(ch.isdigit() for ch in word) or _ROMAN_NUMERAL.match(word) or word in _CONTRASTIVE
               for word in ta ^ tb)


def make_entity_id(entity_type: str, key: str) -> str:
    """Deterministic entity id from (type, normalized canonical name): re-runs and other batches agree."""
    return sha256_hex(f"entity\x1f{entity_type}\x1f{key}")[:32]


@dataclass(frozen=True)
class KnownEntity:
    """An entity already in the graph: new surface forms resolve onto it before any new entity is made."""

    entity_id: str
    type: str
    keys: tuple[str, ...]  # normalized name first, then normalized aliases


@dataclass
class Resolution:
    """Which entity each (type, surface form) became, and the entities made or extended by this batch."""

    entity_of: dict[tuple[str, str], str]
    entities: dict[str, Entity]
    keys: dict[str, tuple[str, ...]]  # entity id -> normalized names: the canonical one first, then merged ones
    surface_forms: int  # distinct (type, surface form) pairs resolved
    merged_forms: int = 0  # surface forms that joined an entity another form started
    fuzzy_merges: list[tuple[str, str, str]] = field(default_factory=list)  # (type, key, onto key)
    acronym_merges: list[tuple[str, str, str]] = field(default_factory=list)  # (type, key, onto key)
    type_merges: list[tuple[str, str, str]] = field(default_factory=list)  # (key, type, onto type)

    @property
    def merge_ratio(self) -> float:
        """Share of distinct surface forms folded into another form's entity."""
        return self.merged_forms / self.surface_forms if self.surface_forms else 0.0


def _compatible(a: str, b: str, min_token_length: int, entity_type: str = "") -> bool:
    """Whether two normalized names of one type that fuzzy matching found close may be the same entity.

    The ratio alone merges "henry iii"/"henry viii", "east germany"/"west germany", "prussians"/"russians",
    "turin"/"turpin" and "david jason"/"david jackson" (all real MuSiQue pairs), so besides the threshold:
    the names differ in exactly one word, a spelling variant of the other (same first letter, long enough,
    no digits, roman numerals or contrastive words, not a suffixed derivation like "gujarat"/"gujarati")
    with at least one word shared (two for people); or they differ by a plural "s" (not for people).
    """
    if a.replace(" ", "") == b.replace(" ", ""):
        return True  # "south east asia" / "southeast asia"
    ta, tb = a.split(), b.split()
    if len(ta) != len(tb):
        return False
    diff = [(x, y) for x, y in zip(ta, tb, strict=True) if x != y]
    if len(diff) != 1:
        return False
    x, y = diff[0]
    if min(len(x), len(y)) < min_token_length or x[0] != y[0]:
        return False
    for word in (x, y):
        if any(ch.isdigit() for ch in word) or _ROMAN.match(word) or word in _CONTRASTIVE:
            return False
    short, long_ = sorted((x, y), key=len)
    if long_.startswith(short):
        return long_[len(short):] in ("s", "es") and entity_type != "PERSON"  # "united state(s)"
    return len(ta) >= (3 if entity_type == "PERSON" else 2)


def canonical_types(counts: Mapping[tuple[str, str], int], known: Iterable[tuple[str, str]] = ()) -> dict[
        tuple[str, str], str]:
    """The label each (label, normalized name) of a batch merges onto, given mention counts per pair and the
    (label, name) pairs of known entities. A name's labels merge onto the label of a known entity of that
    name, else onto its most frequent label (ties: alphabetical); with evidence of two things (``two_things``)
    each kind merges on its own. Returns only the pairs that move; a known entity's pair never moves."""
    labels: dict[str, dict[str, int]] = defaultdict(dict)  # name -> label -> mentions
    for (etype, key), n in counts.items():
        labels[key][etype] = n
    known = set(known)
    stored: dict[str, list[str]] = defaultdict(list)
    for etype, key in known:
        if key in labels:
            stored[key].append(etype)
    moves: dict[tuple[str, str], str] = {}
    for key, by_label in labels.items():
        kinds: Counter[str] = Counter()
        for etype, n in by_label.items():
            kinds[type_kind(etype)] += n
        split = two_things(kinds)
        parts: dict[str, list[str]] = defaultdict(list)
        for etype in by_label:
            parts[type_kind(etype) if split else ""].append(etype)
        for part, etypes in parts.items():
            targets = sorted(t for t in stored[key] if not split or type_kind(t) == part)
            if len(etypes) < 2 and not targets:
                continue
            target = targets[0] if targets else min(etypes, key=lambda t: (-by_label[t], t))
            for etype in etypes:
                if etype != target and (etype, key) not in known:
                    moves[(etype, key)] = target
    return moves


def voted_type(votes: Mapping[str, int], current: str, cues: Mapping[str, int] | None = None) -> str:
    """An entity's type from the NER labels of all its mentions in the corpus (label -> spans): the label with
    the most, and ``current`` while it is among the most (a tie never moves a type, so a type changes only
    when the evidence does). With no votes (mentions written before labels were kept), ``current``.

    Type cues over the same mentions (``cues``: rule -> spans, see ragloom.extraction.cues) outrank the labels:
    where one kind of thing leads them, it is the type (``cued_type``)."""
    cued = cued_type(cues or {}, votes, current)
    if cued is not None:
        return cued
    top = max(votes.values(), default=0)
    if top <= 0 or votes.get(current, 0) == top:
        return current
    return min(label for label, n in votes.items() if n == top)


def two_things(kind_mentions: Mapping[str, int]) -> bool:
    """Whether one name's mentions per kind are evidence of two things: the two strongest kinds each have
    at least SPLIT_MIN_MENTIONS mentions and SPLIT_MIN_SHARE of all."""
    ranked = sorted(kind_mentions.values(), reverse=True)
    if len(ranked) < 2:
        return False
    return ranked[1] >= SPLIT_MIN_MENTIONS and ranked[1] >= SPLIT_MIN_SHARE * sum(ranked)


def _add_head(heads: dict[str, tuple[list[str], list[str]]], key: str, entity_id: str) -> None:
    keys, ids = heads[key[0]]
    keys.append(key)
    ids.append(entity_id)


class EntityResolver:
    """Merges surface forms into canonical entities: one name under several NER labels becomes one entity
    of the most frequent label (``canonical_types``); then exact on the normalized name, then fuzzy within
    a label. Entities already in the graph (``known``) win, so their ids and types stay stable.
    """

    def __init__(self, fuzzy_threshold: float = DEFAULT_FUZZY_THRESHOLD,
                 min_token_length: int = DEFAULT_MIN_TOKEN_LENGTH,
                 plural_types: Iterable[str] = DEFAULT_PLURAL_TYPES) -> None:
        if not 0 < fuzzy_threshold <= 100:
            raise ValueError(f"fuzzy_threshold must be in (0, 100], got {fuzzy_threshold}")
        self.fuzzy_threshold = float(fuzzy_threshold)
        self.min_token_length = min_token_length
        self.plural_types = tuple(plural_types)

    def normalize(self, name: str, entity_type: str = "") -> str:
        return normalize_name(name, entity_type, plural_types=self.plural_types)

    def resolve(self, surfaces: Mapping[tuple[str, str], int], known: Iterable[KnownEntity] = ()) -> Resolution:
        """``surfaces`` counts each (type, surface form); the most frequent form names a new entity."""
        keyed: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)  # (type, key) -> surface counts
        for (etype, surface), count in surfaces.items():
            key = self.normalize(surface, etype)
            if key:
                keyed[(etype, key)][surface] += count
        known_by_type: dict[str, dict[str, str]] = defaultdict(dict)  # type -> key -> entity id
        canonical: dict[str, str] = {}  # known entity id -> its normalized name
        for entity in known:
            if not entity.keys:
                continue
            canonical[entity.entity_id] = entity.keys[0]
            for key in entity.keys:
                known_by_type[entity.type].setdefault(key, entity.entity_id)

        result = Resolution(entity_of={}, entities={}, keys={}, surface_forms=0)
        onto = canonical_types({tk: sum(c.values()) for tk, c in keyed.items()},
                               {(t, k) for t, keys in known_by_type.items() for k in keys})
        by_type: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
        labels: dict[tuple[str, str], set[str]] = defaultdict(set)  # (type, surface) -> labels NER gave it
        for (etype, key), counts in keyed.items():
            target = onto.get((etype, key), etype)
            if target != etype:
                result.type_merges.append((key, etype, target))
            by_type[target][key].update(counts)
            for surface in counts:
                labels[(target, surface)].add(etype)
        for etype in sorted(by_type):
            self._resolve_type(etype, by_type[etype], known_by_type.get(etype, {}), canonical, result)
        # Mentions look entities up by the label NER gave the span.
        result.entity_of = {(label, surface): eid for (etype, surface), eid in result.entity_of.items()
                            for label in labels[(etype, surface)]}
        result.type_merges.sort()
        return result

    def _resolve_type(self, etype: str, groups: dict[str, Counter[str]], known: dict[str, str],
                      canonical: dict[str, str], result: Resolution) -> None:
        # Keys new forms may merge onto, with their entity ids, by first character: names _compatible
        # accepts always share it, so fuzzy matching looks at one block instead of every name of the type.
        heads: dict[str, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
        for k, eid in known.items():
            if k:
                _add_head(heads, k, eid)
        members: dict[str, Counter[str]] = defaultdict(Counter)  # entity id -> surface counts
        member_keys: dict[str, list[str]] = defaultdict(list)  # entity id -> normalized names merged into it
        head_key: dict[str, str] = {eid: canonical[eid] for eid in set(known.values())}
        # People's initials collide with short names ("Al", "Ed"): acronyms resolve for other types only.
        acronym_of = self._acronym_targets(etype, groups, known) if etype != "PERSON" else {}
        entity_of_key: dict[str, str] = {}
        # Most frequent names first: they become the canonical heads rarer variants merge onto. Acronyms
        # come last, so the name they abbreviate already has its entity.
        for key in sorted(groups, key=lambda k: (k in acronym_of, -sum(groups[k].values()), k)):
            surfaces = groups[key]
            eid = known.get(key)
            if eid is None and key in acronym_of:
                target = acronym_of[key]
                eid = known.get(target) or entity_of_key.get(target)
                if eid is not None:
                    result.acronym_merges.append((etype, key, target))
            if eid is None:
                eid = self._fuzzy_match(etype, key, *heads[key[0]])
                if eid is not None:
                    result.fuzzy_merges.append((etype, key, head_key[eid]))
            if eid is None:
                eid = make_entity_id(etype, key)
                if eid not in head_key:
                    head_key[eid] = key
                    _add_head(heads, key, eid)
            entity_of_key[key] = eid
            members[eid].update(surfaces)
            member_keys[eid].append(key)
            for surface in surfaces:
                result.entity_of[(etype, surface)] = eid
        for eid, counts in members.items():
            result.surface_forms += len(counts)
            shown: Counter[str] = Counter()
            for surface, count in counts.items():
                cleaned = clean_surface(surface) or surface
                shown[cleaned] += count
            ranked = sorted(shown, key=lambda s: (-shown[s], len(s), s))
            name = ranked[0]
            result.entities[eid] = Entity(entity_id=eid, name=name, type=etype, aliases=tuple(sorted(ranked[1:])))
            result.keys[eid] = tuple(dict.fromkeys([head_key[eid], *member_keys[eid]]))
            result.merged_forms += len(counts) - 1

    def _acronym_targets(self, etype: str, groups: dict[str, Counter[str]], known: dict[str, str]) -> dict[str, str]:
        """Keys written as initials ("U.S.", "BJP") -> the one name of this type they abbreviate, and names
        -> a known entity whose key is their initials. Ambiguous initials (two different names) merge nothing."""
        expansions: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for key, surfaces in groups.items():
            if initials(key):
                expansions[initials(key)].append((sum(surfaces.values()), key))
        for key in known:
            if initials(key):
                expansions[initials(key)].append((float("inf"), key))

        def unambiguous(options: list[tuple[float, str]]) -> str | None:
            options = sorted(options, key=lambda o: (-o[0], o[1]))
            top = options[0][1]
            for _, other in options[1:]:
                same_known = other in known and known[other] == known.get(top)
                if not same_known and not _compatible(top, other, self.min_token_length, etype):
                    return None
            return top

        targets: dict[str, str] = {}
        for key, surfaces in groups.items():
            if key in known or " " in key or key not in expansions:
                continue
            if any(_ACRONYM.fullmatch(clean_surface(s)) for s in surfaces):
                top = unambiguous(expansions[key])
                if top is not None and top != key:
                    targets[key] = top
        for key in groups:
            abbreviation = initials(key)
            if key in known or abbreviation not in known or len(abbreviation) > 6:
                continue
            if unambiguous([o for o in expansions[abbreviation] if o[1] not in known]) == key:
                targets[key] = abbreviation
        return targets

    def _fuzzy_match(self, etype: str, key: str, heads: list[str], head_ids: list[str]) -> str | None:
        if not heads:
            return None
        candidates = process.extract(key, heads, scorer=fuzz.ratio, score_cutoff=self.fuzzy_threshold, limit=5)
        for head, _score, index in candidates:
            if _compatible(key, head, self.min_token_length, etype):
                return head_ids[index]
        return None
