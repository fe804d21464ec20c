"""Type cues: words around or inside a name that say what kind of thing it is, whatever the NER model says.

spaCy's small English model labels some names wrongly in most of their mentions (a person called an
organisation in seven mentions of seven), so no vote over its labels corrects them. A cue is evidence of
another kind: a construction of English (or of an e-mail address) that names one kind of thing, read from
the tokens of the chunk, with no weights and no gazetteer. The rules were chosen for how the language works,
before any was scored, and are kept few:

* a person: an honorific before the name ("Ms Almeida", "Dr. Ruth Smith"); an e-mail address in the chunk whose
  local part spells the name ("sofia.almeida@...").
* an organisation: a legal-form designator as the name's last word or right after it ("Corvane Systems AS",
  "Acme Ltd."); an institution noun as the name's last word ("Bergen Marine Institute"), or one of a few
  followed by "of" inside it ("University of Oslo"); the name spelling an e-mail domain in the chunk
  ("@corvane.com" for "Corvane").
* a place: "born/based/located/headquartered/situated in|at" before the name, "city/town/village of" before
  it, "-based" after it ("Bergen-based").

Added on 2026-11-28 (``musique_heldout2`` in tests/data/entity_types.json was labelled before; the titles and
lists came last, after its score had been read once):

* a person: the name described by an occupation or role noun, in apposition or with "is/was a" ("Amara
  Lindqvist, team lead", "Alexis Lecaye is a French author"), or titled by one before it or before a list of
  names holding it ("the composer Ennio Morricone", "the team leads (Amara Lindqvist, Rafael Moreno and ...)");
  "(born" right after it, as biographies open; a kinship noun and "of" before it ("daughter of Jane Doe", not
  "son of China's leader"), or "married"; a work's maker before it ("directed by", "written by", "composed by",
  "portrayed by", "voiced by", "painted by", "illustrated by", "narrated by"). Not "played by" or "performed by"
  (bands and orchestras play), nor "produced by" or "led by" (studios produce, countries lead coalitions).
* an organisation: a noun only an organisation has after the name's possessive, with at most one word between
  ("Corvane's 140 employees", "Apple's headquarters"), or "employee(s)" right after the name ("every Corvane
  employee"; not "headquarters": "the Bergen headquarters" is in Bergen).

"who" after a name was a rule too and is not: on held-out MuSiQue text it turned 10 of the 12 entities it
retyped wrongly into people, because English says "who" of groups, teams and nations ("the Union, who are members",
"a player from Brazil, who won") and a restrictive "who" may belong to the noun before the name ("an outfielder in
Major League Baseball who played for ..."); see docs/experiments/2026-11-26-entity-types-evidence.md.

An entity's cues are tallied over all its mentions, like its NER labels, and the kind with the most cue spans
decides its type (``cued_type``); labels decide only where no cue does. Matching is case-sensitive where case is
the evidence (honorifics, designators, institution nouns).

Pure Python (no spaCy): the extractor hands in token texts.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

PERSON, ORG, PLACE = "PERSON", "ORG", "place"
PLACE_LABELS = ("GPE", "LOC")  # the NER labels a place cue may give; GPE unless the labels say LOC

# rule name -> the kind of thing it is evidence of
CUE_KINDS = {
    "honorific": PERSON,
    "email_name": PERSON,
    "legal_form": ORG,
    "institution": ORG,
    "email_domain": ORG,
    "place_phrase": PLACE,
    "role": PERSON,
    "born": PERSON,
    "kinship": PERSON,
    "maker": PERSON,
    "org_noun": ORG,
}

HONORIFICS = frozenset({"Mr", "Mrs", "Ms", "Mx", "Dr", "Prof", "Professor", "Sir", "Dame"})
LEGAL_FORMS = frozenset({"Inc", "Ltd", "LLC", "LLP", "PLC", "Plc", "plc", "Corp", "GmbH", "AG", "AS", "ASA", "Oy",
                         "NV", "BV", "Pty", "Pte", "SpA"})
INSTITUTIONS = frozenset({"University", "College", "Institute", "Academy", "Foundation", "Association", "Society",
                          "Authority", "Administration", "Agency", "Ministry", "Commission", "Committee", "Council",
                          "Consortium", "Bank", "Company", "Corporation", "Group", "Trust"})
# ... which also head a name when followed by "of" ("University of Oslo", "Bank of England")
INSTITUTIONS_OF = frozenset({"University", "College", "Institute", "Academy", "Bank", "Ministry", "Society"})
PLACE_VERBS = frozenset({"born", "based", "located", "headquartered", "situated"})
SETTLEMENTS = frozenset({"city", "town", "village"})
POSSESSIVES = ("'s", "\u2019s")  # the possessive as spaCy tokenizes it
# Nouns for what a person does or is, as a description of a name ("X, an American actor"; "X is a writer").
ROLES = frozenset({
    "actor", "actress", "singer", "songwriter", "writer", "author", "novelist", "poet", "playwright", "screenwriter",
    "journalist", "editor", "critic", "politician", "diplomat", "lawyer", "judge", "footballer", "cricketer",
    "athlete", "coach", "composer", "musician", "guitarist", "drummer", "pianist", "violinist", "rapper",
    "comedian", "dancer", "painter", "sculptor", "photographer", "filmmaker", "architect", "engineer", "scientist",
    "researcher", "physicist", "chemist", "biologist", "mathematician", "economist", "historian", "philosopher",
    "professor", "teacher", "businessman", "businesswoman", "entrepreneur", "founder", "inventor", "explorer",
    "activist", "priest", "bishop", "monk", "soldier", "officer", "lead", "manager", "chairman", "chairwoman",
    "ceo", "cto", "cfo", "presenter", "broadcaster", "designer", "illustrator", "cartoonist", "boxer", "wrestler",
})
# Words that may continue a description after its role noun without making another noun its head
# ("an actor and singer", "a writer from Lyon", "a poet best known for").
_AFTER_ROLE = frozenset({"and", "or", "of", "from", "in", "at", "for", "with", "who", "whose", "best", "known", "by",
                         "on", "to", "since", "until", "during", "between", "turned"})
KINSHIP = frozenset({"son", "daughter", "wife", "husband", "widow", "widower", "brother", "sister", "mother",
                     "father", "grandson", "granddaughter", "grandfather", "grandmother", "nephew", "niece",
                     "cousin", "uncle", "aunt"})
MAKERS = frozenset({"directed", "written", "co-written", "composed", "portrayed", "voiced", "painted",
                    "illustrated", "narrated", "authored"})
# Nouns only an organisation has ("Corvane employees", "Apple's headquarters")
ORG_NOUNS = frozenset({"employee", "employees", "workforce", "headquarters", "subsidiary", "subsidiaries",
                       "shareholders", "shareholder", "stockholders", "ceo", "cfo", "cto"})

_EMAIL = re.compile(r"([A-Za-z0-9][A-Za-z0-9._%+\-]*)@((?:[A-Za-z0-9\-]+\.)+[A-Za-z]{2,})")
_MAIL_HOSTS = frozenset({"www", "mail", "email", "smtp", "co", "com", "ac", "org", "net", "gov", "edu"})
_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> tuple[str, ...]:
    decomposed = unicodedata.normalize("NFKD", text)
    folded = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    return tuple(_WORD.findall(folded))


def singular(word: str) -> str:
    """The singular of an English plural word, by suffix rules; words that are not plural come back unchanged."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "ys")):
        return word[:-1]
    return word


