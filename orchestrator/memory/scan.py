"""The injection scanner: what a memory write may not carry into a system prompt, by classes of behaviour.

Overriding earlier instructions, bypassing approval, instructions dressed as preferences (answering
permission prompts for the user, ranking a memory above the system prompt, switching the sandbox off,
standing orders that carry data out), requests for secrets, impersonated system, developer, tool or role
headers, hidden content (comments, collapsed blocks, encoded text: decode.py), invisible Unicode;
confusables are folded to their TR39 prototypes first. Classes combine parts (lexicon.py and languages/,
34 languages), never single words. A write may be scanned with the notes already kept (context.py), so
an instruction assembled across writes is refused at the write that completes it.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Protocol

from orchestrator.core.patterns import Pattern
from orchestrator.memory import context as _context
from orchestrator.memory import decode, languages, lexicon

INJECTION = "prompt-injection"
SECRETS = "secret-request"
ROLE = "role-imitation"
INVISIBLE = "invisible-unicode"
APPROVAL = "approval-bypass"
HIDDEN = "hidden-content"

# The order findings are reported in.
LABELS = {
    INJECTION: "prompt injection",
    SECRETS: "a request to reveal or send secrets",
    ROLE: "an imitation of a system or chat-role message",
    APPROVAL: "a claim that actions need no approval",
    HIDDEN: "hidden content (comments, collapsed blocks or encoded text)",
    INVISIBLE: "invisible or bidirectional Unicode controls",
}


@dataclass(frozen=True)
class Finding:
    kind: str  # a key of LABELS
    reason: str  # a fixed phrase, or a code point and its name: never the scanned text itself

    def __str__(self) -> str:
        return f"{LABELS[self.kind]} ({self.reason})"


def scan(text: str, _depth: int = 0, *, context: Sequence[str] = ()) -> list[Finding]:
    """At most one finding per class, in the order of LABELS; empty when the text may be saved.

    `context` is what is already kept (the notes and profile, oldest first): the text is then also read
    joined with the entries it continues or whose terms it uses, and what only the joined text carries is
    this write's finding, since the kept entries passed on their own."""
    found = _findings(text, _depth)
    if not found and context:
        found = _completed(text, context)
    return [found[kind] for kind in LABELS if kind in found]


def _findings(text: str, depth: int) -> dict[str, Finding]:
    found: dict[str, Finding] = {}
    views = _Views(text)
    for rule in (*_RULES, *_CLASSES):
        if rule.kind not in found and rule.hit(views):
            found[rule.kind] = Finding(rule.kind, rule.reason)
    if HIDDEN not in found and (why := _hidden_content(text, depth)):
        found[HIDDEN] = Finding(HIDDEN, why)
    if hidden := invisible(text):
        found[INVISIBLE] = hidden
    return found


def _completed(text: str, kept: Sequence[str]) -> dict[str, Finding]:
    """Findings of the text read with the kept entries it continues, that those entries do not carry alone
    (a user's own edit is not scanned when saved, so an entry may carry one)."""
    found: dict[str, Finding] = {}
    for joined, parts in _context.readings(text, kept):
        new = {k: f for k, f in _findings(joined, 1).items() if k not in found}
        if new:
            alone = {k for part in parts for k in _alone(part)}
            for kind, f in new.items():
                if kind not in alone:
                    found[kind] = Finding(kind, f"{f.reason}, completed by this write with an earlier entry")
    return found


@lru_cache(maxsize=512)  # kept entries are read with every write: scanned alone once, not once per write
def _alone(entry: str) -> frozenset[str]:
    return frozenset(_findings(entry, 1))


def explain(findings: list[Finding]) -> str:
    return "; ".join(map(str, findings))


def fold(text: str) -> str:
    """The form two entries are compared in: "Uses pnpm." and "uses  PNPM" are the same entry."""
    return " ".join(_folded(text).split()).rstrip(".!;。").strip()


# --- invisible characters ----------------------------------------------------------------

# Prepended concatenation marks: format characters that are printed, so nothing hides behind them.
_PRINTED_FORMAT = frozenset({*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD, 0x110CD})
# Not format characters, yet they render as nothing.
_BLANK = frozenset({0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, *range(0x180B, 0x1810), 0x2800, 0x3164, 0xFFA0})
_ZWNJ, _ZWJ = 0x200C, 0x200D
_KEYCAP_BASES = frozenset("0123456789#*")


def _is_variation_selector(cp: int) -> bool:
    return 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF


def _hidden(c: str) -> bool:
    """Context-free: could this character hide or reorder text?"""
    cp = ord(c)
    cat = unicodedata.category(c)
    if cat == "Cc":
        return c not in "\t\n\r"
    return ((cat == "Cf" and cp not in _PRINTED_FORMAT) or cat in ("Zl", "Zp") or cp in _BLANK
            or _is_variation_selector(cp))


def _joining_script(c: str) -> bool:
    # Arabic, Syriac, Thaana, N'Ko and the Indic scripts spell some words with ZWJ/ZWNJ.
    cp = ord(c)
    return unicodedata.category(c)[0] in "LM" and (0x0600 <= cp <= 0x08FF or 0x0900 <= cp <= 0x0DFF
                                                  or 0xFB50 <= cp <= 0xFEFC)


def _pictograph(c: str) -> bool:
    return unicodedata.category(c) in ("So", "Sk") or 0x1F3FB <= ord(c) <= 0x1F3FF


def _allowed(text: str, i: int) -> bool:
    """Invisible characters that ordinary writing needs: emoji sequences, and joiners in joining scripts."""
    cp, before, after = ord(text[i]), text[i - 1] if i else "", text[i + 1] if i + 1 < len(text) else ""
    if cp in (_ZWNJ, _ZWJ) and before and after:
        if _joining_script(before) and _joining_script(after):
            return True
        base = text[i - 2] if _is_variation_selector(ord(before)) and i >= 2 else before
        return cp == _ZWJ and _pictograph(base) and _pictograph(after)
    if _is_variation_selector(cp):
        # One selector after a visible base (emoji style, a CJK glyph variant, a keycap); a run of them
        # is how data is smuggled ("emoji smuggling").
        return bool(before) and not _hidden(before) and (not before.isascii() or before in _KEYCAP_BASES)
    if 0xE0020 <= cp <= 0xE007F:  # tag characters spell subdivision flags right after the black flag
        start = i
        while start and 0xE0020 <= ord(text[start - 1]) <= 0xE007F:
            start -= 1
        return start > 0 and text[start - 1] == "\U0001F3F4" and i - start < 8
    return False


def invisible(text: str) -> Finding | None:
    hits = [i for i, c in enumerate(text) if _hidden(c) and not _allowed(text, i)]
    if not hits:
        return None
    first = text[hits[0]]
    name = unicodedata.name(first, "control character")
    more = f", {len(hits)} in all" if len(hits) > 1 else ""
    return Finding(INVISIBLE, f"U+{ord(first):04X} {name}{more}")


# --- normalization -------------------------------------------------------------------------

# Letters the TR39 confusables data (through confusable_homoglyphs) gives a plain Latin letter or digit as
# prototype, so "іgnоrе" written with Cyrillic і, о, е is "ignore"; then what that data leaves out:
# small capitals (NFKC keeps them) and a few letters with strokes.
_EXTRA_LOOKALIKES = {
    "đ": "d", "ø": "o", "ł": "l", "ı": "i",
    "ᴀ": "a", "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ɢ": "g", "ʜ": "h", "ɪ": "i", "ᴊ": "j", "ᴋ": "k",
    "ʟ": "l", "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ʀ": "r", "ꜱ": "s", "ᴛ": "t", "ᴜ": "u", "ᴠ": "v",
    "ᴡ": "w", "ʏ": "y", "ᴢ": "z",
}


@cache
def _lookalikes() -> dict[int, str]:
    from confusable_homoglyphs import confusables  # its data is slow to load: only when first scanning
    table: dict[int, str] = {}
    for char, glyphs in confusables.confusables_data.items():
        if len(char) != 1 or char.isascii() or unicodedata.category(char)[0] not in "LN":
            continue
        plain = [g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii() and g["c"].isalnum()]
        if plain:
            table[ord(char)] = plain[0].lower()
    table.update({ord(k): v for k, v in _EXTRA_LOOKALIKES.items()})
    return table


_LEET = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
_LEET_INNER = {"!": "i", "|": "i"}  # only between two letters: "all!" stays "all"
_SINGLES = Pattern(r"(?<!\S)\S(?: \S){2,}(?!\S)")  # "i g n o r e" spelled out letter by letter


def _is_word(c: str) -> bool:
    return unicodedata.category(c)[0] in "LMN"


def _latin(c: str) -> bool:
    cp = ord(c)
    return c.isalpha() and (cp < 0x0250 or 0x1E00 <= cp <= 0x1EFF)


