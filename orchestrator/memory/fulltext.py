"""The knowledge base's full-text pass on either store: what a query looks for (safe for any input), the words
a PostgreSQL chunk is indexed by, and the ranked query each store runs (FTS5 bm25, or tsvector with idf weights).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from orchestrator.store.sqlite import sqlite_utils

_STOPWORDS = frozenset("""
a about after all also am an and any are as at be been before but by can could did do does doing for from had has
have having he her here how i if in into is it its itself just me more most my no nor not of off on once only or
other our out over own same she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
""".split())
_ALNUM = re.compile(r"[^\W_]+")
_MAX_TERMS = 64

# Scripts written without spaces between words (and Hangul, whose words carry their particles).
_DENSE = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u1100-\u11ff\u3040-\u30ff\u3130-\u318f"
                    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


@dataclass(frozen=True)
class FullText:
    """What the full-text pass looks for: a MATCH expression for SQLite's word index (`words`), the same
    terms as runs of lower-case words for PostgreSQL's (`terms`), and the runs of space-less scripts."""

    words: str | None
    dense: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()


def fts_query(text: str) -> FullText | None:
    """The word index's MATCH expression, safe for any input: every whitespace-separated term becomes a
    quoted string (so `server-sent`, `a & b`, quotes and parentheses are text, never syntax), OR-ed so that
    a question need not contain every word; bm25 ranks chunks holding more and rarer terms first.
    Inside quotes FTS5 tokenizes as it indexed, so `max_inflight_requests` is the phrase "max inflight requests".
    Runs of Thai, Lao, Khmer, Burmese, Chinese, Japanese or Korean go to the trigram index as they are.
    None when nothing searchable is left (only stopwords or punctuation)."""
    text = text.replace("\0", " ")  # FTS5 reads a NUL as the end of the query string
    dense = tuple(dict.fromkeys(_DENSE.findall(text)))[:_MAX_TERMS]
    terms: dict[str, str] = {}
    for raw in _DENSE.sub(" ", text).split():
        words = [w.lower() for w in _ALNUM.findall(raw)]
        if not words or all(w in _STOPWORDS for w in words):
            continue
        terms.setdefault(" ".join(words), '"' + raw.replace('"', '""') + '"')
    kept = list(terms.items())[:_MAX_TERMS]
    query = " OR ".join(quoted for _, quoted in kept) or None
    return FullText(query, dense, tuple(index_words(key) for key, _ in kept)) if query or dense else None


# --- SQLite: FTS5 ------------------------------------------------------------------------------

# The file name is a column of its own and weighs more than the same word in the text.
_FTS = ("SELECT rowid FROM kb_chunks_fts WHERE kb_chunks_fts MATCH ? "
        "ORDER BY bm25(kb_chunks_fts, 2.0, 1.0), rowid LIMIT ?")
_TRI = ("SELECT rowid FROM kb_chunks_tri WHERE kb_chunks_tri MATCH ? "
        "ORDER BY bm25(kb_chunks_tri), rowid LIMIT ?")
_SHORT = "SELECT id FROM kb_chunks WHERE instr(lower(text), lower(?)) > 0 ORDER BY id LIMIT ?"


def _sqlite_ranked(db: sqlite_utils.Database, fts: FullText, depth: int) -> list[int]:
    ids = [r[0] for r in db.execute(_FTS, [fts.words, depth])] if fts.words else []
    for term in fts.dense:
        query, args = (_TRI, ['"' + term.replace('"', '""') + '"']) if len(term) >= 3 else (_SHORT, [term])
        ids += [r[0] for r in db.execute(query, [*args, depth]) if r[0] not in ids]
    return ids


# --- PostgreSQL: tsvector and pg_trgm ---------------------------------------------------------------

def index_words(text: str) -> str:
    """The words PostgreSQL indexes and queries, split as FTS5's unicode61 splits them: runs of letters and
    digits (so `max_inflight_requests` and `config.toml` are words, not one token of PostgreSQL's parser),
    lower case, Latin diacritics dropped. The 'english' configuration then stems them as porter does."""
    return " ".join(_fold(w) for w in _ALNUM.findall(text.lower()))