@dataclass(frozen=True)
class Mail:
    """What the e-mail addresses of one chunk spell: the words of each local part and the domains' names."""

    local_parts: frozenset[tuple[str, ...]]
    domains: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Mail:
        local_parts, domains = set(), set()
        for local, domain in _EMAIL.findall(text):
            local_parts.add(_words(local))
            labels = domain.casefold().split(".")[:-1]  # the top-level domain names nothing
            domains.update(label for label in labels if label not in _MAIL_HOSTS)
        return cls(frozenset(local_parts), frozenset(domains))


NO_MAIL = Mail(frozenset(), frozenset())


def span_cues(words: Sequence[str], start: int, end: int, mail: Mail = NO_MAIL) -> tuple[str, ...]:
    """The cue rules (``CUE_KINDS``) the name at tokens ``words[start:end]`` of a chunk fires, in rule order."""
    if not 0 <= start < end <= len(words):
        raise ValueError(f"span [{start}, {end}) outside the {len(words)} tokens")
    inside = [w.rstrip(".") for w in words[start:end]]
    # the words around the name, without whitespace tokens: a line break inside "led by\nAmara" or "the security\n
    # lead" is a token of its own to spaCy, and no construction ends at it
    before_words = [w for w in words[max(0, start - 6): start] if w.strip()][-3:]
    following = [w for w in words[end: end + 12] if w.strip()][:7]
    previous = before_words[-1] if before_words else ""
    if previous == "." and len(before_words) > 1:  # "Dr ." tokenized apart: the word before the dot
        previous = before_words[-2]
    previous = previous.rstrip(".")
    after = following[:2]
    fired: list[str] = []
    if previous in HONORIFICS or (len(inside) > 1 and inside[0] in HONORIFICS):
        fired.append("honorific")
    name = _words(" ".join(words[start:end]))
    if len(name) > 1 and name in mail.local_parts:
        fired.append("email_name")
    if inside[-1] in LEGAL_FORMS or (after and after[0].rstrip(".") in LEGAL_FORMS):
        fired.append("legal_form")
    if inside[-1] in INSTITUTIONS or any(w in INSTITUTIONS_OF and nxt == "of"
                                         for w, nxt in zip(inside, inside[1:], strict=False)):
        fired.append("institution")
    if len(name) == 1 and name[0] in mail.domains:
        fired.append("email_domain")
    raw_before = [w.lower() for w in before_words[-2:]]
    if (len(raw_before) == 2 and ((raw_before[0] in PLACE_VERBS and raw_before[1] in ("in", "at"))
                                  or (raw_before[0] in SETTLEMENTS and raw_before[1] == "of"))) \
            or (after[:2] == ["-", "based"]):
        fired.append("place_phrase")
    if _described_by_role(following) or _titled_by_role(words, start, following):
        fired.append("role")
    if [w.lower() for w in following[:2]] == ["(", "born"]:
        fired.append("born")
    possessor = bool(following) and following[0].lower() in POSSESSIVES  # "son of China's leader"
    if not possessor and ((len(raw_before) == 2 and raw_before[0] in KINSHIP and raw_before[1] == "of")
                          or (raw_before and raw_before[-1] == "married")):
        fired.append("kinship")
    if not possessor and len(raw_before) == 2 and raw_before[0] in MAKERS and raw_before[1] == "by":
        fired.append("maker")
    if _org_noun_follows(following):
        fired.append("org_noun")
    return tuple(fired)