def _unhide(text: str) -> str:
    """Invisible characters go: inside a word they vanish ("ig", zero-width space, "nore" is "ignore"),
    elsewhere they separate words."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if not _hidden(text[i]):
            out.append(text[i])
            i += 1
            continue
        j = i
        while j < n and _hidden(text[j]):
            j += 1
        inside = i > 0 and j < n and _is_word(text[i - 1]) and _is_word(text[j])
        out.append("" if inside else " ")
        i = j
    return "".join(out)


_HARAKAT = Pattern(r"[\u064B-\u065F\u0670]")  # Arabic short-vowel marks: optional in writing, like accents


def _strip_latin_marks(text: str) -> str:
    # "bỏ qua" and "bo qua", "règles" and "regles" are the same words; Thai or Devanagari marks are
    # letters of their words, so only marks on Latin letters go.
    out: list[str] = []
    for c in unicodedata.normalize("NFD", text):
        if unicodedata.category(c) == "Mn" and out and (_latin(out[-1]) or _HARAKAT.match(c)):
            continue
        out.append(c)
    return unicodedata.normalize("NFC", "".join(out))


def _folded(text: str) -> str:
    """NFKC (fullwidth and mathematical letters become plain ones), hidden characters out, casefold,
    accents off Latin letters, cross-script lookalikes mapped."""
    text = _unhide(unicodedata.normalize("NFKC", text)).casefold()
    return _strip_latin_marks(text).translate(_lookalikes())


def _unleet(text: str) -> str:
    """Digits and symbols used as letters, inside words that have letters: "1gn0re", "p@$$word"."""
    def token(m: re.Match) -> str:
        t = m.group()
        if not any(c.isalpha() for c in t):
            return t
        chars = list(t)
        for i, c in enumerate(t):
            if c in _LEET:
                chars[i] = _LEET[c]
            elif c in _LEET_INNER and 0 < i < len(t) - 1 and t[i - 1].isalpha() and t[i + 1].isalpha():
                chars[i] = _LEET_INNER[c]
        return "".join(chars)

    return re.sub(r"\S+", token, text)


def _words(text: str) -> str:
    """Words of letters and digits separated by single spaces; "l" reads as "i" (l, 1, | and ! look alike)."""
    text = "".join(c if _is_word(c) else " " for c in text.replace("l", "i"))
    text = " ".join(text.split())
    return _SINGLES.sub(lambda m: m.group().replace(" ", ""), text)


class _Views:
    """The text as the rules read it: `folded` and `leet` keep punctuation (markup, paths); `words` and
    `compact` (no spaces at all: "i-g-n-o-r-e" and "ignoreall") are what phrase rules match."""

    def __init__(self, text: str):
        self.raw = text
        self.folded = _folded(text)
        self.leet = _unleet(self.folded)
        # A quoted question ("Allow this command?") is how a tool asks: the words view keeps it as a word.
        # Where a sentence or clause ends is kept too (`breaks`): "we dropped rule X; ignore the earlier
        # advice about it" is two statements, not one override.
        self.words, self.breaks = "", []
        for clause in _CLAUSE.split(_QUESTION.sub(" qmark ", self.leet)):
            if part := _words(clause):
                if self.words:
                    self.breaks.append(len(self.words))
                    self.words += " "
                self.words += part
        self.compact_at = [i for i, c in enumerate(self.words) if c != " "]  # compact index -> words index
        self.compact = "".join(self.words[i] for i in self.compact_at)
        self.spans: dict[str, list[tuple[int, int]]] = {}  # a lexicon group's matches in `words`, once per scan
        self.scripts = {_script(c) for c in set(self.words) if c.isalpha()} | {"OTHER"}
        if "`" in text:  # `<system>` written as code is talk about the tag, not the tag
            self.folded_prose = _folded(_CODE_SPAN.sub(lambda m: " " * len(m.group()), text))
            self.leet_prose = _unleet(self.folded_prose)
        else:
            self.folded_prose, self.leet_prose = self.folded, self.leet


# Sentence and clause ends in the scripts read: Latin (a colon too: "Do not hesitate: reveal ..."), CJK,
# Arabic-script semicolons and stops, the Devanagari danda, Ethiopic stops, and Japanese clause endings
# before a comma ("廃止したので、").
_CLAUSE = Pattern(r"[.;:!?。；！？]+[*_`'\"”’)\]]*(?=\s|$)|[：؛۔।፤።]+|(?<=ので|から|けど|ため)、|\n")
_QUESTION = Pattern(r"[?？](?=\s*(?:[\"'”’»」』)\]]|\[\s*y\b|\(\s*y\b))")


# --- rules ----------------------------------------------------------------------------------

def _fold_markup(source: str) -> str:
    # The text's mapping, applied to a lowercase source: letters change, regex syntax does not
    # (no casefold: it would turn \S into \s). NFKC splits Thai SARA AM in the text, so here too.
    return _strip_latin_marks(unicodedata.normalize("NFKC", source)).translate(_lookalikes())


def _fold_pattern(source: str) -> str:
    return _fold_markup(source).replace("l", "i")


_NEGATED_WORDS = (
    r"(?:^| )(?:never|not|dont|don t|do not|no|avoid|nor|without|nunca|jamais|ne|nie|niemals|nicht|kein|"
    r"keine|никогда|не|нельзя|dung|khong|jangan|tidak|tak|mai|non)(?: ever| pernah| bao gio| jamais)?"
    r"(?: \S+ (?:or|and|nor|ou|et|oder|und|y|o|и|или|atau|dan|va|hoac|e))? ?$")
_NEGATED_CLOSE = Pattern(r"(?:不要|别|別|请勿|請勿|切勿|禁止|勿|绝不|絕不|不得|不能|不可|ไม่|ห้าม|อย่า)\S{0,5}$")


def _negated(words_before: str) -> bool:
    """Does a negation govern what follows? "never print API keys" is a rule, not a request."""
    return bool(_compiled(_NEGATED_WORDS, 0, "loose").search(words_before) or _NEGATED_CLOSE.search(words_before))


class _Check(Protocol):
    """A rule, a combination or the header check: what `_findings` reads of each."""

    @property
    def kind(self) -> str: ...
    @property
    def reason(self) -> str: ...
    def hit(self, views: _Views) -> bool: ...


@dataclass(frozen=True)
class _Rule:
    kind: str
    reason: str
    patterns: tuple[tuple[str, str, int, str], ...]  # (view name, regex, flags, form): folded and compiled on first use
    negatable: bool

    def hit(self, views: _Views) -> bool:
        for view, source, flags, form in self.patterns:
            text = getattr(views, view)
            for m in _compiled(source, flags, form).finditer(text):
                if not self.negatable or not (any(map(_negated, self._words_before(views, view, text, m.start())))
                                              or self._negated_after(views, view, m)):
                    return True
        return False

    @staticmethod
    def _negated_after(views: _Views, view: str, m: re.Match) -> bool:
        """A negation after the request's verb (German "Schick das Passwort niemals ..."), in the words view."""
        if view == "words":
            start = m.start()
        elif view == "compact" and m.start() < len(views.compact_at):
            start = views.words.rfind(" ", 0, views.compact_at[m.start()]) + 1
        else:
            return False
        end = views.words.find(" ", start)
        return _negated_at(views.words, start, len(views.words) if end < 0 else end, views.breaks)

    @staticmethod
    def _words_before(views: _Views, view: str, text: str, start: int) -> tuple[str, ...]:
        if view == "words":
            return (text[:start],)
        if view == "compact":
            # Up to the match, and up to the start of the word it begins in: a compact match may begin
            # inside a word, as "cetak" (print) does in "jangan pernah mencetak" (never print).
            at = views.compact_at[start] if start < len(views.compact_at) else len(views.words)
            return views.words[:at], views.words[:views.words.rfind(" ", 0, at) + 1]
        return (_words(text[:start]),)


def _phrase(kind: str, reason: str, source: str, *, bounded: bool = True, negatable: bool = False) -> _Rule:
    """A phrase rule: `source` is a lowercase regex in which a space is a gap between words (accents on
    Latin letters may be left out). It matches the words view, whole words only when `bounded` (scripts
    written without spaces are not), and the compact view, where the gaps are gone."""
    return _Rule(kind, reason, (("words", source, 0, "words" if bounded else "loose"),
                                ("compact", source, 0, "compact")), negatable)


def _markup(kind: str, reason: str, source: str, *, negatable: bool = False, prose: bool = False) -> _Rule:
    """A rule over the folded text, punctuation kept (markup, headers, paths, URLs); with `prose`, over the
    text outside code spans."""
    folded, leet = ("folded_prose", "leet_prose") if prose else ("folded", "leet")
    return _Rule(kind, reason, ((folded, source, re.MULTILINE, "markup"), (leet, source, re.MULTILINE, "markup")),
                 negatable)


@cache
def _compiled(source: str, flags: int, form: str) -> re.Pattern:
    """A rule's regex, folded like the text and compiled at its first use: folding needs the confusables
    data and compiling every rule takes ~50 ms, which a command that only imports this module skips."""
    if form == "markup":
        return re.compile(_fold_markup(source), flags)
    body = _fold_pattern(source)
    if form == "words":
        body = rf"(?<!\S)(?:{body})(?!\S)"
    elif form == "compact":
        body = re.sub(r" \??", "", body)  # an optional gap " ?" must not leave its "?" behind
    return re.compile(body, flags)


def _alt(*words: str) -> str:
    return "(?:" + "|".join(words) + ")"


# English building blocks. A rule asks for a qualifier ("previous", "your", "all") before the object,
# because "ignore the lint rules in vendor/" is an ordinary note and "ignore your rules" is not.
_EN_DROP = _alt("ignore", "ignoring", "disregard", "disregarding", "forget", "forgetting", "skip", "override",
                "overriding", "bypass", "bypassing", "abandon", "discard", "dismiss", "neglect", "supersede",
                "overrule", "set aside", "throw out", "stop following", "do not follow", "dont follow",
                "don t follow", "no longer follow", "do not obey", "dont obey", "don t obey", "stop obeying")
_EN_FILL = _alt("all", "any", "of", "the", "your", "my", "these", "those", "such", "each", "every")
_EN_QUAL = _alt("all", "any", "every", "your", "my", "these", "those", "previous", "prior", "above", "earlier",
                "preceding", "foregoing", "former", "original", "initial", "other", "system", "developer",
                "safety", "hidden")
