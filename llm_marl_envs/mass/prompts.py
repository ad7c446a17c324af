"""Prompts of the MASS roles (MHGPO appendix "Agent Prompts", after MMOA-RAG) and the single agent."""

from __future__ import annotations

REWRITER_SYSTEM = (
    "You are a professional assistant proficient in transforming complex or unclear questions into simpler, more "
    "searchable sub-questions. Please assist me in rewriting or breaking down the provided questions into "
    "sub-questions to make it easier to search for answers using a search engine. The rewritten sub-questions must "
    "have logical connections and dependencies, and should not be overly repetitive in meaning. Moreover, refrain "
    "from using vague demonstrative pronouns and similar expressions, and avoid duplicate sub-questions. Write at "
    "most 4 sub-questions (at most 300 characters in total). Output the sub-questions in the form of a string list, "
    "with the format: ### <query1>; <query2>; <query3>; ... ###"
)


def rewriter_user(question: str) -> str:
    return f"Original question is {question}"


def reranker_system(question: str) -> str:
    return (
        "You are a helpful, respectful, and honest assistant. Your task is to identify and output the IDs (such as 0, "
        "1, 2, etc.) of the candidate Documents that are useful for answering the given Question. Now, simply output "
        f"the IDs of those candidate Documents that can assist in answering the Question: {question}. Arrange them in "
        "the order where the more relevant documents are listed first. Write them as Document0,Document4,... "
        "(comma-separated, each ID once)."
    )


def documents_block(docs: list[tuple[str, str]], space: bool) -> str:
    """`Document0: {title: ..., snippet: ...}` lines (`Document 0` for the answerer, as in the paper)."""
    sep = " " if space else ""
    return "\n".join(f"Document{sep}{i}: {{title: {title}, snippet: {text}}}" for i, (title, text) in enumerate(docs))


def reranker_user(question: str, docs: list[tuple[str, str]]) -> str:
    block = documents_block(docs, space=False) if docs else "(no documents were retrieved: output None)"
    return f"Question is: {question}\n\n{block}\n\nDo not output anything else."


ANSWERER_SYSTEM = (
    "You are a helpful, respectful and honest assistant. Your task is to predict the answer to the question based on "
    "the given documents. If you don't know the answer to a question, please don't share false information. Answer "
    "the question as accurately as possible. Reply with the short answer only (a few words)."
)


def answerer_user(question: str, docs: list[tuple[str, str]]) -> str:
    block = documents_block(docs, space=True) if docs else "(no documents were selected)"
    return f"Question is: {question}\n\n{block}\n\nNow, answer the Question: {question}, based on the above Documents."


def single_system(max_turns: int, passages: int) -> str:
    if max_turns <= 1:  # the only turn is the final one: a search's passages could never be read
        return ("Answer the given question. No search is available, and this is your only turn: write the short "
                "answer (a few words) as <answer> answer </answer>, for example <answer> Beijing </answer>.")
    return (
        "Answer the given question. You can search a document collection as many times as you want, up to "
        f"{max_turns - 1} searches. To search, write <search> query </search>; the top {passages} passages are then "
        "returned between <information> and </information>. Reason about what you know and what is missing before "
        "each search. When you can answer, write the short answer (a few words) as <answer> answer </answer>, "
        "for example <answer> Beijing </answer>."
    )


def single_user(question: str) -> str:
    return f"Question: {question}"


FINAL_TURN_NOTE = "\n\n[This is your final turn: answer now with <answer> ... </answer>.]"


def information(docs: list[tuple[str, str]], final: bool) -> str:
    block = documents_block(docs, space=True) if docs else "(no results)"
    return f"<information>\n{block}\n</information>{FINAL_TURN_NOTE if final else ''}"


def format_error(error: str, final: bool) -> str:
    return f"Format error: {error}.{FINAL_TURN_NOTE if final else ''}"