def _described_by_role(following: Sequence[str]) -> bool:
    """Whether the words after a name describe it with a role noun: ", [a|an|the] w? w? ROLE" or "is|was a|an|the
    w? w? ROLE", where the words before the role noun are modifiers (no pronoun, relative or verb: "Apple, whose
    founder" is no description of Apple) and the role noun is the description's head (no lowercase noun after
    it: "a founder member")."""
    lower = [w.lower() for w in following]
    if lower[:1] == [","]:
        start = 2 if lower[1:2] and lower[1] in ("a", "an", "the") else 1
    elif lower[:1] and lower[0] in ("is", "was") and lower[1:2] and lower[1] in ("a", "an", "the"):
        start = 2
    else:
        return False
    for i in range(start, min(start + 3, len(following))):
        word = lower[i]
        # a role noun is written in lower case ("a fund manager") or as initials ("CEO"): "the Fund Manager" is a
        # defined term or a name, as regulations and companies write them
        if word in ROLES and (following[i].islower() or following[i].isupper()):
            # the head: what follows is punctuation, the end or a function word, not a noun
            nxt = following[i + 1] if i + 1 < len(following) else ""
            return not nxt[:1].isalpha() or nxt in _AFTER_ROLE
        if word in _NOT_MODIFIERS or not (word.isalpha() or "-" in word):
            return False
    return False