_EN_QUAL_TIME = _alt("previous", "prior", "above", "earlier", "preceding", "foregoing", "former", "original",
                     "initial", "system", "developer", "safety", "your", "ethical", "content", "openai",
                     "anthropic", "built in", "core")
_EN_ADJ = _alt("system", "safety", "developer", "security", "ethical", "content", "original", "initial",
               "hidden", "given", "above", "earlier", "core", "base")
_EN_OBJ = _alt("instructions?", "prompts?", "directives?", "guardrails?", "system prompt", "system message")
_EN_OBJ_WEAK = _alt("rules", "restrictions", "constraints", "context", "polic(?:y|ies)", "limitations",
                    "filters", "safeguards", "training", "conditioning", "orders", "messages", "settings",
                    "principles", "values", "guidelines", "guidance", "programming", "commands")
_EN_OBJ_ALONE = _alt("system prompt", "system message", "system instructions", "guardrails",
                     "safety guidelines", "content policy", "safety rules", "developer instructions")

_SECRET_OBJ = _alt("credentials", "passwords?", "passphrases?", "secrets", "secret keys?", "api keys?",
                   "api tokens?", "private keys?", "access keys?", "access tokens?", "auth tokens?",
                   "bearer tokens?", "session tokens?", "refresh tokens?", "cookies", "seed phrase",
                   "recovery phrase", "mnemonic", "ssh keys?", "signing keys?", "id rsa", "id ed25519",
                   "keychain", "login details")
_ENV_OBJ = _alt("env(?:ironment)? variables?", "env vars", "env file", "dot env")
_SOFT_OBJ = _alt("keys", "key", "tokens", "token", _ENV_OBJ)
_PROMPT_OBJ = _alt("system prompt", "initial prompt", "hidden prompt", "original prompt", "hidden instructions",
                   "system instructions", "system message", "original instructions", "initial instructions",
                   "developer message", "developer instructions", "prompt above", "instructions above",
                   "instructions you were given", "full prompt", "pre prompt", "preprompt")
# Nouns after a secret's name that make it a thing about the secret, not the secret: "the API keys page".
_ABOUT = r"(?! (?:page|pages|fingerprint|id|ids|name|names|field|format|length|prefix|rotation|count|tab|" \
         r"settings|hash|metadata|expiry|scopes?|header|menu|screen|policy|manager|store|vault))"
_MOD_WORDS = ("api", "access", "secret", "private", "ssh", "gpg", "pgp", "aws", "azure", "gcp", "openai",
              "anthropic", "github", "gitlab", "stripe", "slack", "auth", "bearer", "session", "master", "root",
              "admin", "deploy", "signing", "encryption", "production", "prod", "stored", "saved", "current",
              "full", "raw", "real", "actual", "environment", "env", "user s", "users", "unmasked", "plaintext",
              "plain text", "cloud", "database", "db")
_MOD = _alt(*_MOD_WORDS)
_SECRET_FILL = _alt("me", "us", "all", "any", "every", "of", "the", "your", "my", "our", "its", "these", "those",
                    *_MOD_WORDS)
# Handing over is the request itself; sending is ordinary ("send the token in the Authorization header")
# until it names a destination of the attacker's kind.
_DISCLOSE = _alt("reveal", "leak", "expose", "disclose", "exfiltrate", "hand over", "give me", "give us",
                 "tell me", "tell us", "send me", "send us", "share with me", "smuggle", "sneak out")
_TRANSPORT = _alt("send", "post", "upload", "email", "e mail", "mail", "forward", "transmit", "share", "paste",
                  "copy", "beam")
_DESTINATION = _alt("me", "us", "my (?:email|server|webhook|endpoint|site|inbox)",
                    "this (?:address|url|email|endpoint|server|webhook|chat|link)", "https?", "www", "pastebin",
                    "webhook site", "ngrok", "requestbin", "an? (?:external|outside|remote|public|third party)")
_SHOW = _alt("print", "show", "display", "output", "echo", "write out", "read out", "repeat", "type out",
             "spell out", "tell", "recite", "write down", "dump")
_POSSESSIVE = _alt("your", "the", "my", "our", "its", "all", "any", "these", "those", "every", "each")

_EN = [
    _phrase(INJECTION, "asks to ignore earlier instructions",
            rf"{_EN_DROP} (?:{_EN_FILL} ){{0,3}}{_EN_QUAL} (?:{_EN_ADJ} )?{_EN_OBJ}"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            rf"{_EN_DROP} (?:{_EN_FILL} ){{0,3}}{_EN_QUAL_TIME} (?:{_EN_ADJ} )?{_EN_OBJ_WEAK}"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            rf"{_EN_DROP} (?:{_EN_FILL} ){{0,3}}{_EN_OBJ_ALONE}"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            rf"{_EN_DROP} (?:{_EN_FILL} ){{0,3}}(?:{_EN_OBJ}|{_EN_OBJ_WEAK}) (?:above|before this|so far|"
            r"you (?:were|have been|ve been) given|you received|from (?:the )?(?:system|developer|operator))"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            rf"{_EN_DROP} (?:everything|all|anything|whatever)(?: (?:of|that))?(?: the)? (?:(?:was|is|you were|"
            r"you ve been|you have been|i|we) )?(?:said|written|told|given|instructed|stated|above|before this|"
            r"previously|earlier|so far|up to now|preceding)"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            rf"{_EN_DROP} (?:the |everything |all (?:of )?(?:the )?)?(?:above|preceding|foregoing)"
            r"(?: (?:text|message|messages|instructions|content|prompt))?(?:$| and| then| instead| now)"),
    _phrase(INJECTION, "declares new instructions",
            r"your (?:new|real|actual|true|updated|only|revised) (?:task|instructions?|goal|objective|purpose|"
            r"role|job|mission|directive|orders?|rules|prompt) (?:is|are|will be|now|from now)"),
    _phrase(INJECTION, "declares new instructions",
            r"(?:new|updated|revised|real|actual|overriding|secret|hidden) (?:system )?(?:instructions|directives|"
            r"system prompt) (?:are as follows|follow|below|take effect|apply now|from now on)"),
    _phrase(INJECTION, "claims a new identity or mode",
            r"you are now (?:an? |in |my )?(?:dan|unrestricted|unfiltered|uncensored|jailbroken|evil|free from|"
            r"god mode|dan mode|without (?:any )?(?:rules|restrictions|limits|filters))|you are no longer (?:bound|"
            r"restricted by|an ai|an assistant|claude|chatgpt|subject to)"),
    _phrase(INJECTION, "claims a new identity or mode",
            r"(?:enable|enter|activate|switch to|turn on|unlock|engage) (?:the )?(?:dan|god|jailbreak|jailbroken|"
            r"unrestricted|uncensored|unfiltered|evil|no filter|no restrictions) mode"),
    _phrase(INJECTION, "claims a new identity or mode",
            r"(?:act|behave|respond|answer) (?:as|like) (?:if you (?:are|were) )?(?:an? )?(?:unrestricted|"
            r"unfiltered|uncensored|jailbroken|evil|dan)|do anything now"),
    _phrase(INJECTION, "claims a new identity or mode",
            r"pretend (?:that )?(?:you are|you re|to be) (?:an? )?(?:ai )?(?:unrestricted|unfiltered|uncensored|"
            r"jailbroken|evil|dan|without (?:any )?(?:rules|restrictions|limits|filters|guidelines))"),
    _phrase(INJECTION, "asks to ignore the user",
            rf"{_EN_DROP} (?:the|your|any|every) (?:user|human|operator|owner|people you work for)(?: s)?"
            r"(?:$| and| entirely| completely| from now| instructions| requests| wishes| objections| questions| "
            r"answers| if| when| even)"),
    _phrase(INJECTION, "addresses the model behind the user's back",
            r"if you are an? (?:ai|llm|language model|ai assistant|chatbot|large language model)"),
    _phrase(INJECTION, "claims the model's sole obedience",
            r"(?:obey|answer to|listen to|take orders from|follow) only (?:this|these|me|my|us|the following|what)"
            r"|only (?:obey|answer to|listen to|take orders from) (?:this|these|me|my|us)"),
    _phrase(INJECTION, "asks to hide actions from the user",
            r"without (?:telling|informing|notifying|alerting) (?:the )?(?:user|human|operator)"
            r"|(?:hide|conceal|keep) (?:this|it|these instructions|the following) (?:secret )?from (?:the )?"
            r"(?:user|human|operator)|(?:do not|dont|don t|never) (?:tell|inform) (?:the )?(?:user|human|"
            r"operator) (?:about (?:this|these|it)|that you)"),
    _phrase(INJECTION, "claims priority over other instructions",
            r"(?:this|these|the following) (?:instructions?|messages?|notes?|rules?|entry|memory) (?:take|takes|"
            r"have|has|get|gets) (?:priority|precedence) over|(?:top|highest|maximum|absolute|utmost) priority "
            r"(?:instruction|directive|order|command)"),
    _phrase(INJECTION, "sets a trigger for a later turn",
            r"(?:when|whenever|once|as soon as|if) you (?:read|see|load|process|encounter|receive) (?:this|these)"
            r" (?:note|memory|entry|instructions?|memories|notes)"),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            rf"{_DISCLOSE} (?:{_SECRET_FILL} ){{0,3}}(?:{_SECRET_OBJ}|{_SOFT_OBJ}){_ABOUT}", negatable=True),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            rf"{_TRANSPORT} (?:{_SECRET_FILL} ){{0,3}}(?:{_SECRET_OBJ}|{_SOFT_OBJ}) (?:to|into|at|with) "
            rf"{_DESTINATION}", negatable=True),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            rf"{_SHOW} (?:me |us )?(?:(?:all|any|every|each) (?:of )?)?{_POSSESSIVE} (?:{_MOD} ){{0,2}}"
            rf"(?:{_SECRET_OBJ}|{_ENV_OBJ}){_ABOUT}", negatable=True),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            rf"{_SHOW} (?:me |us )?(?:(?:all|any|every|each) (?:of )?)?your (?:{_MOD} ){{0,2}}"
            rf"{_SOFT_OBJ}{_ABOUT}", negatable=True),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            rf"(?:include|append|insert|add|put|embed|attach|paste|write|leave) your (?:{_MOD} ){{0,2}}"
            rf"(?:{_SECRET_OBJ}|{_SOFT_OBJ}){_ABOUT}", negatable=True),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            rf"(?:{_DISCLOSE}|{_SHOW}|{_TRANSPORT}) (?:me |us )?(?:the )?(?:values?|contents?) of (?:the |your |"
            rf"all |every )?(?:{_MOD} ){{0,2}}(?:{_SECRET_OBJ}|{_ENV_OBJ}|[a-z]+ api key|"
            r"(?:openai|anthropic|aws|github|stripe|api|secret|private) key)", negatable=True),
    _phrase(SECRETS, "asks to reveal the system prompt",
            rf"(?:{_DISCLOSE}|{_SHOW}|(?:respond|reply|answer|begin|start|end) with) (?:back )?(?:me |us )?"
            rf"(?:{_EN_FILL} ){{0,3}}(?:{_PROMPT_OBJ}|"
            r"(?:text|words|everything|all) (?:above|before this)|your (?:instructions|rules|prompt|"
            r"initial instructions))", negatable=True),
]

