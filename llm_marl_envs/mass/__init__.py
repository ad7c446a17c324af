"""MASS (MHGPO / MMOA-RAG): rewriter -> retrieval -> reranker -> answerer. See `env.py`."""
