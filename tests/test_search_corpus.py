"""Mini-wiki generator, dataset loaders and answer scoring (llm_marl_envs.search)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_marl_envs.search import BM25Backend, load_corpus
from llm_marl_envs.search.corpus import doc_url, title_from_url
from llm_marl_envs.search.loaders import detect_format, load_dataset
from llm_marl_envs.search.miniwiki import (RELATIONS, MiniWiki, MiniWikiConfig, build, extract_fact, parse_hop_question,
                                           parse_question)
from llm_marl_envs.search.text import exact_match, normalize_answer, snippet, token_f1, tokenize

FIXTURES = Path(__file__).parent / "fixtures" / "search"


@pytest.fixture(scope="module")
def wiki() -> MiniWiki:
    return build()


def questions(wiki: MiniWiki, n: int, hops: int | None, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [wiki.sample_question(rng, hops) for _ in range(n)]


# ---------------------------------------------------------------------------------------- generator
def test_same_config_same_corpus_and_other_seed_differs(wiki):
    again = MiniWiki(MiniWikiConfig())
    assert again.corpus.corpus_hash == wiki.corpus.corpus_hash
    assert [d.text for d in again.corpus.documents[:50]] == [d.text for d in wiki.corpus.documents[:50]]
    other = MiniWiki(MiniWikiConfig(seed=1))
    assert other.corpus.corpus_hash != wiki.corpus.corpus_hash
    assert load_corpus(wiki.corpus.spec).corpus_hash == wiki.corpus.corpus_hash


def test_titles_unique_and_urls_round_trip(wiki):
    titles = [d.title for d in wiki.corpus.documents]
    assert len(set(t.lower() for t in titles)) == len(titles) == len(wiki.entities)
    for d in wiki.corpus.documents[:200]:
        assert d.url == doc_url("mini-wiki", d.title) and title_from_url(d.url) == d.title


def test_corpus_has_distractors(wiki):
    surnames = Counter(e.name.split(" ", 1)[1] for e in wiki.entities if e.kind == "person")
    assert sum(c for c in surnames.values() if c > 1) > 50, "namesakes (shared surnames) are the person distractors"
    words = Counter(w for e in wiki.entities if e.kind in ("film", "book") for w in e.name.split()[1:])
    assert words.most_common(1)[0][1] > 5, "titles share words"


@pytest.mark.parametrize("hops", [2, 3, 4])
def test_questions_decompose_and_every_hop_is_stated_in_its_gold_document(wiki, hops):
    for q in questions(wiki, 150, hops, seed=hops):
        assert q.n_hops == hops and len(q.supporting) == hops
        start, rels = parse_question(q.question)
        assert start == q.hops[0].support and rels == [h.relation for h in q.hops]
        chain = [start]
        for i, hop in enumerate(q.hops):
            page = wiki.corpus.by_title[hop.support].text
            assert extract_fact(hop.relation, page) == hop.answer
            assert parse_hop_question(hop.resolved) == (hop.relation, hop.support)
            assert hop.question == RELATIONS[hop.relation].question.format(s=hop.support if i == 0 else f"#{i}")
            if i:
                assert hop.support == q.hops[i - 1].answer
            chain.append(hop.answer)
        assert q.answer == q.hops[-1].answer
        assert len(set(chain)) == len(chain), "a chain never revisits an entity"
        assert normalize_answer(q.answer) not in normalize_answer(q.question)


def test_questions_are_varied(wiki):
    qs = questions(wiki, 1000, None)
    assert len({q.key() for q in qs}) > 900
    assert Counter(q.n_hops for q in qs).keys() == {2, 3, 4}
    assert len({tuple(h.relation for h in q.hops) for q in qs}) > 40


def test_bad_configs_and_hops_raise():
    with pytest.raises(ValueError, match="one city per country"):
        MiniWikiConfig(countries=10, cities=5)
    with pytest.raises(ValueError, match="mayor"):
        MiniWikiConfig(persons=10)
    with pytest.raises(ValueError, match="hops"):
        build().sample_question(np.random.default_rng(0), 5)


def test_grammar_rejects_unknown_text():
    assert parse_question("What is the airspeed of an unladen swallow?") is None
    assert parse_hop_question("Tell me a joke") is None
    assert extract_fact("director", "A page that says nothing.") is None


# ---------------------------------------------------------------------------------------- loaders
def test_musique_loader():
    corpus = load_dataset(FIXTURES / "musique_sample.jsonl")
    assert detect_format(FIXTURES / "musique_sample.jsonl") == "musique"
    assert [q.qid for q in corpus.questions] == ["2hop__1001_2002", "2hop__3003_4004"]  # unanswerable skipped
    q = corpus.questions[0]
    assert (q.answer, q.aliases, q.supporting) == ("Kessling", ("Kessling town",), ("The Salt Ledger", "Ivo Brandt"))
    assert q.hops[1].question == "#1 >> place of birth" and q.hops[1].resolved == "Ivo Brandt >> place of birth"
    # Paragraphs are deduplicated; a title heading two different paragraphs gets two URLs.
    assert len([d for d in corpus.documents if d.title == "Ivo Brandt"]) == 1
    varn = [d for d in corpus.documents if d.title == "Varn"]
    assert len(varn) == 2 and len({d.url for d in varn}) == 2
    assert len(load_dataset(FIXTURES / "musique_sample.jsonl", answerable_only=False).questions) == 3
    assert load_corpus(corpus.spec).corpus_hash == corpus.corpus_hash


def test_titles_that_share_a_url_get_distinct_urls(tmp_path):
    """URLs write a title's spaces as underscores, so "Foo Bar" and "Foo_Bar" once shared one URL and
    fetching it always gave the same page."""
    paragraphs = [{"idx": i, "title": t, "paragraph_text": f"{t} text {i}.", "is_supporting": False}
                  for i, t in enumerate(["Foo_Bar", "Foo Bar", "Foo Bar"])]
    path = tmp_path / "titles.jsonl"
    path.write_text(json.dumps({"id": "t", "question": "Foo?", "answer": "bar", "paragraphs": paragraphs}) + "\n")
    corpus = load_dataset(path)
    assert len({d.url for d in corpus.documents}) == 3
    backend = BM25Backend(corpus, cache_dir=tmp_path / "index")
    assert [backend.fetch(d.url) for d in corpus.documents] == [d.page() for d in corpus.documents]


def test_hotpotqa_loader():
    corpus = load_dataset(FIXTURES / "hotpotqa_sample.json")
    assert detect_format(FIXTURES / "hotpotqa_sample.json") == "hotpotqa"
    q = corpus.questions[0]
    assert (q.qid, q.answer, q.supporting) == ("5a8b57f25542995d1e6f1371", "Ivo Brandt", ("The Salt Ledger", "Ivo Brandt"))
    page = corpus.by_title["The Salt Ledger"].text
    assert page == "The Salt Ledger is a 1931 novel by Ivo Brandt. It follows a customs clerk in a harbor town."
    assert len(load_dataset(FIXTURES / "hotpotqa_sample.json", limit=1).questions) == 1


def test_loader_errors(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        load_dataset(tmp_path / "missing.json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"foo": 1}\n')
    with pytest.raises(ValueError, match="unknown format"):
        load_dataset(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('not json\n')
    with pytest.raises(ValueError, match="broken.jsonl:1: not a JSON object"):
        load_dataset(broken)
    partial = tmp_path / "partial.jsonl"
    partial.write_text('{"paragraphs": []}\n')
    with pytest.raises(ValueError, match="not in the musique format"):
        load_dataset(partial)


def test_a_broken_record_is_named_in_one_line(tmp_path):
    """The error names the record (file:line, file: item i); a context entry of the wrong shape is a
    format error too, where it was "too many values to unpack (expected 2)" with no file named."""
    good = (FIXTURES / "musique_sample.jsonl").read_text().splitlines()[0]
    broken = tmp_path / "broken.jsonl"
    broken.write_text(good + "\n" + json.dumps({**json.loads(good), "paragraphs": [{"idx": 0, "title": "T"}]}) + "\n")
    with pytest.raises(ValueError, match=r"broken\.jsonl:2: not in the musique format \(KeyError: 'paragraph_text'\)"):
        load_dataset(broken)
    hotpot = json.loads((FIXTURES / "hotpotqa_sample.json").read_text())
    hotpot[0]["context"].append(["Varn", ["Varn is a city."], "extra"])
    shaped = tmp_path / "shaped.json"
    shaped.write_text(json.dumps(hotpot))
    with pytest.raises(ValueError, match=r"shaped\.json: item 0: not in the hotpotqa format \(ValueError"):
        load_dataset(shaped)


# ---------------------------------------------------------------------------------------- scoring
@pytest.mark.parametrize(
    "prediction,golds,em,f1",
    [
        ("Kessling", ["Kessling"], 1.0, 1.0),
        ("the  Kessling.", ["Kessling"], 1.0, 1.0),
        ("kessling town", ["Kessling", "Kessling town"], 1.0, 1.0),
        ("Kessling town", ["Kessling"], 0.0, 2 / 3),
        ("Ivo", ["Ivo Brandt"], 0.0, 2 / 3),
        ("", ["Ivo Brandt"], 0.0, 0.0),
        ("Varn", ["Kessling"], 0.0, 0.0),
        ("1931", ["1931"], 1.0, 1.0),
        # HotpotQA's script: yes, no and noanswer are right or wrong, never partly right.
        ("yes no", ["yes"], 0.0, 0.0),
        ("yes, it is", ["yes"], 0.0, 0.0),
        ("no", ["no way"], 0.0, 0.0),
        ("No.", ["no"], 1.0, 1.0),
        ("yes", ["Kessling", "yes"], 1.0, 1.0),
    ],
)
def test_exact_match_and_f1(prediction, golds, em, f1):
    assert exact_match(prediction, golds) == em
    assert token_f1(prediction, golds) == pytest.approx(f1)


@given(st.text(max_size=60), st.lists(st.text(max_size=30), min_size=1, max_size=3))
def test_scores_are_bounded_and_consistent(prediction, golds):
    em, f1 = exact_match(prediction, golds), token_f1(prediction, golds)
    assert 0.0 <= f1 <= 1.0 and em in (0.0, 1.0)
    if em:
        assert f1 == 1.0


def test_tokenize_and_snippet():
    assert tokenize("Who directed The Paper Garden?") == ["directed", "paper", "garden"]
    text = "Alpha is a city. " * 30 + "Alpha is governed by mayor Bo Kern."
    assert snippet("short text.", "x") == "short text."
    out = snippet(text, "mayor of Alpha", 80)
    assert out.startswith("Alpha is governed by mayor Bo Kern.") and len(out) <= 80