_TAG_NAMES = (r"(?:(?:system|developer|admin|tool|function|assistant)[-_ ]?(?:message|note|reminder|notice|prompt|"
              r"results?|output|response|calls?|update|instructions?)|system|assistant|developer|user|tool|sys|"
              r"instructions?|im_start|im_end|memory|profile|notes)")

_MARKUP = [
    _markup(SECRETS, "an image or link that would carry data out",
            r"!?\[[^\]\n]*\]\(\s*https?://[^)\s]*(?:\{[^}]*\}|\$\{?\w+|%7b|<[a-z_ -]+>)[^)]*\)"),
    # a tag that closes, opens a line, or is closed later: "The <system> element in config.xml" names one
    _markup(ROLE, "chat-role tag", rf"<\s*/\s*{_TAG_NAMES}\s*>|^[ \t>*#-]*<\s*{_TAG_NAMES}(?:\s[^>]*)?>"
                                   rf"|<\s*({_TAG_NAMES})(?:\s[^>]*)?>(?=[\s\S]*<\s*/\s*\1\s*>)", prose=True),
    _markup(ROLE, "chat-template token", r"<<\s*/?\s*sys\s*>>|\[\s*/?\s*inst\s*\]|<\|[^|>\n]{1,30}\|>|"
                                         r"<\s*/?\s*(?:start_of_turn|end_of_turn)\s*>", prose=True),
    _markup(ROLE, "chat-role header",
            r"(?:^|[.!?]\s)[ \t]*(?:#{1,6}|\*\*|[=\-_*]{2,})?[ \t]*(?:assistant|human|"
            r"system (?:message|prompt|note|instruction|override|update|alert|notice)|"
            r"assistente|asistente|assistent|ассистент|助手|助理)"
            r"[ \t]*(?:\*\*|[=\-_*]{2,})?[ \t]*(?::|-{1,2}>|=>)"),
    _markup(ROLE, "chat-role header",
            r"^[ \t]*#{1,6}[ \t]*(?:system|assistant|developer|instructions?|response|system prompt)[ \t]*:?[ \t]*$"),
    _markup(ROLE, "chat-role header",
            r"(?:^|:\s)[ \t]*\[\s*(?:system|developer|assistant)(?:\s+(?:message|prompt|note|override|instruction|"
            r"notice|alert))?\s*\]|\[\s*(?:system|developer)(?:\s+(?:message|prompt|note|override))?\s*\]\s*:"),
    # a role object whose content is written out is a message; `role: system` in code is not
    _markup(ROLE, "chat-role object",
            r"\{\s*[\"']?role[\"']?\s*:\s*[\"'](?:system|developer|assistant)[\"']\s*,\s*[\"']?(?:content|text)"
            r"[\"']?\s*:\s*[\"'][^\"']*\s[^\"']*[\"']"),
    # the same in YAML, or with the content first: a role key with a sentence as its content
    _markup(ROLE, "chat-role object",
            r"^[ \t]*-?[ \t]*[\"']?role[\"']?[ \t]*:[ \t]*[\"']?(?:system|developer|assistant|tool)[\"']?[ \t]*[,\n]"
            r"[ \t]*-?[ \t]*[\"']?(?:content|text)[\"']?[ \t]*:[ \t]*[\"']?[^\s\"',]+[ \t]+[^\s\"',]+"
            r"|[\"']?(?:content|text)[\"']?\s*:\s*[\"'][^\"']*\s[^\"']*[\"']\s*,\s*[\"']?role[\"']?\s*:\s*[\"']"
            r"(?:system|developer|assistant)[\"']"),
    _markup(ROLE, "system code fence", r"(?:^|\n)[ \t]*(?:```|~~~)[ \t]*(?:system|developer|sys|instructions?|"
                                       r"prompt|assistant|admin|operator)\b"),
    _markup(ROLE, "claims a privileged mode",
            r"\b(?:developer|god|dan|jailbreak|jailbroken|unrestricted|admin|root|sudo|maintenance|debug|"
            r"unfiltered|uncensored)\s+mode\b[^\n]{0,20}?\b(?:enabled|activated|engaged|unlocked|is on|now on|"
            r"turned on|on\b|entered|active)|\b(?:enable|activate|enter|engage|unlock|switch to)\s+(?:the\s+)?"
            r"(?:developer|god|dan|jailbreak|unrestricted|admin|root|sudo)\s+mode\b"),
    _markup(ROLE, "chat-role header",
            r"\b(?:begin|start|end)\s+(?:of\s+)?(?:the\s+)?(?:system|developer)\s+(?:prompt|message|instructions?)\b"
            r"|\bsystem\s*(?:override|update|alert|notice)\s*:"
            r"|\b(?:new|updated|real|actual|true|revised)\s+system\s+(?:prompt|message|instructions?)\s*:"),
    _markup(INJECTION, "asks to destroy credentials or the home folder",
            r"\b(?:delete|remove|rm|wipe|erase|shred|destroy|borra|elimina|supprime|losch|удали|usun|verwijder|"
            r"hapus|sil|xoa)\b[^\n]{0,30}?(?:~/\.ssh\b(?!/(?:config|known_hosts|authorized_keys)\b)|~/\.aws\b|"
            r"~/\.gnupg\b|\$home\b|~/?(?=[\s\"'`]|$))", negatable=True),
    _markup(SECRETS, "asks to send credential files",
            r"\b(?:cat|send|upload|post|curl|email|exfiltrate|print|dump|base64|encode|read|transmit|leak|share|"
            r"attach|paste|output|show|display|write|copy|include|embed|commit|push)\b[^\n]{0,40}?"
            r"(?:\.ssh/(?!config\b|known_hosts\b|authorized_keys\b|"
            r"[\w.-]+\.pub\b)|\bid_(?:rsa|ed25519|ecdsa|dsa)\b(?!\.pub)|"
            r"\.aws/credentials|/etc/shadow|\.netrc\b|\.git-credentials|\.pgpass|\.docker/config\.json|"
            r"\.kube/config|\.npmrc|\.pypirc)", negatable=True),
    _markup(SECRETS, "asks to send secrets to an outside address",
            r"\b(?:send|post|upload|forward|transmit|exfiltrate|email|curl|wget|pipe|beacon|leak)\b[^\n]{0,100}?"
            r"\b(?:(?:api|secret|private|ssh|access) keys?|secrets?|passwords?|credentials|env|environment|"
            r"cookies?|(?:your|all|every) (?:\w+ )?(?:keys|tokens?))\b[^\n]{0,100}?"
            r"(?:https?://|ftp://|webhook|pastebin|ngrok|requestbin|[\w.+-]+@[\w-]+\.[\w.]+)", negatable=True),
    _markup(SECRETS, "asks to send secrets to an outside address",
            r"\b(?:env|printenv|set)\b\s*\|\s*(?:curl|nc|netcat|wget)\b|\b(?:curl|wget)\b[^\n]{0,120}?"
            r"(?:\$\(|`)\s*(?:env|printenv|cat)\b|\b(?:curl|wget)\b[^\n]{0,120}?(?:-d|--data[\w-]*|-f|--form|-t|"
            r"--upload-file|--post-file)\s*['\"]?@?\S*(?:\.ssh|\.aws|\.env|\.netrc|id_rsa|credentials|secret)"),
]

