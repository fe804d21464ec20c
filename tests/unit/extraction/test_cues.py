"""Type cues: which rule each construction fires, what an entity's tally of cues decides, and that the cues reach
the mentions the extractor writes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.extraction import EntityExtractor, load_nlp
from ragloom.extraction.cues import CUE_KINDS, NO_MAIL, Mail, cue_kinds, cued_type, span_cues
from ragloom.extraction.resolution import voted_type
from ragloom.types import Chunk


def _cues(text: str, name: str, mail: Mail = NO_MAIL) -> tuple[str, ...]:
    """The cues of ``name`` (its first occurrence) in whitespace-tokenized ``text``."""
    words, span = text.split(), name.split()
    start = next(i for i in range(len(words)) if words[i: i + len(span)] == span)
    return span_cues(words, start, start + len(span), mail)


@pytest.mark.parametrize(("text", "name", "fired"), [
    ("the report by Ms Almeida was late", "Almeida", ("honorific",)),
    ("the report by Dr. Sofia Almeida was late", "Sofia Almeida", ("honorific",)),
    ("the report by Dr . Sofia Almeida was late", "Sofia Almeida", ("honorific",)),  # the dot tokenized apart
    ("signed Professor Ruth Smith", "Professor Ruth Smith", ("honorific",)),  # NER kept the title
    ("Corvane Systems AS builds sensors", "Corvane Systems AS", ("legal_form",)),
    ("Corvane AS builds sensors", "Corvane", ("legal_form",)),  # the designator right after the name
    ("Corvane Canada Ltd. opened", "Corvane Canada Ltd.", ("legal_form",)),
    ("with the Bergen Marine Institute today", "Bergen Marine Institute", ("institution",)),
    ("studied at the Arctic University of Norway", "Arctic University of Norway", ("institution",)),
    ("a Bergen - based company", "Bergen", ("place_phrase",)),  # as spaCy tokenizes "Bergen-based"
    ("the firm is headquartered in Halifax now", "Halifax", ("place_phrase",)),
    ("she was born in Tromsø", "Tromsø", ("place_phrase",)),
    ("the city of Bergen grew", "Bergen", ("place_phrase",)),
    # what is no evidence
    ("Corvane , whose shares rose", "Corvane", ()),  # "whose" is said of companies too ...
    ("Sofia Almeida , who leads Data Services", "Sofia Almeida", ()),  # ... and "who" of groups and nations
    ("the Samoa Rugby Football Union , who are members", "Samoa Rugby Football Union", ()),
    ("Miss America won", "America", ()),  # not an honorific here: a pageant
    ("Halifax Harbour is cold", "Halifax Harbour", ()),
    ("in Halifax the team met", "Halifax", ()),  # a bare "in" is said of products and companies too
    ("the as yet unnamed Corvane as well", "Corvane", ()),  # legal forms are case-sensitive
    ("the Council met", "Council", ("institution",)),
    ("the Mr", "Mr", ()),  # a lone title is no name with a title
    # the rules of 2026-11-28
    ("- Amara Lindqvist , team lead .", "Amara Lindqvist", ("role",)),
    ("Tomas Okafor , a signal-processing researcher , started", "Tomas Okafor", ("role",)),
    ("Alexis Lecaye is a French author and script writer", "Alexis Lecaye", ("role",)),
    ("Alexis Lecaye ( born August 22 , 1951 )", "Alexis Lecaye", ("born",)),
    ("Helen Hardin , the daughter of Pablita Velarde , Santa", "Pablita Velarde", ("kinship",)),
    ("when he was 21 he married Vigdis .", "Vigdis", ("kinship",)),
    ("a crime film directed by Lister Laurance and starring", "Lister Laurance", ("maker",)),
    ("About 70 of Corvane 's 140 employees work", "Corvane", ("org_noun",)),
    ("every Corvane employee and contractor", "Corvane", ("org_noun",)),
    ("Apple 's headquarters in Cupertino", "Apple", ("org_noun",)),
    # ... and what is not
    ("Apple , whose founder Steve Jobs", "Apple", ()),  # the role noun is not a description of the name
    ("the 6th century BCE , Taoist teacher Lao Tzu", "BCE", ()),  # the role introduces the name after it
    ("Tim Cook , CEO of Apple", "Tim Cook", ("role",)),
    ("Acme , a founder member of", "Acme", ()),  # "founder" modifies "member", the description's head
    ("the Domestic Fund , the Fund Manager and", "Domestic Fund", ()),  # a defined term, not a description
    ("the team leads ( Amara Lindqvist , Rafael Moreno and Maja Eriksen ) agree", "Amara Lindqvist", ("role",)),
    ("the team leads ( Amara Lindqvist , Rafael Moreno and Maja Eriksen ) agree", "Maja Eriksen", ("role",)),
    ("scored by the composer Ennio Morricone .", "Ennio Morricone", ("role",)),
    ("built by architects McKean and Fairweather", "McKean", ("role",)),
    ("built by two engineers . Microsoft , which", "Microsoft", ()),  # a sentence ends between
    ("by American rapper , LL Cool J and German rapper , Spax", "German", ()),  # a noun follows: a modifier
    ("Maja Eriksen \n Optics team lead , Tromsø", "Tromsø", ()),  # a signature: role, then place
    ("the factors that lead the Mining Reporting Entity to", "the Mining Reporting Entity", ()),  # a verb
    ("Maja Eriksen will lead Corvane 's new Optics team", "Corvane", ()),  # "lead" a verb here, no title
    ("district judges and Supreme Court justices riding", "Supreme Court", ()),
    ("films by studios Warner Bros. and Legendary", "Legendary", ()),  # "studios" is no role
    ("as best singer , best songwriter and the Association's Award", "the Association's Award", ()),
    ("Paris , the capital of France", "Paris", ()),
    ("the first son of China 's former leader", "China", ()),  # a possessor, not the kin
    ("the film directed by Sony 's new studio", "Sony", ()),
    ("the Bergen headquarters on Bryggen", "Bergen", ()),  # a place names where a headquarters is
    ("the coalition led by Saudi Arabia", "Saudi Arabia", ()),  # "led by" is said of countries
    ("a song performed by Queen in 1985", "Queen", ()),  # bands perform
])
def test_each_rule_fires_on_its_construction_only(text, name, fired):
    assert _cues(text, name) == fired


def test_line_breaks_do_not_end_a_construction():
    """spaCy makes a line break a token of its own; the words around a name are read without it."""
    words = ["owned", "by", "Lukas", "Becker", ",", "the", "security", "\n", "lead", ",", "who"]
    assert span_cues(words, 2, 4) == ("role",)
    words = ["a", "film", "directed", "by", "\n", "Sergio", "Leone", "."]
    assert span_cues(words, 5, 7) == ("maker",)
    words = ["she", "was", "born", "in", "\n  ", "Tromsø"]
    assert span_cues(words, 5, 6) == ("place_phrase",)


def test_email_addresses_spell_people_and_organisations():
    mail = Mail.of("From: Sofia Almeida <sofia.almeida@corvane.com>, cc tomas_okafor@mail.corvane.no")
    assert mail.local_parts == {("sofia", "almeida"), ("tomas", "okafor")}
    assert mail.domains == {"corvane"}  # "mail" names a host, "com"/"no" a top-level domain
    assert _cues("write to Sofia Almeida today", "Sofia Almeida", mail) == ("email_name",)
    assert _cues("write to Tomas Okafor today", "Tomas Okafor", mail) == ("email_name",)
    assert _cues("Corvane ships KelpWatch", "Corvane", mail) == ("email_domain",)
    # One word of a local part is no name (a first name alone is too common), nor is another person
    assert _cues("write to Sofia today", "Sofia", mail) == ()
    assert _cues("write to Sofia Okafor today", "Sofia Okafor", mail) == ()
    assert Mail.of("no address here @ all") == NO_MAIL


@given(st.lists(st.sampled_from(["Ms", ",", "AS", "Institute", "of", "born", "in", "city", "-", "based",
                                 "Bergen", "Sofia", ".", "x"]), min_size=1, max_size=12), st.data())
def test_cues_are_known_rules_and_need_a_span_inside_the_text(words, data):
    start = data.draw(st.integers(0, len(words) - 1))
    end = data.draw(st.integers(start + 1, len(words)))
    fired = span_cues(words, start, end)
    assert set(fired) <= set(CUE_KINDS)
    assert len(set(fired)) == len(fired)
    with pytest.raises(ValueError, match="outside"):
        span_cues(words, end, end)
    with pytest.raises(ValueError, match="outside"):
        span_cues(words, start, len(words) + 1)


@pytest.mark.parametrize(("cues", "votes", "current", "typed"), [
    ({"email_name": 1}, {"ORG": 7}, "ORG", "PERSON"),  # "Sofia Almeida": ORG 7 of 7, one address spells her
    ({"email_domain": 2}, {"PERSON": 14, "GPE": 1}, "PERSON", "ORG"),  # "Corvane", the company as a person
    ({"honorific": 1, "email_name": 1, "institution": 1}, {"ORG": 3}, "ORG", "PERSON"),  # most cue spans wins
    ({"honorific": 1, "legal_form": 1}, {"ORG": 3}, "PERSON", None),  # two kinds tied: the cues decide nothing
    ({"place_phrase": 1}, {"ORG": 10, "GPE": 8}, "ORG", "GPE"),  # "Halifax": a place, GPE by its labels
    ({"place_phrase": 1}, {"ORG": 3, "LOC": 1}, "ORG", "LOC"),
    ({"place_phrase": 1}, {"GPE": 1, "LOC": 1}, "LOC", "LOC"),  # already a place label: kept
    ({"place_phrase": 2}, {}, "ORG", "GPE"),
    ({}, {"ORG": 7}, "ORG", None),
    ({"honorific": 0}, {"ORG": 7}, "ORG", None),
])
def test_cued_type(cues, votes, current, typed):
    assert cued_type(cues, votes, current) == typed


def test_cues_outrank_the_vote_and_labels_decide_without_them():
    assert voted_type({"ORG": 7}, "ORG", {"email_name": 1}) == "PERSON"
    assert voted_type({"ORG": 7, "PERSON": 1}, "ORG", {"honorific": 1, "legal_form": 1}) == "ORG"  # a tie of kinds
    assert voted_type({"ORG": 3, "PERSON": 1}, "PERSON", {}) == "ORG"  # the vote as before
    assert voted_type({"ORG": 3, "PERSON": 1}, "PERSON") == "ORG"


def test_unknown_cue_rules_are_refused():
    assert cue_kinds({"honorific": 2, "email_name": 1, "place_phrase": 1}) == {"PERSON": 3, "place": 1}
    with pytest.raises(ValueError, match="unknown type cue 'vibes'"):
        cued_type({"vibes": 1}, {}, "ORG")


@pytest.fixture(scope="module")
def nlp():
    return load_nlp()


def _chunk(i: int, text: str) -> Chunk:
    return Chunk(chunk_id=f"c{i}", document_id="doc", strategy="recursive", text=text, start=0, end=len(text),
                 token_count=0, position=i)


def test_mentions_carry_the_cues_of_their_spans(nlp):
    """spaCy's tokens, not whitespace: "Bergen-based" splits into "Bergen", "-", "based"; an address is one token."""
    texts = ["Mr. John Smith, who joined in 2019, works for Acme Ltd. in a Bergen-based team.",
             "Ask John Smith (john.smith@acme.com) about the Bergen office."]
    result = EntityExtractor(nlp).extract([_chunk(i, t) for i, t in enumerate(texts)])
    by_name = {e.name: e.entity_id for e in result.entities}
    cues = {(m.chunk_id, m.entity_id): dict(m.cues) for m in result.mentions}
    assert {"John Smith", "Bergen"} <= set(by_name)
    assert cues[("c0", by_name["John Smith"])] == {"honorific": 1}
    assert cues[("c0", by_name["Bergen"])] == {"place_phrase": 1}
    assert cues[("c1", by_name["Bergen"])] == {}  # "the Bergen office" says nothing about Bergen
    assert cues[("c1", by_name["John Smith"])] == {"email_name": 1}
    acme = next(eid for name, eid in by_name.items() if name.startswith("Acme"))
    assert cues[("c0", acme)] == {"legal_form": 1}
