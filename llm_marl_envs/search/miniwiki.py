"""Mini-wiki: a seeded, fictional multi-hop corpus (the offline stand-in for HotpotQA/MuSiQue).

Entities of eight types (country, city, university, person, company, band, film, book) are linked
by functional relations (a film has one director, a person one birthplace, ...). Each entity is
one document (title + paragraph) stating its own facts in sentences drawn from a few templates,
with back-links ("She is best known for the film ...") and filler sentences, so documents share
surface words and a search for a name returns the right page among look-alikes. Persons often
share a surname and titles share words: these are the distractors.

A question follows a chain of 2-4 relations from a named entity, e.g. director -> birthplace:
"In which city was the director of The Glass Orchard born?". Its decomposition (MuSiQue style,
`#1` = answer of hop 1), the gold document of every hop (the page of the hop's subject), the
answer and its aliases come with it. Relations are functional and chains never revisit an
entity, so every question has exactly one answer, and none of it can be known without reading
the corpus: names are built from random syllables.

Everything is a pure function of the config (its own `numpy.random.Generator`); the same config
gives the same corpus on any machine. The grammar helpers at the end (`parse_question`,
`parse_hop_question`, `extract_fact`) are the generator's ground truth for the scripted oracles.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np

from .corpus import Corpus, Document, Hop, Question, doc_url

SOURCE = "mini-wiki"
MIN_HOPS, MAX_HOPS = 2, 4


@dataclass(frozen=True)
class Relation:
    name: str
    subject: str
    """Entity type of the subject."""
    object: str
    """Entity type of the object, or "year"/"currency" for literal values (chain ends there)."""
    phrase: str
    """Noun phrase naming the object, `{s}` = subject: "the director of {s}"."""
    question: str
    """Question asking for the object: "Who directed {s}?"."""
    facts: tuple[str, ...]
    """Sentences stating the fact in the subject's page (`{s}` name, `{Pro}` pronoun, `{o}` object).
    The object always ends its sentence, so `extract_fact` can read it back."""

    @property
    def literal(self) -> bool:
        return self.object in ("year", "currency")


RELATIONS: dict[str, Relation] = {r.name: r for r in [
    Relation("director", "film", "person", "the director of {s}", "Who directed {s}?",
             ("The film was directed by {o}.", "{s} was directed by {o}.")),
    Relation("author", "book", "person", "the author of {s}", "Who wrote {s}?",
             ("The novel was written by {o}.", "{s} was written by {o}.")),
    Relation("founder", "company", "person", "the founder of {s}", "Who founded {s}?",
             ("The company was founded by {o}.", "{s} was founded by {o}.")),
    Relation("lead_singer", "band", "person", "the lead singer of {s}", "Who is the lead singer of {s}?",
             ("The band is fronted by {o}.", "The lead singer of {s} is {o}.")),
    Relation("birthplace", "person", "city", "the birthplace of {s}", "In which city was {s} born?",
             ("{Pro} was born in {o}.", "{s} was born in {o}.")),
    Relation("alma_mater", "person", "university", "the alma mater of {s}", "Which university did {s} attend?",
             ("{Pro} studied at {o}.", "{s} graduated from {o}.")),
    Relation("spouse", "person", "person", "the spouse of {s}", "Who is married to {s}?",
             ("{Pro} is married to {o}.", "{s} is married to {o}.")),
    Relation("headquarters", "company", "city", "the headquarters city of {s}", "In which city is {s} headquartered?",
             ("The company is headquartered in {o}.", "{s} has its headquarters in {o}.")),
    Relation("campus", "university", "city", "the campus city of {s}", "In which city is {s} located?",
             ("The university is located in {o}.", "The campus of {s} is in {o}.")),
    Relation("formed_in", "band", "city", "the formation city of {s}", "In which city was {s} formed?",
             ("The band was formed in {o}.", "{s} was formed in {o}.")),
    Relation("country", "city", "country", "the country of {s}", "In which country is {s}?",
             ("{s} is a city in {o}.", "The city lies in {o}.")),
    Relation("capital", "country", "city", "the capital of {s}", "What is the capital of {s}?",
             ("Its capital is {o}.", "The capital of {s} is {o}.")),
    Relation("mayor", "city", "person", "the mayor of {s}", "Who is the mayor of {s}?",
             ("The current mayor of the city is {o}.", "{s} is governed by mayor {o}.")),
    Relation("currency", "country", "currency", "the currency of {s}", "What is the currency of {s}?",
             ("Its currency is the {o}.", "The official currency of {s} is the {o}.")),
    Relation("founded", "company", "year", "the founding year of {s}", "In which year was {s} founded?",
             ("It was founded in {o}.", "{s} was established in {o}.")),
]}
# Universities and bands have a founding year too (same relation name, other subject types).
_FOUNDED_SUBJECTS = ("company", "university", "band")
RELATIONS_FROM: dict[str, tuple[str, ...]] = {}
for _r in RELATIONS.values():
    for _kind in (_FOUNDED_SUBJECTS if _r.name == "founded" else (_r.subject,)):
        RELATIONS_FROM[_kind] = RELATIONS_FROM.get(_kind, ()) + (_r.name,)

KINDS = ("country", "city", "university", "person", "company", "band", "film", "book")


@dataclass(frozen=True)
class MiniWikiConfig:
    seed: int = 0
    countries: int = 30
    cities: int = 120
    universities: int = 40
    persons: int = 600
    companies: int = 100
    bands: int = 50
    films: int = 180
    books: int = 180
    shared_surname: float = 0.3
    """Fraction of persons whose surname repeats another person's (namesake distractors)."""
    married: float = 0.4
    """Fraction of persons with a spouse."""

    def __post_init__(self) -> None:
        for name in ("countries", "cities", "universities", "persons", "companies", "bands", "films", "books"):
            if getattr(self, name) < 1:
                raise ValueError(f"MiniWikiConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.cities < self.countries:
            raise ValueError(f"MiniWikiConfig needs at least one city per country: cities={self.cities} < countries={self.countries}")
        if self.persons < self.cities:
            raise ValueError(f"MiniWikiConfig needs a mayor per city: persons={self.persons} < cities={self.cities}")
        if not (0 <= self.shared_surname <= 1 and 0 <= self.married <= 1):
            raise ValueError("MiniWikiConfig.shared_surname and .married are fractions in [0, 1]")

    def spec(self) -> dict:
        return {"kind": SOURCE, **asdict(self)}


@dataclass
class Entity:
    eid: int
    kind: str
    name: str
    aliases: tuple[str, ...] = ()
    facts: dict[str, int | str] = field(default_factory=dict)
    """relation -> object entity id (int) or literal value (str)."""
    attrs: dict[str, str] = field(default_factory=dict)
    """Non-relational details used in the page text (pronoun, genre, occupation...)."""


# ---------------------------------------------------------------------------------------- names
_ONSETS = "b br c ch d dr f fl g gr h j k kr l m n p pr r s sh st t tr v w z".split()
_VOWELS = "a e i o u a e o ae ai ei ia io ou".split()
_CODAS = ["", "", "", "n", "r", "l", "s", "th", "m", "nd", "rn", "ss", "x", "k"]
_ADJ = ("Silent Glass Crimson Hollow Golden Broken Distant Quiet Northern Iron Velvet Pale Burning Hidden "
        "Frozen Scarlet Silver Wandering Last Lonely Bitter Amber Restless Sunken Wild Copper Ashen Gentle "
        "Salt Winter Paper Stone").split()
_NOUN = ("Orchard Harbor River Lantern Garden Mirror Tower Meadow Signal Bridge Island Engine Letter Shadow "
         "Forest Compass Harvest Voyage Kingdom Anthem Winter Valley Circus Orbit Archive Beacon Canyon "
         "Citadel Ember Fortune Horizon Labyrinth").split()
_PLURAL = ("Wolves Lanterns Sparrows Engines Ravens Tides Echoes Pilots Comets Owls Anchors Foxes Rivers "
           "Giants Monarchs Drifters").split()
_COMPANY_SUFFIX = "Industries Holdings Works Labs Foundry Textiles Shipping Motors Systems Mills".split()
_UNIVERSITY_FORM = ("University of {w}", "{w} Institute of Technology", "{w} College", "{w} University")
_CURRENCY_UNIT = "crown mark florin dram real thaler ducat".split()
_GENRES = "drama comedy thriller documentary western musical adventure".split()
_OCCUPATIONS = {"director": "film director", "author": "novelist", "founder": "entrepreneur",
                "lead_singer": "singer", "mayor": "politician"}
_OTHER_JOBS = ("architect", "engineer", "chemist", "teacher", "painter", "journalist", "physician", "economist")
_FEATURES = ("old harbor", "stone bridges", "spring festival", "textile mills", "river markets", "botanical garden",
             "cathedral", "railway station", "university quarter", "glass workshops")
_THEMES = ("a family", "a lighthouse keeper", "two sisters", "a travelling circus", "a river town", "an inventor",
           "a forgotten archive", "a winter journey")


def _article(title: str) -> str:
    return "An " + title[2:] if title.startswith("A ") and title[2] in "AEIOU" else title


def _word(rng: np.random.Generator, syllables: int) -> str:
    parts = []
    for i in range(syllables):
        parts.append(_ONSETS[int(rng.integers(len(_ONSETS)))] + _VOWELS[int(rng.integers(len(_VOWELS)))])
        if i == syllables - 1 or rng.random() < 0.35:
            parts.append(_CODAS[int(rng.integers(len(_CODAS)))])
    return "".join(parts).capitalize()


class _Names:
    """Unique names (case-insensitive) across the whole corpus."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.used: set[str] = set()

    def take(self, make) -> str:
        for _ in range(10_000):
            name = make()
            if name.lower() not in self.used:
                self.used.add(name.lower())
                return name
        raise ValueError("mini-wiki: ran out of distinct names; lower the entity counts")

    def word(self, lo: int = 2, hi: int = 3) -> str:
        return self.take(lambda: _word(self.rng, int(self.rng.integers(lo, hi + 1))))


# ---------------------------------------------------------------------------------------- the world
class MiniWiki:
    """The generated world: entities, their pages (the corpus) and the question sampler."""

    def __init__(self, config: MiniWikiConfig = MiniWikiConfig()):
        self.config = config
        rng = np.random.default_rng(np.random.SeedSequence([zlib.crc32(SOURCE.encode()), int(config.seed)]))
        self.entities: list[Entity] = []
        self._build(rng)
        self.by_name = {e.name: e for e in self.entities}
        self._reach = self._reachability()
        self.starts = {h: [e.eid for e in self.entities if self._reach[e.eid][h]] for h in range(MIN_HOPS, MAX_HOPS + 1)}
        docs = tuple(Document(e.name, self._page(e, rng), doc_url(SOURCE, e.name)) for e in self.entities)
        self.corpus = Corpus(SOURCE, docs, (), spec=config.spec())

    def __deepcopy__(self, memo: dict) -> MiniWiki:
        return self  # immutable once built; shared by environment forks

    # ------------------------------------------------------------------ generation
    def _add(self, kind: str, name: str, aliases: tuple[str, ...] = (), **attrs: str) -> Entity:
        e = Entity(len(self.entities), kind, name, aliases, {}, dict(attrs))
        self.entities.append(e)
        return e

    def _build(self, rng: np.random.Generator) -> None:
        c = self.config
        names = _Names(rng)
        pick = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731

        countries = []
        for _ in range(c.countries):
            w = names.word(2, 3)
            form = pick(("Republic", "Kingdom", "Federation"))
            e = self._add("country", w, (f"{form} of {w}",), form=form)
            e.facts["currency"] = f"{names.word(2, 2)} {pick(_CURRENCY_UNIT)}"
            countries.append(e)
        cities = []
        for i in range(c.cities):
            country = countries[i] if i < len(countries) else pick(countries)
            e = self._add("city", names.word(2, 3), feature=pick(_FEATURES))
            e.facts["country"] = country.eid
            if "capital" not in country.facts:
                country.facts["capital"] = e.eid
            cities.append(e)
        universities = []
        for _ in range(c.universities):
            name = names.take(lambda: pick(_UNIVERSITY_FORM).format(w=_word(rng, 2)))
            e = self._add("university", name)
            e.facts["campus"] = pick(cities).eid
            e.facts["founded"] = str(int(rng.integers(1600, 1990)))
            universities.append(e)

        first_names = [_word(rng, 2) for _ in range(max(40, c.persons // 4))]
        surnames: list[str] = []
        persons = []
        for _ in range(c.persons):
            def make_name() -> str:
                first = pick(first_names)
                if surnames and rng.random() < c.shared_surname:
                    last = pick(surnames)
                else:
                    last = _word(rng, int(rng.integers(2, 4)))
                return f"{first} {last}"
            name = names.take(make_name)
            first, last = name.split(" ", 1)
            surnames.append(last)
            gender = pick(("She", "He"))
            e = self._add("person", name, (f"{first[0]}. {last}",), pro=gender, job=pick(_OTHER_JOBS))
            e.facts["birthplace"] = pick(cities).eid
            e.facts["alma_mater"] = pick(universities).eid
            persons.append(e)
        # Spouses: disjoint pairs among a random subset.
        order = [int(i) for i in rng.permutation(len(persons))]
        n_married = int(c.married * len(persons)) // 2 * 2
        for a, b in zip(order[0:n_married:2], order[1:n_married:2]):
            persons[a].facts["spouse"] = persons[b].eid
            persons[b].facts["spouse"] = persons[a].eid
        # Mayors: a distinct person per city.
        for city, p in zip(cities, rng.choice(len(persons), size=len(cities), replace=False)):
            city.facts["mayor"] = persons[int(p)].eid
            persons[int(p)].attrs.setdefault("role", "mayor")

        for _ in range(c.companies):
            w = names.word(2, 2)
            e = self._add("company", names.take(lambda: f"{w} {pick(_COMPANY_SUFFIX)}"), (w,))
            e.facts["founder"] = pick(persons).eid
            e.facts["headquarters"] = pick(cities).eid
            e.facts["founded"] = str(int(rng.integers(1820, 2015)))
        for _ in range(c.bands):
            name = names.take(lambda: f"The {pick(_ADJ)} {pick(_PLURAL)}")
            e = self._add("band", name, (name[4:],))
            e.facts["lead_singer"] = pick(persons).eid
            e.facts["formed_in"] = pick(cities).eid
            e.facts["founded"] = str(int(rng.integers(1955, 2020)))
        for _ in range(c.films):
            name = names.take(lambda: pick(("The {a} {n}", "{n} of the {a} {m}", "The {n}'s {m}")).format(
                a=pick(_ADJ), n=pick(_NOUN), m=pick(_NOUN)))
            e = self._add("film", name, genre=pick(_GENRES), year=str(int(rng.integers(1950, 2024))), theme=pick(_THEMES))
            e.facts["director"] = pick(persons).eid
        for _ in range(c.books):
            name = names.take(lambda: _article(pick(("{a} {n}", "A {n} for the {a} {m}", "The {a} {n}")).format(
                a=pick(_ADJ), n=pick(_NOUN), m=pick(_NOUN))))
            e = self._add("book", name, year=str(int(rng.integers(1800, 2024))), theme=pick(_THEMES))
            e.facts["author"] = pick(persons).eid
        for e in self.entities:
            for rel, obj in e.facts.items():
                if rel in _OCCUPATIONS and isinstance(obj, int):
                    self.entities[obj].attrs.setdefault("role", rel)

    def _reachability(self) -> list[list[bool]]:
        """reach[e][L]: a chain of L relations starts at e (ignoring repeats; repeats are rejected when sampling)."""
        reach = [[True] + [False] * MAX_HOPS for _ in self.entities]
        for length in range(1, MAX_HOPS + 1):
            for e in self.entities:
                for rel, obj in e.facts.items():
                    if length == 1 or (isinstance(obj, int) and reach[obj][length - 1]):
                        reach[e.eid][length] = True
                        break
        return reach

    # ------------------------------------------------------------------ pages
    def _page(self, e: Entity, rng: np.random.Generator) -> str:
        pick = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731
        pro = e.attrs.get("pro", "It")
        intro = {
            "country": f"{e.name}, officially the {e.aliases[0] if e.aliases else e.name}, is a sovereign state.",
            "city": f"{e.name} is known for its {e.attrs.get('feature', 'harbor')}.",
            "university": f"{e.name} is a public research university.",
            "person": f"{e.name} is a {_OCCUPATIONS.get(e.attrs.get('role', ''), e.attrs.get('job', 'writer'))}.",
            "company": f"{e.name} is a manufacturing and trading company.",
            "band": f"{e.name} are a rock band.",
            "film": f"{e.name} is a {e.attrs.get('year')} {e.attrs.get('genre')} film about {e.attrs.get('theme')}.",
            "book": f"{e.name} is a novel published in {e.attrs.get('year')}. It tells the story of {e.attrs.get('theme')}.",
        }[e.kind]
        sentences = [intro]
        for rel, obj in e.facts.items():
            value = self.entities[obj].name if isinstance(obj, int) else obj
            sentences.append(pick(RELATIONS[rel].facts).format(s=e.name, Pro=pro, o=value))
        sentences.extend(self._backlinks(e, pro))
        return " ".join(sentences)

    def _backlinks(self, e: Entity, pro: str) -> list[str]:
        """Mentions of this entity's works: these make other pages match its name (distractors)."""
        out = []
        if e.kind != "person":
            return out
        for other in self._incoming(e.eid):
            rel = next(r for r, o in other.facts.items() if o == e.eid)
            if rel == "director":
                out.append(f"{pro} is best known for the film {other.name}.")
            elif rel == "author":
                out.append(f"{pro} wrote the novel {other.name}.")
            elif rel == "founder":
                out.append(f"{pro} started the firm {other.name}.")
            elif rel == "lead_singer":
                out.append(f"{pro} sings with {other.name}.")
            elif rel == "mayor":
                out.append(f"{pro} serves as mayor of {other.name}.")
        return out[:3]

    def _incoming(self, eid: int) -> list[Entity]:
        if not hasattr(self, "_incoming_index"):
            index: dict[int, list[Entity]] = {}
            for other in self.entities:
                for rel, obj in other.facts.items():
                    if isinstance(obj, int) and rel != "spouse":
                        index.setdefault(obj, []).append(other)
            self._incoming_index = index
        return self._incoming_index.get(eid, [])

    # ------------------------------------------------------------------ questions
    def value(self, eid: int, rel: str) -> tuple[str, int | None]:
        """(surface answer, entity id or None for a literal) of relation `rel` from entity `eid`."""
        obj = self.entities[eid].facts[rel]
        return (self.entities[obj].name, obj) if isinstance(obj, int) else (obj, None)

    def sample_question(self, rng: np.random.Generator, hops: int | None = None) -> Question:
        """A random chain question of `hops` relations (2-4; None draws the count uniformly)."""
        h = int(rng.integers(MIN_HOPS, MAX_HOPS + 1)) if hops is None else int(hops)
        if not MIN_HOPS <= h <= MAX_HOPS:
            raise ValueError(f"hops must be between {MIN_HOPS} and {MAX_HOPS} (or None for a mix), got {hops}")
        starts = self.starts[h]
        for _ in range(1_000):
            eid = starts[int(rng.integers(len(starts)))]
            chain, rels = [eid], []
            while len(rels) < h:
                remaining = h - len(rels)
                options = [r for r, o in self.entities[chain[-1]].facts.items()
                           if (remaining == 1 or (isinstance(o, int) and self._reach[o][remaining - 1]))
                           and not (isinstance(o, int) and o in chain)]
                if not options:
                    break
                rel = options[int(rng.integers(len(options)))]
                rels.append(rel)
                chain.append(self.entities[chain[-1]].facts[rel] if remaining > 1 else -1)
            if len(rels) == h:
                return self.question(chain[0], rels)
        raise ValueError(f"mini-wiki: no {h}-hop chain found; enlarge the corpus")

    def question(self, start: int, rels: Sequence[str]) -> Question:
        """The question following `rels` from entity `start`, with its decomposition."""
        hops, eid, np_text = [], start, self.entities[start].name
        answer, aliases = "", ()
        for i, rel in enumerate(rels):
            r = RELATIONS[rel]
            subject = self.entities[eid]
            answer, obj = self.value(eid, rel)
            aliases = self.entities[obj].aliases if obj is not None else ()
            hops.append(Hop(question=r.question.format(s=subject.name if i == 0 else f"#{i}"),
                            resolved=r.question.format(s=subject.name), answer=answer, support=subject.name, relation=rel))
            if i < len(rels) - 1:
                np_text = r.phrase.format(s=np_text)
                eid = obj
        text = RELATIONS[rels[-1]].question.format(s=np_text)
        qid = f"e{start}:" + ">".join(rels)
        return Question(qid, text, answer, tuple(aliases), tuple(hops), tuple(h.support for h in hops), SOURCE)


@lru_cache(maxsize=8)
def build(config: MiniWikiConfig = MiniWikiConfig()) -> MiniWiki:
    """The mini-wiki of `config` (built once per process; it is immutable once built)."""
    return MiniWiki(config)


# ---------------------------------------------------------------------------------------- grammar
def _template_regex(template: str, group: str = "s") -> re.Pattern[str]:
    head, _, tail = template.partition("{s}")
    return re.compile("^" + re.escape(head) + f"(?P<{group}>.+)" + re.escape(tail) + "$")


_QUESTION_RE = {name: _template_regex(r.question) for name, r in RELATIONS.items()}
_PHRASE_PREFIX = {name: r.phrase.partition("{s}")[0] for name, r in RELATIONS.items()}


def parse_hop_question(text: str) -> tuple[str, str] | None:
    """(relation, subject) of a single-hop question such as "Who directed The Glass Orchard?"."""
    text = " ".join(text.split())
    for name, pattern in _QUESTION_RE.items():
        m = pattern.match(text)
        if m:
            return name, m.group("s")
    return None


def parse_question(text: str) -> tuple[str, list[str]] | None:
    """(start entity name, relations in hop order) of a generated multi-hop question."""
    outer = parse_hop_question(text)
    if outer is None:
        return None
    last, np_text = outer
    rels = [last]
    while True:
        for name, prefix in _PHRASE_PREFIX.items():
            if np_text.startswith(prefix):
                rels.append(name)
                np_text = np_text[len(prefix):]
                break
        else:
            return np_text, rels[::-1]


def _fact_regex(template: str) -> re.Pattern[str]:
    out = ""
    for piece in re.split(r"(\{s\}|\{Pro\}|\{o\})", template):
        if piece in ("{s}", "{Pro}"):
            out += r"[^.]+?"
        elif piece == "{o}":
            out += r"(?P<o>[^.]+?)"
        else:
            out += re.escape(piece)
    return re.compile(out)


_FACT_RE = {name: tuple(_fact_regex(t) for t in r.facts) for name, r in RELATIONS.items()}


def extract_fact(relation: str, page: str) -> str | None:
    """Read the object of `relation` from the subject's page text (None if it is not stated)."""
    for pattern in _FACT_RE[relation]:
        m = pattern.search(page)
        if m:
            return m.group("o").strip()
    return None