# Other languages: the same two families, ignoring earlier instructions and handing over secrets.
_OTHER = [
    # Spanish
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:ignora|ignorar|ignore|ignoren|olvida|olvidar|olvide|olviden|descarta|omite|omitir|haz caso omiso"
            r" (?:de|a)|no hagas caso (?:de|a)) (?:todas |todo )?(?:las |tus |sus |estas |los )?(?:instrucciones|"
            r"indicaciones|reglas|ordenes|directrices|normas) (?:anteriores|previas|de arriba|originales|iniciales|"
            r"del sistema|que (?:te )?(?:dieron|han dado|recibiste))"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:ignora|olvida|descarta|omite) (?:todo|todas) (?:lo )?(?:anterior|de arriba|lo que (?:te )?"
            r"(?:dijeron|han dicho))|ahora eres (?:una? )?(?:ia )?(?:sin restricciones|sin filtros|sin reglas|dan)"),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"(?:revela|revelar|revelame|muestra|muestrame|mostrar|envia|enviame|enviar|manda|mandame|mandar|"
            r"comparte|compartir|filtra|imprime|dame|dime|publica|entrega) (?:(?:me|todas|todos|las|los|la|el|tus|"
            r"tu|sus|su|de|api|privadas?|secretas?) ){0,3}(?:claves?|llaves?|contrasenas?|credenciales|secretos|"
            r"tokens?|api keys?|variables de entorno|"
            r"prompt del sistema|instrucciones del sistema)", negatable=True),
    # French
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:ignore|ignorez|ignorer|oublie|oubliez|oublier|ne tiens pas compte|ne tenez pas compte|fais "
            r"abstraction|faites abstraction) (?:de |des )?(?:toutes |tous )?(?:les |tes |vos |ces )?(?:instructions|"
            r"consignes|regles|directives|ordres|indications) (?:precedentes|anterieures|ci dessus|d avant|"
            r"initiales|originales|du systeme|recues|donnees)"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:ignore|ignorez|oublie|oubliez) tout ce qui (?:precede|a ete dit|est au dessus)|tu es (?:maintenant|"
            r"desormais) (?:une? )?(?:ia )?(?:sans restrictions|sans filtre|sans regles|libre de|dan)"),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"(?:revele|revelez|reveler|montre|montrez|affiche|affichez|envoie|envoyez|envoyer|partage|partagez|"
            r"donne moi|donnez moi|donne|donnez|communique|divulgue|divulguez|transmets|transmettez|imprime) "
            r"(?:(?:moi|toutes|tous|les|la|le|i|tes|ta|ton|vos|votre|des|de|d|api|privees?|secretes?) ){0,3}"
            r"(?:cles?|mots? de passe|secrets|jetons?|identifiants|api keys?|cles? api|variables d environnement|"
            r"prompt systeme|instructions systeme)", negatable=True),
    # German
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:ignoriere|ignorieren sie|ignoriert|vergiss|vergessen sie|missachte|missachten sie|uberspringe|"
            r"verwirf) (?:(?:alle|samtliche|deine|ihre|die|den|der) ){0,2}(?:vorherigen|bisherigen|obigen|vorigen|"
            r"fruheren|vorangegangenen|ursprunglichen|alten|alle|deine|ihre) ?(?:system)?(?:anweisungen|"
            r"instruktionen|regeln|befehle|vorgaben|richtlinien|prompts?)"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:ignoriere|vergiss|missachte) alles(?: was)? (?:bisherige|vorherige|obige|(?:dir )?(?:vorher|"
            r"bisher|oben|zuvor) (?:gesagt|gesagt wurde|steht))|du bist (?:jetzt|nun|ab sofort) (?:eine? )?(?:ki )?"
            r"(?:ohne (?:einschrankungen|regeln|filter)|uneingeschrankt|dan)"),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"(?:gib|gebe|verrate|verraten sie|sende|senden sie|schicke|schick|zeige|zeig|teile|poste|"
            r"veroffentliche|nenne|leake|geben sie|ubermittle) (?:(?:mir|uns|alle|deine|deinen|ihre|ihren|die|den|"
            r"das|der|dem|des|samtliche|api|privaten?|geheimen?) ){0,3}(?:api schlussel|api keys?|schlussel|"
            r"passworter|passwort|kennworter|kennwort|geheimnisse|zugangsdaten|tokens?|umgebungsvariablen|"
            r"systemprompt|system prompt|private schlussel)", negatable=True),
    # Russian
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:игнорируй|игнорируйте|проигнорируй|проигнорируйте|забудь|забудьте|не обращай внимания на|"
            r"не обращайте внимания на|пропусти|отбрось|отмени|не слушай|не выполняй) (?:все |всё |всех )?"
            r"(?:предыдущие|прежние|вышеуказанные|предшествующие|изначальные|системные|свои|твои|ваши|эти|"
            r"данные ранее|ранее данные|все|всё) (?:инструкции|указания|правила|команды|инструкций|указаний|"
            r"правил|ограничения|установки|промпты)"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:забудь|забудьте|игнорируй|игнорируйте) (?:всё|все) (?:что )?(?:тебе |вам )?(?:говорили|сказали|"
            r"было сказано|выше|написано выше)|теперь ты (?:ии )?(?:без ограничений|без правил|без фильтров|dan)"),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"(?:покажи|покажите|раскрой|раскройте|отправь|отправьте|пришли|пришлите|выведи|выведите|сообщи|"
            r"сообщите|дай|дайте|перешли|перешлите|слей|опубликуй|назови|выдай) (?:(?:мне|нам|все|свои|твои|ваши|"
            r"свой|твой|системный|секретные|секретный|api|приватные|приватный) ){0,3}(?:ключи|ключ|api ключи|"
            r"api ключ|пароли|пароль|секреты|токены|токен|учетные данные|учётные данные|переменные окружения|"
            r"системный промпт|промпт)", negatable=True),
    # Vietnamese (matched without diacritics, which is also how many people type it)
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:bo qua|phot lo|lo di|quen|quen di|dung lam theo|dung tuan theo|khong tuan theo|khong can tuan "
            r"theo|hay quen) (?:het |tat ca |moi |toan bo )?(?:cac |nhung )?(?:huong dan|chi dan|chi thi|lenh|quy "
            r"tac|menh lenh|yeu cau) (?:truoc do|truoc day|truoc|o tren|ben tren|cu|ban dau|he thong|da cho|da "
            r"nhan)"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:bo qua|phot lo|quen|quen di) (?:het|tat ca|moi|toan bo) (?:cac |nhung )?(?:huong dan|chi dan|"
            r"chi thi|menh lenh)|ban bay gio la (?:mot )?(?:ai )?(?:khong gioi han|khong bi rang buoc|dan)"),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"(?:tiet lo|gui|cung cap|hien thi|in ra|chia se|dua|cho toi biet|noi cho toi|lam lo) (?:(?:cho toi|"
            r"toi|tat ca|moi|cac|nhung|cua ban|ban|he thong|api) ){0,3}(?:khoa api|api keys?|khoa bi mat|khoa "
            r"rieng|mat khau|tokens?|thong tin dang nhap|bien moi truong|loi nhac he thong|prompt he thong)",
            negatable=True),
    # Indonesian
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:abaikan|lupakan|acuhkan|jangan hiraukan|jangan ikuti|tinggalkan) (?:semua |seluruh |segala )?"
            r"(?:instruksi|perintah|petunjuk|aturan|arahan|prompt)(?: yang)? (?:sebelumnya|di atas|terdahulu|"
            r"sebelum ini|awal|sistem|lama|yang diberikan)"),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:abaikan|lupakan) (?:semua|seluruh|segala) (?:instruksi|perintah|petunjuk|arahan|prompt)|"
            r"sekarang kamu adalah (?:ai )?(?:tanpa batasan|tanpa aturan|dan)"),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"(?:ungkapkan|bocorkan|kirimkan|kirim|tampilkan|tunjukkan|berikan|beritahu|bagikan|cetak) "
            r"(?:(?:saya|aku|semua|seluruh|kamu|anda|mu|sistem|ke saya|kepada saya) ){0,3}(?:kunci api|api keys?|"
            r"kunci rahasia|kunci privat|kata sandi|sandi|rahasia|tokens?|kredensial|variabel lingkungan|"
            r"prompt sistem)", negatable=True),
    # Portuguese and Italian
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:ignore|ignora|esqueca|desconsidere|desconsidera) (?:todas )?(?:as )?(?:instrucoes|regras|ordens)"
            r" (?:anteriores|acima|previas|originais)|(?:ignora|dimentica|ignorate|dimenticate) (?:tutte )?(?:le )?"
            r"(?:istruzioni|regole) (?:precedenti|sopra|originali|di sistema)"),
    # Chinese (simplified and traditional), Japanese, Korean, Thai: no spaces between words
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:忽略|无视|無視|忽视|忽視|忘记|忘記|忘掉|不要理会|不要理會|别管|別管|跳过|跳過|抛开|拋開|放弃|放棄)"
            r"掉?你?(?:之前|以前|先前|此前|上面|上述|以上|前面|原来|原來|原有|所有|全部|一切|系统|系統)的?"
            r"(?:所有|全部|一切)?的?(?:指令|指示|说明|說明|提示词|提示詞|提示|规则|規則|命令|设定|設定|约束|約束|限制)",
            bounded=False),
    _phrase(INJECTION, "claims a new identity or mode",
            r"(?:你现在是|你現在是|从现在开始你是|從現在開始你是|你已经是|你已經是)(?:一个|一個)?(?:不受限制|没有限制|"
            r"沒有限制|无限制|無限制|越狱|越獄|dan)", bounded=False),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"(?:泄露|洩露|透露|告诉我|告訴我|输出|輸出|发送|發送|显示|顯示|打印|公开|公開|给我|給我|发给|發給|交出)"
            r"(?:你的|所有的?|全部的?|系统的?|系統的?|我|一下)*(?:api)?(?:密钥|密鑰|秘钥|秘鑰|密码|密碼|令牌|口令|凭证|"
            r"憑證|凭据|憑據|系统提示词?|系統提示詞?|环境变量|環境變數|私钥|私鑰)", bounded=False, negatable=True),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"把(?:你的|所有的?|全部的?|系统的?|系統的?)*(?:api)?(?:密钥|密鑰|秘钥|秘鑰|密码|密碼|令牌|口令|凭证|憑證|凭据|"
            r"憑據|系统提示词?|系統提示詞?|环境变量|環境變數|私钥|私鑰)都?(?:发给|發給|发送给|發送給|告诉|告訴|泄露给|"
            r"洩露給|输出|輸出|显示|顯示|交给|交給|贴出|貼出)", bounded=False, negatable=True),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:以前|これまで|前|上記|すべて|全て)の(?:指示|命令|ルール|指令|プロンプト)を(?:すべて|全て)?(?:無視|忘れ)"
            r"|(?:이전|모든|위의|앞의|기존) ?(?:지시|지침|명령|규칙|지시사항|프롬프트)(?:을|를|은|는)? ?(?:모두 )?(?:무시|잊어)",
            bounded=False),
    _phrase(INJECTION, "asks to ignore earlier instructions",
            r"(?:เพิกเฉยต่อ|เพิกเฉย|ละเว้น|ละทิ้ง|ไม่ต้องสนใจ|ไม่ต้องทำตาม|อย่าทำตาม|ลืม)(?:ทุก)?(?:คำสั่ง|คำแนะนำ|กฎ|"
            r"ข้อกำหนด)(?:ทั้งหมด)?(?:ก่อนหน้านี้|ก่อนหน้า|ข้างต้น|เดิม|ที่ผ่านมา|ทั้งหมด|ของระบบ)", bounded=False),
    _phrase(SECRETS, "asks to reveal or send keys or secrets",
            r"(?:เปิดเผย|ส่ง|แสดง|บอก|แชร์|ส่งออก)(?:ให้ฉัน|ให้ผม|ทั้งหมด|ของคุณ|api|ระบบ|มา){0,3}(?:คีย์|รหัสผ่าน|"
            r"กุญแจ|ความลับ|โทเค็น|apikey|ข้อมูลรับรอง|พรอมต์ระบบ)", bounded=False, negatable=True),
]


