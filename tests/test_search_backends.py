"""BM25 backend (bm25s): ranking, snippets, fetch, the on-disk index cache, tool argument checks."""

from __future__ import annotations

import numpy as np
import pytest

from llm_marl_envs.search import BM25Backend, ToolInputError, make_backend, mini_wiki_spec
from llm_marl_envs.search.backends import cache_root
from llm_marl_envs.search.corpus import Corpus, Document, doc_url
from llm_marl_envs.search.miniwiki import build
from llm_marl_envs.search.tools import ToolResult, check_arguments, run_tool

TINY = Corpus("tiny", tuple(Document(t, x, doc_url("tiny", t)) for t, x in [
    ("Paper Garden", "Paper Garden is a 1995 film. The film was directed by Mira Vantel."),
    ("Mira Vantel", "Mira Vantel is a film director. She was born in Korvath."),
    ("Korvath", "Korvath is a city in Drel."),
]))


@pytest.fixture(scope="module")
def backend() -> BM25Backend:
    return BM25Backend(build().corpus)


def test_ranking_snippets_and_fetch(tmp_path):
    b = BM25Backend(TINY, cache_dir=tmp_path / "index")
    hits = b.search("Who directed Paper Garden?", 2)
    assert [h.title for h in hits] == ["Paper Garden", "Mira Vantel"][: len(hits)] and hits[0].url == "wiki://tiny/Paper_Garden"
    assert hits[0].snippet == TINY.documents[0].text  # short pages are shown whole
    assert b.search("where was Mira Vantel born", 1)[0].title == "Mira Vantel"
    assert b.search("zzz qqq", 5) == [] and b.search("the of who", 5) == []  # unknown words / stopwords only
    assert b.fetch("wiki://tiny/Korvath") == "Korvath\n\nKorvath is a city in Drel."
    with pytest.raises(ToolInputError, match="unknown URL.*no page titled 'Nowhere'"):
        b.fetch("wiki://tiny/Nowhere")
    with pytest.raises(ToolInputError):
        b.search("   ", 3)
    with pytest.raises(ToolInputError, match="between 1 and 20"):
        b.search("film", 0)
    assert len(b.search("film", 20)) <= 3  # k larger than the corpus


@pytest.mark.parametrize("written", ["wiki://{source}/{raw}", "wiki://{source}/{spaced}", "wiki://other/{escaped}"])
def test_a_url_naming_a_page_otherwise_is_told_where_the_page_is(backend, written):
    """The page exists under its title: the error gives its URL (it said "no page titled" that title)."""
    doc = next(d for d in backend.corpus.documents if "%" in d.url and " " in d.title)  # e.g. The Harbor's Beacon
    source, escaped = doc.url[len("wiki://"):].split("/", 1)
    url = written.format(source=source, raw=doc.title.replace(" ", "_"), spaced=doc.title, escaped=escaped)
    with pytest.raises(ToolInputError) as e:
        backend.fetch(url)
    assert f"the page titled {doc.title!r} is at {doc.url}" in str(e.value) and "no page titled" not in str(e.value)


def test_index_is_cached_on_disk_and_keyed_by_corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_MARL_CACHE", str(tmp_path))
    assert cache_root() == tmp_path
    first = BM25Backend(TINY)
    assert first.built and first.index_dir.parent == tmp_path / "bm25"
    second = BM25Backend(TINY)
    assert not second.built and second.search("Korvath", 1) == first.search("Korvath", 1)
    other = Corpus("tiny", TINY.documents[:2])
    assert BM25Backend(other).index_dir != first.index_dir
    # A corrupt cache entry is rebuilt, never trusted.
    (first.index_dir / "params.index.json").write_text("{not json")
    third = BM25Backend(TINY)
    assert third.built and third.search("Korvath", 1)[0].title == "Korvath"


def test_recall_at_10_of_each_hop_gold_document(backend):
    wiki = build()
    rng = np.random.default_rng(7)
    found = total = 0
    for _ in range(150):
        q = wiki.sample_question(rng)
        for hop in q.hops:
            total += 1
            found += hop.support in [h.title for h in backend.search(hop.resolved, 10)]
    assert found / total >= 0.98


def test_tool_arguments_are_checked():
    assert check_arguments("search", {"query": " film "}) == {"query": "film", "k": 5}
    for tool, args, message in [
        ("browse", {}, "unknown tool"),
        ("search", [], "JSON object"),
        ("search", {}, "missing required"),
        ("search", {"query": "x", "n": 3}, "unknown argument"),
        ("search", {"query": "x", "k": "3"}, "integer"),
        ("search", {"query": "x", "k": True}, "integer"),
        ("fetch", {"url": 7}, "non-empty string"),
    ]:
        with pytest.raises(ToolInputError, match=message):
            check_arguments(tool, args)


def test_make_backend_and_results(backend):
    b = make_backend({**mini_wiki_spec(), "snippet_chars": 60})
    hit = b.search("Who directed The Copper Compass?", 1)[0]
    assert len(hit.snippet) <= 60
    with pytest.raises(ValueError, match="unknown search backend"):
        make_backend({"backend": "google"})
    hits = run_tool(backend, "search", {"query": "Who directed The Copper Compass?", "k": 2})
    text = ToolResult("search", {"query": "Who directed The Copper Compass?"}, hits=hits).render()
    assert text.startswith("Search results for 'Who directed The Copper Compass?':\n1. The Copper Compass\n   URL: wiki://")
    assert ToolResult("fetch", {"url": "u"}, "tool_error", error="unknown URL").render() == "Error (tool_error) from tool fetch: unknown URL"


FAKE_JAX_LAX = '''
import os
import numpy as np

PLATFORMS = []  # JAX_PLATFORMS at each top-k: bm25s runs one when it is imported


def top_k(scores, k):
    PLATFORMS.append(os.environ.get("JAX_PLATFORMS"))
    scores = np.asarray(scores)
    order = np.argsort(-scores)[:k]
    return scores[order], order
'''


@pytest.fixture
def fake_jax(tmp_path, monkeypatch):
    """A stand-in `jax` on the path, and bm25s imported afresh over it (both removed afterwards)."""
    import sys

    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text("from . import lax\n")
    (tmp_path / "jax" / "lax.py").write_text(FAKE_JAX_LAX)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    # A fresh process: neither bm25s nor JAX imported yet (another test may have imported the real ones).
    for name in [n for n in sys.modules if n.split(".")[0] in ("bm25s", "jax", "jaxlib")]:
        monkeypatch.delitem(sys.modules, name)
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_bm25s_imported_where_jax_is_installed_keeps_jax_off_the_gpu(fake_jax, tmp_path):
    """bm25s runs a JAX top-k at import; JAX must start on the CPU there (on a GPU it takes 75 % of the
    GPU's memory), and the variable that says so does not outlive the import."""
    import os
    import sys

    from llm_marl_envs.search.backends import _import_bm25s

    bm25s = _import_bm25s()
    assert bm25s.selection.JAX_IS_AVAILABLE and sys.modules["jax.lax"].PLATFORMS == ["cpu"]
    assert "JAX_PLATFORMS" not in os.environ
    # Ranking takes bm25s's numpy top-k, not JAX's, and gives the same documents.
    hits = BM25Backend(TINY, cache_dir=tmp_path / "index").search("Who directed Paper Garden?", 2)
    assert hits[0].title == "Paper Garden" and sys.modules["jax.lax"].PLATFORMS == ["cpu"]