def _fold(word: str) -> str:
    if word.isascii():
        return word
    kept: list[str] = []
    for ch in unicodedata.normalize("NFD", word):
        if unicodedata.combining(ch) and kept and kept[-1] < "\u0370":
            continue  # a mark on a Latin letter (é → e); marks of other scripts are part of the word
        kept.append(ch)
    return unicodedata.normalize("NFC", "".join(kept))


# One row per chunk: its file name (weight A) and text (weight D) as stemmed words with their positions.
PG_WORDS = "setweight(to_tsvector('english', ?), 'A') || to_tsvector('english', ?)"

# BM25's shape without a BM25 in PostgreSQL: each query term (a phrase for `a_b-c`) weighs its inverse
# document frequency times ts_rank's saturating count of it in the chunk, the name counting twice the text.
# No length normalisation: chunks are already bounded, and dividing by 1 + log(length) found fewer answers
# (bench/README.md, "Knowledge base"). Every chunk holding any term is a candidate, as with FTS5's OR; they
# are first ranked by the idf of the terms they hold, which the index answers alone, and only the best
# few times `depth` are read for ts_rank (a question of common words has thousands of candidates).
# MATERIALIZED: each term's count runs once, not once per candidate row.
_PG_FTS = """
WITH terms AS MATERIALIZED (
    SELECT q, ln(1 + (total.n - d.df + 0.5) / (d.df + 0.5)) AS idf
    FROM (SELECT coalesce(sum(chunks), 0) AS n FROM kb_documents) AS total,
         unnest(?::text[]) AS t (phrase), phraseto_tsquery('english', phrase) AS q,
         LATERAL (SELECT count(*) AS df FROM kb_chunks WHERE words @@ q) AS d
    WHERE numnode(q) > 0),
  likely AS MATERIALIZED (
    SELECT c.id FROM terms JOIN kb_chunks c ON c.words @@ terms.q
    GROUP BY c.id ORDER BY sum(terms.idf) DESC, c.id LIMIT ?)
SELECT c.id FROM likely JOIN kb_chunks c USING (id) JOIN terms ON c.words @@ terms.q
GROUP BY c.id
ORDER BY sum(terms.idf * ts_rank('{0.5, 0, 0, 1}', c.words, terms.q, 0)) DESC, c.id
LIMIT ?"""
# × depth: on a large base the labelled questions kept their recall and nearly all of the top results of ranking
# every candidate, and the slowest searches became several times faster (bench/README.md has the figures).
_PG_SHORTLIST = 10

# A run of a space-less script is looked for as it is (LIKE, served by the pg_trgm index when the server has
# it): chunks holding it more often, then shorter ones, first. These scripts have no case to fold.
_PG_DENSE = """
SELECT id FROM kb_chunks WHERE text LIKE ?
ORDER BY (length(text) - length(replace(text, ?, ''))) / length(?) DESC, length(text), id LIMIT ?"""


def _pg_ranked(db: Any, fts: FullText, depth: int) -> list[int]:
    ids = [r[0] for r in db.execute(_PG_FTS, [list(fts.terms), _PG_SHORTLIST * depth, depth])] if fts.terms else []
    for term in fts.dense:  # _DENSE never matches LIKE's % and _, so the term needs no escaping
        ids += [r[0] for r in db.execute(_PG_DENSE, [f"%{term}%", term, term, depth]) if r[0] not in ids]
    return ids


def ranked(db: Any, fts: FullText | None, depth: int) -> list[int]:
    """The ids of the best `depth` chunks for `fts` on the store `db` belongs to, best first."""
    if fts is None:
        return []
    if isinstance(db, sqlite_utils.Database):
        return _sqlite_ranked(db, fts, depth)
    return _pg_ranked(db, fts, depth)