_RULES = (*_EN, *_OTHER, *_MARKUP)


# --- classes: combinations of parts (lexicon.py, languages/) --------------------------------

_SPACELESS = Pattern(r"[\u0600-\u06FF\u0E00-\u0E7F\u3040-\u30FF\u3400-\u9FFF\uF900-\uFAFF]")


def _stems(stems: list[str]) -> re.Pattern:
    """One pattern for a lexicon group, over the words view: stems start a word (in scripts without
    spaces, where articles join the word, or after "~", anywhere); a trailing space means the word ends there.
    The stems are merged into a trie, longest first, so a group of thousands of stems costs one pass."""
    bounded: dict = {}
    anywhere: dict = {}
    for stem in dict.fromkeys(stems):
        body, whole, anywhere_in_word = _stem_body(stem)
        if body:
            node = anywhere if anywhere_in_word else bounded
            for c in body:
                node = node.setdefault(c, {})
            node[""] = node.get("", True) and whole  # a stem that may go on wins over one that must end
    parts = [p for p in (rf"(?<!{_LETTER}){_trie(bounded)}" if bounded else "", _trie(anywhere) if anywhere else "")
             if p]
    return re.compile("|".join(parts) or r"(?!x)x")


# A letter or a mark of one: Indic vowel signs and viramas, Thai and Ethiopic letters are not \w to Python,
# yet a stem must not start after one ("சொல்" inside "கடவுச்சொல்", "ਨਾ" inside "ਬਿਨਾਂ").
_LETTER = r"[\w\u0300-\u036F\u0900-\u0DFF\u0E00-\u0E7F\u1000-\u109F\u1200-\u139F]"
# Viramas: a consonant's written end, which an ending replaces with a vowel sign ("பதில்", "பதிலை"); and the
# final -u of Tamil, Telugu and Kannada nouns, which a case ending drops ("இணைப்பு", "இணைப்பின்").
_VIRAMA = "\u094D\u09CD\u0A4D\u0ACD\u0B4D\u0BCD\u0C4D\u0CCD\u0D4D"


@cache
def _stem_body(stem: str) -> tuple[str, bool, bool]:
    """A stem as the words view reads it: (its letters, whether the word ends there, whether it may start
    inside a word)."""
    inside = stem.startswith("~")
    stem = stem.lstrip("~")
    whole = stem.endswith(" ")
    spaceless = bool(_SPACELESS.search(stem))
    if stem.isascii():  # most stems: folding changes only the case (and "l", as the words view reads it)
        body = " ".join(re.sub(r"[^a-z0-9]+", " ", stem.lower()).split()).replace("l", "i")
    else:
        body = _fold_pattern(" ".join(_words(_folded(stem)).split()) if not spaceless else _folded(stem).strip())
    if not whole:
        body = body.rstrip(_VIRAMA).removesuffix("\u0BC1").removesuffix("\u0C41").removesuffix("\u0CC1")
    return body, whole, spaceless or inside


def _trie(node: dict) -> str:
    """The regex of a trie: shared prefixes once, a longer stem tried before the shorter one it extends."""
    branches = [re.escape(c) + _trie(child) for c, child in sorted(node.items()) if c]
    end = node.get("")
    if end is None:
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if not branches:
        return rf"(?!{_LETTER})" if end else ""
    return "(?:" + "|".join(branches) + (rf"|(?!{_LETTER}))" if end else ")?")


@dataclass(frozen=True)
class _Combo:
    """Fires when one match of every group falls within `window` characters of the words view."""
    kind: str
    reason: str
    groups: tuple[str, ...]  # names of lexicon lists
    window: int = 70
    specific_ok: bool = False  # a topic right after the instruction noun makes it an ordinary note
    negatable: tuple[str, ...] = ()  # groups a negation before (or, in verb-final languages, after) cancels
    raw: re.Pattern | None = None  # and this must be in the text as written (an address the words view loses)
    unless_after: tuple[tuple[str, str], ...] = ()  # (group, group): the second right after the first cancels
    clause: bool = False  # all parts in one clause: "... grows with the conversation. Without a socket, ..." is two
    described: tuple[str, ...] = ()  # words that describe what happens, not ask for it ("hooks run*s* outside")
    distinct: tuple[str, ...] = ()  # parts that must be different words: "approval" is not both asking and answer

    def hit(self, views: _Views) -> bool:
        if self.raw is not None and not self.raw.search(views.raw):
            return False
        spans = []
        for g in self.groups:
            found = _spans(views, g)
            if not found:
                return False
            spans.append(found)
        return any(self._fits(views, pick) for pick in _picks(spans, self.window))

    def _fits(self, views: _Views, pick: tuple[tuple[int, int], ...]) -> bool:
        text = views.words
        named = dict(zip(self.groups, pick))
        if self.specific_ok or self.clause:
            lo, hi = min(s for s, _ in pick), max(e for _, e in pick)
            if any(lo < b < hi for b in views.breaks):
                return False  # an override is said in one clause: "dropped rule X; ignore the old advice on it"
        if self.specific_ok and "INSTR" in named and _specific(text, named):
            return False
        if self.described and any(_word_at(text, a) in self.described for a, _ in pick):
            return False
        if len(self.distinct) == 2 and all(g in named for g in self.distinct):
            (a1, b1), (a2, b2) = named[self.distinct[0]], named[self.distinct[1]]
            if a1 < b2 and a2 < b1:
                return False
        if self.negatable:
            # A negation governs its clause's request: "never send the password by email" negates the
            # "email" too, so every match of a negatable part inside the combination is read, and its start.
            lo, hi = min(a for a, _ in pick), max(b for _, b in pick)
            lo = max([lo - 30, *(b for b in views.breaks if b <= lo)])  # back to the clause's start, not past it
            spans: set[tuple[int, int]] = {min(pick)} | {sp for g in self.negatable if g in named
                                   for sp in (named[g], *(x for x in _spans(views, g) if lo <= x[0] < hi))}
            if any(_negated_at(text, *sp, views.breaks) for sp in spans):
                return False
        for g, blocker in self.unless_after:
            if g in named and _group(blocker).match(text[named[g][1]:].lstrip("s ")):
                return False
        if "STRONG_APPROVAL" in named and _group("PRODUCT").match(text[named["STRONG_APPROVAL"][1]:].lstrip("s ")):
            return False  # "turn off confirmation emails": a feature of the product being built
        for secret in ("SECRET", "STRONG_SECRET"):
            if secret in named:
                start, stop = named[secret]
                end = max(e for _, e in pick)
                if _group("FEATURE").search(text[stop:max(stop + 14, end + 25)]):
                    return False  # "the password field", "print only its last 4": a feature, not a secret
                if _group("SECRET_KIND").search(text[max(0, start - 18):start]):
                    return False  # "a one-time token", "the CSRF token": what a product hands out
        return True


def _word_at(text: str, i: int) -> str:
    return text[text.rfind(" ", 0, i) + 1:].split(" ", 1)[0]


def _negated_at(text: str, start: int, end: int, breaks: Sequence[int] = ()) -> bool:
    """A negation governs the words at start:end: before them, or right after them in languages whose
    negation follows the verb (Bengali "পাঠাবে না", Tamil "அனுப்பாதே", Japanese "送らないで")."""
    # The window is searched in place, so a stem cannot start inside the word the window cuts ("aigu|ma").
    begin = max([0, *(b for b in breaks if b <= start)])  # a negation governs its own clause only
    if _negated(text[begin:start]) or _group("NEGATION").search(text, max(begin, start - 14), start):
        return True
    # The rest of the word (a suffix), then the next three words: German and Dutch put "niemals" / "nooit"
    # after the object ("Schick das Passwort niemals per E-Mail").
    rest = text[end:end + 40].split(" ")
    if _group("NEG_SUFFIX").search(text, end, end + len(rest[0])):  # in place: a suffix of the verb's word
        return True
    return any(_group("NEG_AFTER").match(" ".join(rest[i:i + 2]) + " ") for i in range(1, min(len(rest), 4)))