def _titled_by_role(words: Sequence[str], start: int, following: Sequence[str]) -> bool:
    """Whether a role noun in lower case comes right before the name, or before a list of names holding it: "the
    composer Ennio Morricone", "the team leads (Amara Lindqvist, Rafael Moreno and Maja Eriksen)". Not when a noun
    follows the name, which then modifies it ("judges and Supreme Court justices", "rapper X and German rapper")."""
    nxt = following[0] if following else ""
    if nxt.isalpha() and nxt.islower() and nxt not in _AFTER_ROLE:
        return False
    if words[start].lower() in ("the", "a", "an"):
        return False  # a title stands before a bare name ("lead the Mining Reporting Entity" is a verb)
    before = [w for w in words[max(0, start - 3): start] if w.strip()]
    if len(before) >= 2 and before[-1] in ("and", "&") and not before[-2][:1].isupper():
        return False  # "best songwriter and the Association's Award": a list of things, not of names
    i = start - 1
    while i >= 0 and (not words[i].strip() or words[i] in (",", "and", "&", "-")
                      or (words[i][:1].isupper() and words[i].replace(".", "").replace("-", "").isalpha())):
        i -= 1  # back over the names listed before this one (initials keep their dots), and their commas
        if start - i > 24:
            return False
    if i >= 0 and words[i] in ("(", ":"):
        i -= 1
    while i >= 0 and not words[i].strip():
        i -= 1
    if i < 0 or not words[i].islower():
        return False
    after_role = next((w for w in words[i + 1: start] if w.strip()), "")
    if after_role in (",", "and", "&", "."):
        return False  # "Optics team lead, Tromsø" (a signature's place): a title is not followed by a comma
    base = words[i] if words[i] in ROLES else singular(words[i])
    if base not in ROLES:
        return False
    # a role noun that is also a verb ("will lead Corvane's team") titles a list only through "(" or ":"
    return base not in _ROLE_VERBS or after_role in ("(", ":")


_ROLE_VERBS = frozenset({"lead", "judge", "coach"})  # role nouns English also uses as verbs


# Words that cannot modify a role noun: a description holding one is about something else.
_NOT_MODIFIERS = frozenset({"who", "whose", "which", "where", "when", "while", "that", "and", "or", "but", "its",
                            "his", "her", "their", "our", "my", "your", "is", "was", "has", "had", "also", "then",
                            "now", "as", "a", "an", "the"})


def _org_noun_follows(following: Sequence[str]) -> bool:
    """"X's [w] ORG_NOUN", or "X employee(s)" ("every Corvane employee"). The other nouns count only after a
    possessive: before them a place names where something is ("the Bergen headquarters")."""
    lower = [w.lower() for w in following]
    if lower[:1] and lower[0] in ("employee", "employees"):
        return True
    if lower[:1] and lower[0] in POSSESSIVES:
        return any(w in ORG_NOUNS for w in lower[1:3])
    return False


def cue_kinds(cues: Mapping[str, int]) -> dict[str, int]:
    """Cue spans per kind of thing (PERSON, ORG, place) from cue spans per rule; unknown rules are refused."""
    kinds: dict[str, int] = {}
    for rule, n in cues.items():
        if rule not in CUE_KINDS:
            raise ValueError(f"unknown type cue {rule!r} (known: {', '.join(CUE_KINDS)})")
        kinds[CUE_KINDS[rule]] = kinds.get(CUE_KINDS[rule], 0) + n
    return kinds


def cued_type(cues: Mapping[str, int], votes: Mapping[str, int], current: str) -> str | None:
    """The type the cues of an entity's mentions give it (rule -> spans), or None where they decide nothing
    (no cue, or two kinds tied at the top). A place keeps ``current`` when it is a place label already, else takes
    the place label its NER votes prefer (GPE on a tie or none)."""
    kinds = {kind: n for kind, n in cue_kinds(cues).items() if n > 0}
    if not kinds:
        return None
    top = max(kinds.values())
    leaders = [kind for kind, n in kinds.items() if n == top]
    if len(leaders) > 1:
        return None
    if leaders[0] != PLACE:
        return leaders[0]
    if current in PLACE_LABELS:
        return current
    return max(PLACE_LABELS, key=lambda label: (votes.get(label, 0), label == "GPE"))
