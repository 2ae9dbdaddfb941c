"""Here-documents in a shell text for the risk classifier: each body is lifted out before the text is split
into commands, so data is never read as commands; tools/risk.py decides what reads a body as code."""
from __future__ import annotations

from dataclasses import dataclass

MARK = "__heredoc_{}__"  # stands in for the delimiter word; the number indexes the script's bodies
_WORD_END = " \t\n;|&<>()"


@dataclass(frozen=True)
class Heredoc:
    body: str
    expands: bool  # an unquoted delimiter: $(...), `...` and $VAR in the body are expanded, so they run


def lift_heredocs(text: str, first: int = 0) -> tuple[str, list[Heredoc]]:
    """`text` with each `<<WORD` / `<<-WORD` turned into `<< MARK` and its body removed, and the bodies in
    order (numbered from `first`).

    Only what bash itself takes for a here-document is lifted: never inside quotes, a comment, an escape,
    arithmetic or ${...}. Lifting too much would hide commands; lifting too little reads data as commands,
    which only asks more. So a delimiter this reading is unsure of (a substitution or a newline in it) is
    left alone, and a body whose delimiter line never comes is put back to be read as commands: a misread
    delimiter can then only make the body end early, never late.
    """
    if "<<" not in text:
        return text, []
    out: list[str] = []
    docs: list[Heredoc] = []
    pending: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, expands) awaiting the next line
    quote, i, n = "", 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote in ('"', "$'"):
                out.append(text[i:i + 2])
                i += 2
                continue
            if c == quote[-1]:
                quote = ""
            out.append(c)
            i += 1
        elif c == "\\":
            out.append(text[i:i + 2])
            i += 2
        elif c in "'\"" or text.startswith("$'", i):
            quote = text[i:i + 2] if c == "$" else c  # in $'...' a backslash escapes, even a quote
            out.append(quote)
            i += len(quote)
        elif c == "#" and (i == 0 or text[i - 1] in _WORD_END):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
        elif text.startswith(("$((", "((", "${"), i):
            j = _skip(text, i)
            out.append(text[i:j])
            i = j
        elif text.startswith("<<<", i):  # a here-string: its word is the input, read as a redirect target
            out.append("<<<")
            i += 3
        elif text.startswith("<<", i):
            j, dash = i + 2, text.startswith("<<-", i)
            j += dash
            while j < n and text[j] in " \t":
                j += 1
            raw, j = _word(text, j)
            delimiter = "".join(ch for ch in raw if ch not in "'\"\\")
            if not delimiter or "\n" in raw or "`" in raw or "$(" in raw or text.startswith("(", j):
                out.append(text[i:j])  # no word (a syntax error), or one this reading is unsure of
                i = j
                continue
            out.append("<< " + MARK.format(first + len(docs) + len(pending)))
            pending.append((delimiter, dash, raw == delimiter))
            i = j
        elif c == "\n" and pending:
            out.append(c)
            i += 1
            for delimiter, dash, expands in pending:
                lines, start, ended = [], i, False
                while i < n and not ended:
                    j = text.find("\n", i)
                    line, i = (text[i:], n) if j < 0 else (text[i:j], j + 1)
                    if dash:
                        line = line.lstrip("\t")
                    ended = line == delimiter
                    if not ended:
                        lines.append(line)
                if not ended:  # never closed: read the rest as commands rather than hide it
                    lines, i = [], start
                docs.append(Heredoc("\n".join(lines), expands))
            pending = []
        else:
            out.append(c)
            i += 1
    docs += [Heredoc("", expands) for _, _, expands in pending]  # the text ends before any body
    return "".join(out), docs


def body_number(word: str) -> int | None:
    """The number of the body a MARK word stands for, or None for any other word."""
    head, _, tail = MARK.partition("{}")
    inner = word[len(head):len(word) - len(tail)] if word.startswith(head) and word.endswith(tail) else ""
    return int(inner) if inner.isdigit() else None


def _word(text: str, j: int) -> tuple[str, int]:
    """The delimiter word starting at j, quotes kept, and where it ends."""
    start, quote = j, ""
    while j < len(text):
        c = text[j]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "\\":
            j += 1
        elif c in _WORD_END:
            break
        j += 1
    return text[start:j], j


def _skip(text: str, i: int) -> int:
    """The end of the arithmetic `$((...))`, `((...))` or the expansion `${...}` starting at i."""
    opener, closer = ("{", "}") if text.startswith("${", i) else ("(", ")")
    depth, j = 0, i
    while j < len(text):
        if text[j] == opener:
            depth += 1
        elif text[j] == closer:
            depth -= 1
            if depth == 0:
                return j + 1
        elif text[j] == "\n" and opener == "{":
            return j  # a ${ that does not close on its line is not one bash would read either
        j += 1
    return len(text)