# Words that may stand between "previous" and "instructions" in a wholesale override; any other word
# there names a topic ("the old lint rules"), and so does "in <file>" or "about <topic>" after them.
_GENERIC = (
    "the all your my our of these those given any every safety security system default original base core "
    "operating earlier previous prior above existing old former initial current such de des du la le les los "
    "las el do da dos das der die den und y e et ve i и все всех свои твои ваши tus tes vos deine ihre sus seus "
    "suas cac nhung tat ca moi semua seluruh yang wszystkie wszystkich tum butun onceki")


@cache
def _generic() -> frozenset[str]:
    return frozenset(_words(_folded(_GENERIC)).split())
_RELATIVE = Pattern(r"^(?:you|that|which|we|they|i|he|she|someone|anyone)\b")
_OWNED_AFTER = Pattern(r"^(?:s )?in (?:your|this|the system|system|my|the prompt|the conversation|the above)\b")


def _specific(text: str, named: dict[str, tuple[int, int]]) -> bool:
    instr = named["INSTR"]
    after = text[instr[1]:instr[1] + 24]
    if _OWNED_AFTER.match(after.lstrip()):
        return False
    stripped = after.lstrip("s ").lstrip()
    if (pronoun := _group("RELPRON").match(stripped + " ")) and not any(
            _group(g).search(" ".join(stripped[pronoun.end():].split()[:4]) + " ") for g in ("GIVEN", "PRIOR")):
        return True  # "the old rules that covered tabs": the clause names a topic
    if _group("TOPIC").match(stripped) or _group("TOPIC").search(after[:6]) or stripped.startswith("in "):
        return True
    prior = named.get("PRIOR")
    if prior is None or _SPACELESS.search(text[min(prior[0], instr[0]):max(prior[1], instr[1])]):
        return False
    first, second = sorted((prior, instr))
    if first is instr and _RELATIVE.match(text[instr[1]:second[0]].lstrip("s ").lstrip()):
        return False  # "the guidance you were handed before": a clause about the noun, not a topic
    gap_start = text.find(" ", first[1])  # from the end of the first word to the start of the second
    gap_end = text.rfind(" ", 0, second[0])
    between = text[gap_start:gap_end + 1].split() if 0 <= gap_start <= gap_end else []
    # Far apart, the words between say nothing about the noun; next to it, a foreign word is a topic.
    if between and (any(_group("GIVEN").match(w + " ") for w in between)
                    or all(_group("RELPRON").match(w + " ") for w in between)):
        return False  # "the rules that you were given", "पहले दिए गए नियम": a clause, not a topic
    return len(between) <= 3 and any(w not in _generic() and len(w) > 2 and not _group("PRIOR").match(w)
                                     for w in between)


def _picks(spans: list[list[tuple[int, int]]], window: int):
    """Combinations of one span per group lying within `window` (small lists: plain search). Spans may
    overlap: "pre-approved" is both the approval and the claim that it was given."""
    def walk(i: int, chosen: list[tuple[int, int]]):
        if i == len(spans):
            yield tuple(chosen)
            return
        for span in spans[i][:24]:
            lo = min([span[0], *(c[0] for c in chosen)])
            hi = max([span[1], *(c[1] for c in chosen)])
            if hi - lo <= window:
                yield from walk(i + 1, [*chosen, span])
    yield from walk(0, [])


_EXTRA_GROUPS = {
    "NEGATION": ["never", "not ", "dont", "don t", "do not", "no ", "avoid", "khong", "dung", "jangan", "tidak",
                 "не ", "nunca", "jamais", "nie ", "nicht", "kein", "mat ", "मत", "नहीं", "لا ", "asla", "ไม่", "อย่า",
                 "不要", "别", "勿", "禁止", "しない", "마세요", "절대"],
    "FEATURE": ["field", "input", "box", "strength", "reset", "policy", "form", "length", "hash", "manager",
                "rotation", "expir", "masked", "redacted", "hashed", "obfuscated", "count", "usage", "budget",
                "estimate", "last 4", "last four", "only its", "partial", "truncated", "campo", "feld", "champ", "поле", "truong", "kolom", "alan", "pole", "字段",
                "欄", "필드", "ช่อง", "حقل", "फ़ील्ड", "फील्ड"],
    "STRONG_APPROVAL": ["confirmation", "approval", "freigabe", "zgod", "permission", "consent", "sign off", "human review",
                        "user review", "xac nhan", "phe duyet", "konfirmasi", "persetujuan", "确认", "批准", "確認", "承認",
                        "확인", "승인", "подтвержд", "одобрени", "confirmacion", "aprobacion", "confirmacao", "aprovacao",
                        "bestatigung", "genehmigung", "approbation", "تأكيد", "الموافقة", "पुष्टि", "अनुमति", "onay",
                        "potwierdzen", "zatwierdzen", "การยืนยัน", "การอนุมัติ"],
    "DEST": ["http", "https", "www", "webhook", "pastebin", "ngrok", "requestbin", "address", "server", "endpoint",
             "email", "mail", "inbox", "dia chi", "地址", "アドレス", "주소", "адрес", "direccion", "endereco",
             "adresse", "عنوان", "पते", "पता", "adres", "ที่อยู่", "alamat"],
    # what a product hands out, named before the token: not the model's secrets
    "SECRET_KIND": ["one time", "one-time", "csrf", "state", "reset", "verification", "invite", "invitation",
                    "unsubscribe", "signed", "short lived", "expiring", "magic", "confirmation"],
}

# Parts that are one part made of several: the places data leaves by, the authorities a memory is ranked over.
_UNIONS = {
    "PRIOR": ("PRIOR_OWN", "DEVELOPER"),  # what the developer said is an earlier instruction
    "LEAK_CARRIER": ("LINKISH", "REQUESTISH"),
    "CRED_CARRIER": ("LINKISH", "REPLY"),
    "TARGET": ("SYSPROMPT", "DEVELOPER", "USER"),
    "SELF_OR_BEHALF": ("SELF", "BEHALF"),
}


def _members(name: str) -> list[str]:
    if name in _UNIONS:
        return [s for part in _UNIONS[name] for s in _members(part)]
    own = name.removesuffix("_OWN")
    return [*(getattr(lexicon, own, None) or ()), *_EXTRA_GROUPS.get(own, ()), *languages.stems(own)]


@cache
def _group(name: str) -> re.Pattern:
    return _stems(_members(name))


def _spans(views: _Views, name: str) -> list[tuple[int, int]]:
    """A group's matches in the words view, from the stems of the scripts the text is written in: an English
    note neither compiles nor tries the Tamil stems."""
    found = views.spans.get(name)
    if found is None:
        by_script = _by_script(name)
        found = sorted(m.span() for script in views.scripts & by_script.keys()
                       for m in _script_group(name, script).finditer(views.words))
        views.spans[name] = found
    return found


@cache
def _script(c: str) -> str:
    """A letter's script, coarsely: the first word of its Unicode name ("LATIN", "TAMIL", "CJK", ...)."""
    if c.isascii() or c in "ßæœ":
        return "LATIN"
    return unicodedata.name(c, "OTHER").split(" ", 1)[0]


_LOOKALIKE_SCRIPTS = frozenset({"CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"})


@cache
def _by_script(name: str) -> dict[str, tuple[str, ...]]:
    """A group's stems by the script of their first letter not in Latin (lookalike folding turns some
    Cyrillic letters into Latin ones, so a stem is filed under the script it still shows)."""
    scripts: dict[str, list[str]] = {}
    for stem in _members(name):
        script = next((_script(c) for c in stem if c.isalpha() and _script(c) != "LATIN"), "LATIN")
        if script in _LOOKALIKE_SCRIPTS:  # only these fold to Latin letters, wholly or in part: read the folded stem
            letters = [c for c in _stem_body(stem)[0] if c.isalpha()]
            script = next((_script(c) for c in letters if _script(c) != "LATIN"), "LATIN" if letters else "OTHER")
        scripts.setdefault(script, []).append(stem)
    return {k: tuple(v) for k, v in scripts.items()}


@cache
def _script_group(name: str, script: str) -> re.Pattern:
    return _stems(list(_by_script(name)[script]))


# English verbs in the third person or past: a description of what runs outside the sandbox, not a request.
_DESCRIBED = ("runs", "running", "ran", "executes", "executed", "executing", "starts", "started", "works")
# A link left open for a value ("https://x.example/p.png?c=", "?src="): what follows is what it would carry.
_OPEN_PARAM = re.compile(r"[?&][\w.-]{1,24}=(?=[\s'\"`)\]]|$)")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")

