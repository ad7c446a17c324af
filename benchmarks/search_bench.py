"""Search benchmark: BM25 recall@10 of each hop's gold document, search latency, MCP round-trip latency.

    python benchmarks/search_bench.py                       # print the tables
    python benchmarks/search_bench.py --write benchmarks.md # and replace the "search" section there

Recall: for test-split mini-wiki questions of 2, 3 and 4 hops, is the gold document of hop i (the
page of that hop's subject) among the top 10 BM25 results? Two queries: the hop's resolved
sub-question (what a decomposing agent searches) and the original multi-hop question (what an
agent that does not decompose searches). Latency: one `search` (k=5) or `fetch` call, measured by
the caller, for the backend called directly, the MCP server in-process, and the MCP server as a
subprocess over stdio (the environments' `transport` options). The oracles' exact match per hop
count on the offline backend closes the report.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import run_episode  # noqa: E402
from agents.oracle.deep_search import DeepSearchOracle  # noqa: E402
from agents.oracle.mass import MASSOracle  # noqa: E402
from llm_marl_envs import deep_search_v3, mass_v4  # noqa: E402
from llm_marl_envs.core.instances import draw_instance  # noqa: E402
from llm_marl_envs.search import BM25Backend, SearchRuntime, mini_wiki_spec  # noqa: E402
from llm_marl_envs.search.miniwiki import build  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", type=int, default=300, help="test questions per hop count for recall")
    p.add_argument("--calls", type=int, default=300, help="calls per latency measurement")
    p.add_argument("--episodes", type=int, default=200, help="oracle episodes per hop count")
    p.add_argument("--write", metavar="PATH", help="write the report into this markdown file (section 'search')")
    return p.parse_args()


# ---------------------------------------------------------------------------------------- recall
def test_questions(hops: int, n: int):
    wiki = build()
    return [draw_instance("deep_search", "test", seed, lambda rng: wiki.sample_question(rng, hops)) for seed in range(n)]


def recall_table(n: int) -> str:
    backend = BM25Backend(build().corpus)
    rows = ["| hops | query | hop 1 | hop 2 | hop 3 | hop 4 | all hops |", "|---|---|---|---|---|---|---|"]
    for hops in (2, 3, 4):
        qs = test_questions(hops, n)
        for label in ("resolved sub-question", "original question"):
            found = [[0] * hops for _ in qs]
            for qi, q in enumerate(qs):
                original = {h.title for h in backend.search(q.question, 10)} if label == "original question" else None
                for i, hop in enumerate(q.hops):
                    titles = original if original is not None else {h.title for h in backend.search(hop.resolved, 10)}
                    found[qi][i] = hop.support in titles
            per_hop = [sum(f[i] for f in found) / len(qs) for i in range(hops)]
            cells = [f"{r:.3f}" for r in per_hop] + ["-"] * (4 - hops)
            rows.append(f"| {hops} | {label} | " + " | ".join(cells) + f" | {sum(all(f) for f in found) / len(qs):.3f} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------- latency
def timed(fn, n: int) -> tuple[float, float]:
    fn(0)  # warm up
    samples = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - t) * 1e3)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


def latency_table(n: int) -> str:
    spec = mini_wiki_spec()
    wiki = build()
    docs = wiki.corpus.documents
    queries = [q.hops[0].resolved for q in test_questions(2, 50)]
    rows = ["| transport | first call (start) ms | search median ms | search p90 ms | fetch median ms | fetch p90 ms |",
            "|---|---|---|---|---|---|"]
    for transport in ("direct", "inprocess", "subprocess"):
        t = time.perf_counter()
        rt = SearchRuntime(spec, transport)
        first = rt.search(queries[0])
        start_ms = (time.perf_counter() - t) * 1e3
        assert first.ok, first.error
        s_med, s_p90 = timed(lambda i: rt.search(queries[i % len(queries)], 5), n)
        f_med, f_p90 = timed(lambda i: rt.fetch(docs[i % len(docs)].url), n)
        rt.close()
        rows.append(f"| {transport} | {start_ms:.0f} | {s_med:.2f} | {s_p90:.2f} | {f_med:.2f} | {f_p90:.2f} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------- oracles
def oracle_table(episodes: int) -> str:
    rows = ["| env | mode | 2 hops | 3 hops | 4 hops | ms / episode |", "|---|---|---|---|---|---|"]
    for name, module, oracle in (("deep_search", deep_search_v3, DeepSearchOracle()), ("mass", mass_v4, MASSOracle())):
        for mode in ("mas", "single"):
            cells, t = [], time.perf_counter()
            for hops in (2, 3, 4):
                env = module.env(mode=mode, hops=hops)
                wins = sum(run_episode(env, oracle, seed=s, split="test").success for s in range(episodes))
                cells.append(f"{wins / episodes:.3f}")
            ms = (time.perf_counter() - t) * 1e3 / (3 * episodes)
            rows.append(f"| {name} | {mode} | " + " | ".join(cells) + f" | {ms:.1f} |")
    return "\n".join(rows)


def guess_table(n: int) -> str:
    """A planner that answers without delegating: its best guesses on the fictional corpus."""
    wiki = build()
    train = [draw_instance("deep_search", "train", s, wiki.sample_question) for s in range(1000)]
    answers = [q.answer for q in train]
    common = max(set(answers), key=answers.count)
    test = [draw_instance("deep_search", "test", s, wiki.sample_question) for s in range(n)]
    em_common = sum(q.answer == common for q in test) / n
    em_start = sum(q.answer == q.hops[0].support for q in test) / n
    return (f"A planner that answers without delegating (mixed 2-4 hops, {n} test questions): exact match "
            f"{em_common:.3f} when it always answers the most common training answer ({common!r}), "
            f"{em_start:.3f} when it answers the entity named in the question.")


def main() -> None:
    args = parse_args()
    corpus = build().corpus
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    body = (
        f"Mini-wiki (default config): {len(corpus.documents)} documents; BM25 (bm25s, k1=1.5, b=0.75), titles "
        f"indexed twice. {args.questions} test questions per hop count. 1-minute load average at the start: "
        f"{load:.1f} (the latencies are wall-clock and grow with the machine's load).\n\n"
        "BM25 recall@10 of each hop's gold document:\n\n" + recall_table(args.questions) + "\n\n"
        f"Latency of one call seen by the caller ({args.calls} calls each; search k=5):\n\n" + latency_table(args.calls) + "\n\n"
        f"Oracle exact match on the test split ({args.episodes} episodes per hop count, offline BM25, direct transport):\n\n"
        + oracle_table(args.episodes) + "\n\n" + guess_table(600)
    )
    print(body)
    if args.write:
        from benchmarks._report import write_section

        command = "python benchmarks/search_bench.py" + (f" --questions {args.questions}" if args.questions != 300 else "") + \
            f" --write {args.write}"
        write_section(args.write, "search", "Search: BM25 recall, search and MCP latency", command, body)
        print(f"wrote section 'search' of {args.write}")


if __name__ == "__main__":
    main()
