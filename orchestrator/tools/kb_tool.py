"""The `search_knowledge` tool: agents search the knowledge base the user built with `orchestrator kb add`.
Owns the tool's arguments and how hits are shown: path and line range first, so an agent can cite them or read on.
"""
from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from orchestrator.core.errors import ProviderError
from orchestrator.memory.knowledge import Hit, KnowledgeBase, KnowledgeError
from orchestrator.tools.base import Tool, ToolContext, ToolError

MAX_K = 10  # a chunk is up to ~1,500 characters: ten of them are already a long result


class SearchKnowledgeArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: str
    k: Annotated[int, msgspec.Meta(ge=1, le=MAX_K)] = 5
    mode: Literal["hybrid", "fts", "vector"] = "hybrid"


DESCRIPTION = (
    "Search the knowledge base (documents, notes and code the user indexed) for passages relevant to `query`. "
    "Write the query as a question or as key terms; exact identifiers (error codes, function names, config keys) "
    f"are matched literally. `k`: how many passages (default 5, at most {MAX_K}). `mode`: \"hybrid\" (default: "
    "keywords and meaning combined), \"fts\" (keywords only) or \"vector\" (meaning only). Each result shows the "
    "document path and its line range, then the passage with line numbers; cite them, or call read_file on the "
    "path for more context. Use it before answering questions about the user's documents or projects."
)


def _render(hit: Hit, n: int) -> str:
    numbered = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(hit.text.split("\n"), hit.start))
    return f"[{n}] {hit.path} lines {hit.start}-{hit.end} (score {hit.score:.2f})\n{numbered}"


def kb_tool(kb: KnowledgeBase) -> Tool:
    async def search_knowledge(args: SearchKnowledgeArgs, ctx: ToolContext) -> str:
        if not args.query.strip():
            raise ToolError("query is empty: say what to look for")
        try:
            hits = await kb.search(args.query, args.k, args.mode)
        except KnowledgeError as exc:
            raise ToolError(str(exc)) from None
        except ProviderError as exc:  # only in "vector" mode: "hybrid" falls back to keywords by itself
            raise ToolError(f"the embedding model failed ({exc}); try mode \"fts\"") from None
        if not hits:
            count = len(await kb.list_documents())
            if not count:
                return "The knowledge base is empty: no documents have been added."
            return (f"No passage matches {args.query!r} in {count} documents. Try other words or synonyms, "
                    "or fewer terms.")
        head = f"{len(hits)} passage{'s' if len(hits) > 1 else ''} for {args.query!r} ({args.mode}):"
        return "\n\n".join([head, *(_render(h, n) for n, h in enumerate(hits, 1))])

    return Tool("search_knowledge", DESCRIPTION, SearchKnowledgeArgs, search_knowledge, read_only=True)