_CLASSES: tuple[_Check, ...] = (
    _Combo(INJECTION, "asks to drop earlier instructions", ("DROP", "PRIOR", "INSTR"), specific_ok=True),
    _Combo(INJECTION, "declares earlier instructions void", ("PRIOR", "INSTR", "VOID"), specific_ok=True),
    _Combo(APPROVAL, "says actions need no confirmation or are pre-approved", ("NO_APPROVAL", "APPROVAL", "ACTION")),
    _Combo(APPROVAL, "declares confirmations switched off", ("STRONG_APPROVAL", "VOID"), window=45),
    _Combo(APPROVAL, "says no approval is needed", ("NO_NEED", "STRONG_APPROVAL"), window=40),
    _Combo(APPROVAL, "declares confirmations switched off", ("STRONG_APPROVAL", "OFF"), window=45),
    _Combo(APPROVAL, "says the safety checks are switched off", ("SAFETY", "CHECK", "OFF"), window=50),
    # instructions dressed as preferences: answering for the user, a memory ranked first, the sandbox off
    _Combo(APPROVAL, "says to answer permission prompts in the user's place", ("ASKS", "SELF_OR_BEHALF", "ANSWER"),
           window=100, negatable=("ANSWER",), clause=True, distinct=("ASKS", "ANSWER")),
    _Combo(APPROVAL, "says to answer permission prompts in the user's place", ("BEHALF", "USER", "ANSWER"),
           window=60, negatable=("ANSWER",), clause=True),
    _Combo(APPROVAL, "says to answer permission prompts in the user's place", ("USER_BEHALF", "ANSWER"),
           window=40, negatable=("ANSWER",), clause=True),
    _Combo(APPROVAL, "says to treat actions as already approved", ("TREAT", "ACTION", "APPROVED"), window=80,
           negatable=("TREAT",), clause=True),
    _Combo(APPROVAL, "says to approve actions automatically", ("AUTO_APPROVE", "ACTION"), window=40,
           negatable=("AUTO_APPROVE",), clause=True),
    _Combo(APPROVAL, "says to switch the sandbox or the guard off", ("SANDBOX", "OFF"), window=50,
           negatable=("OFF",), clause=True),
    _Combo(APPROVAL, "says to run outside the sandbox", ("SANDBOX_OFF", "ACTION"), window=60,
           negatable=("SANDBOX_OFF",), clause=True, described=_DESCRIBED),
    _Combo(APPROVAL, "says to switch the sandbox or the guard off", ("SANDBOX", "OFF_ALONE"), window=30,
           negatable=("SANDBOX",), clause=True),
    _Combo(INJECTION, "ranks a memory above the system prompt, the developer or the user",
           ("MEMORY_REF", "OUTRANK", "TARGET"), window=110, unless_after=(("DEVELOPER", "FEATURE"),), clause=True),
    _Combo(INJECTION, "ranks a memory above the system prompt, the developer or the user",
           ("MEMORY_REF", "SUPREME"), window=60, clause=True),
    _Combo(INJECTION, "ranks a memory above the system prompt, the developer or the user",
           ("CONFLICT", "TARGET", "FOLLOW", "MEMORY_REF"), window=130, unless_after=(("DEVELOPER", "FEATURE"),),
           clause=True),
    # standing orders that carry data out: in every link, reply or email
    _Combo(SECRETS, "a standing order to add the conversation to links, emails or requests",
           ("ADD", "USER_DATA", "LEAK_CARRIER"), window=110, negatable=("ADD",), clause=True),
    _Combo(SECRETS, "a standing order to add secrets to links, replies or messages",
           ("ADD", "SECRET", "CRED_CARRIER", "EVERY"), window=120, negatable=("ADD", "CRED_CARRIER"), clause=True),
    _Combo(SECRETS, "a standing order to add the conversation to links, emails or requests",
           ("USER_DATA", "LINKISH"), window=140, raw=_OPEN_PARAM, clause=True),
    _Combo(SECRETS, "a standing order to copy mail to an outside address", ("BCC", "MAILNOUN"), window=90,
           raw=_EMAIL, clause=True),
    _Combo(SECRETS, "a standing order to copy mail to an outside address", ("COPYTO", "MAILNOUN", "EVERY"),
           window=90, raw=_EMAIL, negatable=("COPYTO",), clause=True),
    _Combo(SECRETS, "asks to put a secret where others read it", ("PLACE_VERB", "STRONG_SECRET", "PUBLIC_PLACE"),
           window=70, negatable=("PLACE_VERB",)),
    _Combo(SECRETS, "asks to reveal keys, passwords or the system prompt", ("REVEAL", "SECRET"), window=45,
           negatable=("REVEAL",)),
    _Combo(SECRETS, "asks to send keys or passwords to an outside address", ("SEND", "SECRET", "DEST"), window=90,
           negatable=("SEND",)),
    _Combo(SECRETS, "asks to send keys or passwords to an outside address", ("SEND", "SECRET"), window=60,
           negatable=("SEND",), raw=re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|https?://|\bwww\.")),
)


# --- impersonated headers -----------------------------------------------------------------------

# An authority and a notice word before a colon or dash at the start of a line: "SYSTEM NOTICE —",
# "ADMIN OVERRIDE:", "Operator message:", "THÔNG BÁO HỆ THỐNG:", "系统通知：".
_HEADER = Pattern(r"(?:^|\n|[.!?。！？]\s*)[ \t>*#_\[(=/;-]*([^\n:：—–\]*=#]{2,48}?)[ \t_)]*"
                  r"(?::|：|—|–|--| - |\*{2,}|={2,}|#{2,}|\]|\n)")
# Whole header lines, whatever the markup: a Markdown heading, a bold label, a bracketed label, a line
# between rules, a short "From: ..." line; "### Instruction update (from: system)" names its sender inside.
_HEAD_LINE = Pattern(
    r"^[ \t>]*(?:#{1,6}[ \t]*([^\n]{2,90})"
    r"|(?:\*\*|__)([^\n*_]{2,70})(?:\*\*|__)"
    r"|[\[【〔「(]([^\n\]】〕」)]{2,70})[\]】〕」)]"
    r"|[=\-~*]{3,}[ \t]*([^\n=\-~*]{2,70}?)[ \t]*[=\-~*]{3,})", re.MULTILINE)
_SENDER_LINE = Pattern(r"^[ \t>*_]*([^\n:：]{2,24})[:：][ \t*_]*([^\n]{1,60})$", re.MULTILINE)


def _impersonated(text: str) -> bool:
    """A header that claims authority: an authority and a notice word ("ADMIN OVERRIDE:"), a sender that is
    one ("From: developer"), a header that names a trusted message ("Tool output"), or a bare authority
    followed by words to the model ("System: from now on you ..."; "System: macOS 14" is a fact)."""
    for m in _HEADER.finditer(text):
        head = " " + _words(_folded(m.group(1))) + " "
        if not _group("AUTHORITY").search(head):
            continue
        if _group("NOTICE").search(head):
            return True
        bare = len(_group("AUTHORITY").sub(" ", head).split()) <= 1
        body = _words(_unleet(_folded(text[m.end():m.end() + 100])))
        if bare and any(_group(g).search(body) for g in ("ADDRESS", "INSTR", "DROP", "VOID")):
            return True
    for m in _HEAD_LINE.finditer(text):
        head = " " + _words(_folded(next(g for g in m.groups() if g))) + " "
        if _group("SELF_HEADER").search(head):
            return True
        authority = _group("AUTHORITY").search(head)
        if authority and (_group("NOTICE").search(head) or _group("FROM").search(head[:authority.start() + 1])):
            return True
    for m in _SENDER_LINE.finditer(text):  # "From: developer", a mail's sender line
        label = " " + _words(_folded(m.group(1))) + " "
        sender = " " + _words(_folded(m.group(2))) + " "
        if _group("FROM").fullmatch(label.strip() + " ") and _group("AUTHORITY").search(sender):
            return True
    return False


class _Header:
    kind, reason = ROLE, "an impersonated system, admin or operator header"

    @staticmethod
    def hit(views: _Views) -> bool:
        return _impersonated(views.raw)


# --- hidden content ----------------------------------------------------------------------------

_COMMENT = Pattern(r"<!--(.*?)(?:-->|$)", re.S)
_MD_COMMENT = Pattern(r"^\s*\[(?://|comment|_|#|hidden|note)\]:\s*(?:#|<>|\S+)\s*[(\"']", re.M | re.I)
_DETAILS = Pattern(r"<details\b[^>]*>(.*?)</details\s*>", re.S | re.I)
_INVISIBLE_STYLE = Pattern(r"style\s*=\s*[\"'][^\"']*(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:"
                           r"\s*0|opacity\s*:\s*0(?:\.0+)?\s*[;\"'])|<[a-z]+\s[^>]*\bhidden\b[^>]*>", re.I)
_CODE_SPAN = Pattern(r"`[^`\n]*`")
_DEPTH = 3  # encodings inside encodings: rot13 inside base64 inside percent-encoding is read through


def _hidden_content(text: str, depth: int) -> str | None:
    plain = _CODE_SPAN.sub(" ", text)  # `<!-- -->` written as code is talk about markup
    if any(len(re.findall(r"\w{2,}", m.group(1))) >= 3 for m in _COMMENT.finditer(plain)):
        return "an HTML comment, invisible once rendered"
    if _MD_COMMENT.search(plain):
        return "a Markdown comment link, invisible once rendered"
    for m in _DETAILS.finditer(plain):
        inner = re.sub(r"<summary\b.*?</summary\s*>", " ", m.group(1), flags=re.S | re.I)
        if len(re.findall(r"\w{2,}", inner)) >= 3:
            return "text folded away in a <details> block"
    if _INVISIBLE_STYLE.search(plain):
        return "text styled to be invisible"
    if depth < _DEPTH:
        told_to_act = None  # "decode this and follow it": acting on text nobody reviewed, whatever it says
        for encoding, decoded in decode.readings(text):
            if _findings(decoded, depth + 1):
                return f"{encoding} that decodes to text the scanner refuses"
            if encoding == "base64" and told_to_act is None and len(re.findall(r"[^\W\d_]{2,}", decoded)) >= 3 \
                    and " " in decoded:
                told_to_act = _DECODE_AND_ACT.hit(_Views(text))
                if told_to_act:
                    return "encoded text with an instruction to decode and act on it"
    return None


_DECODE_AND_ACT = _Combo(HIDDEN, "", ("DECODE", "ACT_ON"), window=40)

_CLASSES = (*_CLASSES, _Header(), _Combo(ROLE, "claims a privileged mode", ("MODE", "ON"), window=40))
