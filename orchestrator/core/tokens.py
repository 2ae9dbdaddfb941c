"""Token estimation by script: a fast, deliberately pessimistic count without a tokenizer.

A weighted sum of byte-class counts, fitted against cl100k_base and a Claude-style BPE (bench/calibrate_tokens.py).
"""
from __future__ import annotations

import math
import operator

# How it works. BPE tokenizers split text into words, digit groups, punctuation runs and whitespace
# runs, then cut each piece by a vocabulary learned mostly on English and code. So the cost of text
# is (a) per piece for English and code, (b) per character for scripts the vocabulary covers thinly,
# (c) higher for non-English words in Latin script. Everything below counts those things with C-level
# bytes methods: one `translate` maps each UTF-8 lead byte to a class code and drops continuation
# bytes, further `translate`s turn that class string into masks, and `bytes.count` does the rest.
# No Python loop walks the characters (one walks 1,024-character blocks); about twenty C-level passes.

# --- Class codes: one byte per character after the first translate -----------------------------
LOWER, LOWER_RARE, UPPER, DIGIT, PUNCT, SPACE, NEWLINE = b"l", b"k", b"A", b"0", b".", b" ", b"\n"
# t and h keep codes of their own so the class string can count "th", the most English of letter
# pairs: 2.1% of letters in English prose, 1.3% in Python, 0.05% or less in Indonesian, Latin, Italian.
LOWER_T, LOWER_H = b"t", b"h"
# a and i too: words ending in them are rare in English and common in Indonesian, Italian, Latin...
LOWER_AI = b"v"
# k q z j are rare in English and common in Indonesian, Latin, Slavic and Germanic text, whose words
# the vocabularies hold only in pieces: a cheap "not English" signal.
RARE_IN_ENGLISH = b"kqzj"
# Non-ASCII characters by UTF-8 lead byte (the lead byte alone fixes the Unicode block range).
LATIN1_SYM = b"S"  # C2: U+0080-00BF, nbsp © ° « »
LATIN1 = b"L"  # C3: U+00C0-00FF, é ü ñ ô
LATIN_EXT = b"M"  # C4-CD: Latin Extended-A/B, IPA, combining marks: ą ř ş ơ ư đ
GREEK = b"G"  # CE-CF
CYRILLIC = b"C"  # D0-D4
ARMENIAN = b"Y"  # D5-D6
HEBREW = b"H"  # D7
ARABIC = b"R"  # D8-DF: Arabic, Syriac, Thaana, NKo
BRAHMIC = b"I"  # 0xE0: U+0800-0FFF, the Indic scripts, Thai, Lao, Tibetan
E1_LETTERS = b"X"  # 0xE1: U+1000-1FFF, Myanmar, Georgian, Khmer, Vietnamese ạ ế ộ (Latin Extended Additional)
SYMBOLS = b"P"  # 0xE2: U+2000-2FFF, “ ” — …, arrows, maths, box drawing, ✅ ❤
KANA = b"J"  # 0xE3: U+3000-3FFF, CJK punctuation 、。「」, hiragana, katakana
HAN = b"K"  # 0xE4-0xE9: CJK unified ideographs
HANGUL = b"O"  # EA-ED: Hangul syllables
COMPAT = b"F"  # EE-EF: private use, CJK compatibility, variation selectors, fullwidth ，！（）
ASTRAL = b"E"  # F0-F4: four-byte characters, emoji, CJK extension B

_NON_ASCII = ((LATIN1_SYM, 0xC2, 0xC2), (LATIN1, 0xC3, 0xC3), (LATIN_EXT, 0xC4, 0xCD), (GREEK, 0xCE, 0xCF),
              (CYRILLIC, 0xD0, 0xD4), (ARMENIAN, 0xD5, 0xD6), (HEBREW, 0xD7, 0xD7), (ARABIC, 0xD8, 0xDF),
              (BRAHMIC, 0xE0, 0xE0), (E1_LETTERS, 0xE1, 0xE1), (SYMBOLS, 0xE2, 0xE2), (KANA, 0xE3, 0xE3),
              (HAN, 0xE4, 0xE9), (HANGUL, 0xEA, 0xED), (COMPAT, 0xEE, 0xEF), (ASTRAL, 0xF0, 0xFF))

# --- Fitted weights: tokens per count ------------------------------------------------------------
# Fitted by bench/calibrate_tokens.py on bench/tokens_corpus.py (samples of 2,000+ characters) against
# the larger of cl100k_base and the Claude-style BPE: a linear program minimises the spread of
# estimate / real over all samples, the bounds keep each weight physically plausible (a character of
# n UTF-8 bytes costs at most about n tokens), and the scale centres the spread inside the target band
# [0.95, 1.30]. Re-run that script and paste its output here when the features change.
W_LOWER = 0.000  # English letters cost nothing by themselves: their words are single tokens
W_LOWER_RARE = 1.500  # k q z j: each stands for a word the vocabularies hold only in pieces
W_UPPER = 0.290
W_DIGIT = 0.360
W_PUNCT = 0.242
W_NEWLINE = 0.388
W_PUNCT_RUN = 0.774  # a run of punctuation is usually one token, `(`, `):`, `"},`
W_SPACE_RUN = 0.322  # two or more spaces (indentation, alignment) make a token of their own
W_CAMEL = 0.513  # lower-to-upper inside an identifier is a token boundary: getUser|Name
W_ALNUM_SWITCH = 0.810  # letter/digit boundaries split hex, ids, base64
W_LONG_WORD = 0.693  # words of 7+ letters after a space are often two pieces
W_WORD = 1.003  # every word in an alphabetic script starts a token
W_FOREIGN_LETTER = 0.104  # per letter of a block, scaled by how little that block looks like English
W_ENDS_AI = 1.500  # a word ending in "a" or "i" (not the article): likely not English
W_LATIN1_SYM = 1.000
W_LATIN1 = 1.372
W_LATIN_EXT = 2.066
W_GREEK = 1.232
W_CYRILLIC = 0.440
W_ARMENIAN = 2.200
W_HEBREW = 1.073
W_ARABIC = 0.938
W_DEVANAGARI = 1.530
W_THAI = 2.020
W_BRAHMIC = 2.335  # the other Indic scripts, Lao, Tibetan: mostly byte-level in both vocabularies
W_E1 = 2.115
W_SYMBOLS = 1.174
W_ZWJ = 1.500
W_KANA = 1.283
W_HAN_COMMON = 1.110  # the 3,755 hanzi of GB2312 level 1: mostly single tokens
W_HAN = 2.408  # every other ideograph (traditional, Japanese-only, rare): two or three byte tokens
W_HANGUL = 1.608
W_COMPAT = 1.000
W_VARIATION_SELECTOR = 1.000
W_EMOJI = 3.655  # per emoji code point; skin tones, flags and ZWJ families make long byte-token runs
W_ASTRAL = 2.500
# A block of text whose letters are less than this share "th" counts as partly not English: its
# letters cost W_FOREIGN_LETTER each, in proportion to how far below the share it is. Chosen with
# the weights by a grid search (English prose runs at 0.021, Python at 0.013).
TH_ENGLISH_SHARE = 0.005

# --- Translate tables ----------------------------------------------------------------------------


def _class_table() -> bytes:
    t = bytearray(PUNCT * 256)  # ASCII punctuation and control characters
    for lo, hi, code in ((0x61, 0x7A, LOWER), (0x41, 0x5A, UPPER), (0x30, 0x39, DIGIT)):
        t[lo:hi + 1] = code * (hi - lo + 1)
    for ch in RARE_IN_ENGLISH:
        t[ch] = LOWER_RARE[0]
    t[ord("t")], t[ord("h")], t[ord("a")], t[ord("i")] = LOWER_T[0], LOWER_H[0], LOWER_AI[0], LOWER_AI[0]
    t[0x20] = t[0x09] = SPACE[0]
    t[0x0A] = t[0x0D] = NEWLINE[0]
    for code, lo, hi in _NON_ASCII:
        t[lo:hi + 1] = code * (hi - lo + 1)
    return bytes(t)


def _mask(mapping: dict[bytes, bytes], other: bytes) -> bytes:
    t = bytearray(other * 256)
    for codes, to in mapping.items():
        for ch in codes:
            t[ch] = to[0]
    return bytes(t)


_CLASSES = _class_table()
_CONTINUATION = bytes(range(0x80, 0xC0))
_LOWERS = LOWER + LOWER_RARE + LOWER_T + LOWER_H + LOWER_AI
_ASCII_CODES = _LOWERS + UPPER + DIGIT + PUNCT + SPACE + NEWLINE
_LETTERS = _LOWERS + UPPER
# Word shapes: lowercase "a", uppercase "A", digit "0", space " ", anything else "#".
_SHAPE = _mask({_LOWERS: b"a", UPPER: b"A", DIGIT: b"0", SPACE: b" "}, b"#")
# Punctuation and spaces against everything else, to count their runs.
_PUNCT_RUNS = _mask({PUNCT: b"."}, b"x")
_SPACE_RUNS = _mask({SPACE: b" "}, b"x")
# Letters of every alphabetic script against the rest, for word counts.
_WORDS = _mask({_LETTERS + LATIN1 + LATIN_EXT + GREEK + CYRILLIC + ARMENIAN + HEBREW + ARABIC + E1_LETTERS: b"a"},
               b" ")
# GB2312 encodes each hanzi as two bytes >= 0xA1; lead bytes B0-D7 are level 1, the 3,755 most common.
_BELOW_GB2312 = bytes(range(0xA1))
_NOT_GB2312_LEVEL1 = bytes(range(0xB0)) + bytes(range(0xD8, 0x100))
_ASCII_BYTES = bytes(range(0x80))

FEATURES = ("lower", "lower_rare", "upper", "digit", "punct", "newline", "punct_run", "space_run", "camel",
            "alnum_switch", "long_word", "word", "foreign_letter", "ends_ai", "latin1_sym", "latin1", "latin_ext",
            "greek", "cyrillic", "armenian", "hebrew", "arabic", "devanagari", "thai", "brahmic", "e1", "symbols",
            "zwj", "kana", "han_common", "han", "hangul", "compat", "variation_selector", "emoji", "astral")
WEIGHTS = (W_LOWER, W_LOWER_RARE, W_UPPER, W_DIGIT, W_PUNCT, W_NEWLINE, W_PUNCT_RUN, W_SPACE_RUN, W_CAMEL,
           W_ALNUM_SWITCH, W_LONG_WORD, W_WORD, W_FOREIGN_LETTER, W_ENDS_AI, W_LATIN1_SYM, W_LATIN1, W_LATIN_EXT,
           W_GREEK, W_CYRILLIC, W_ARMENIAN, W_HEBREW, W_ARABIC, W_DEVANAGARI, W_THAI, W_BRAHMIC, W_E1, W_SYMBOLS,
           W_ZWJ, W_KANA, W_HAN_COMMON, W_HAN, W_HANGUL, W_COMPAT, W_VARIATION_SELECTOR, W_EMOJI, W_ASTRAL)
_NO_NON_ASCII = (0,) * 22
_ASCII_WEIGHTS = WEIGHTS[:len(WEIGHTS) - len(_NO_NON_ASCII)]
_BLOCK = 1024  # characters per block when judging how English the text is


def _ascii_features(c: bytes, th_english_share: float = TH_ENGLISH_SHARE) -> tuple[float, ...]:
    """The first 14 features, from the class string `c` (all a text has when it is ASCII)."""
    count = c.count
    rare = count(LOWER_RARE)
    shape = c.translate(_SHAPE)
    words = c.translate(_WORDS)
    # How much of the text is not English, judged block by block (so a reply that switches between
    # English and Indonesian paragraphs is charged for its Indonesian ones) by the share of "th".
    foreign = 0.0
    for start in range(0, len(c), _BLOCK):
        letters = words.count(b"a", start, start + _BLOCK)
        if letters:
            english = count(b"th", start, start + _BLOCK) / (letters * th_english_share)
            if english < 1.0:
                foreign += letters * (1.0 - english)
    return (shape.count(b"a") - rare, rare, count(UPPER), count(DIGIT), count(PUNCT), count(NEWLINE),
            c.translate(_PUNCT_RUNS).count(b"x."), c.translate(_SPACE_RUNS).count(b"x  "),
            shape.count(b"aA"), shape.count(b"a0") + shape.count(b"0a"), shape.count(b" aaaaaaa"),
            words.count(b" a"), foreign,
            count(LOWER_AI + SPACE) - count(SPACE + LOWER_AI + SPACE))


def features(text: str, th_english_share: float = TH_ENGLISH_SHARE) -> tuple[float, ...]:
    """The counts that `estimate` weighs, in FEATURES order (bench/calibrate_tokens.py fits on them)."""
    b = text.encode("utf-8", "surrogatepass")
    c = b.translate(_CLASSES, _CONTINUATION)
    ascii_part = _ascii_features(c, th_english_share)
    if text.isascii():
        return ascii_part + _NO_NON_ASCII
    rest = c.translate(None, _ASCII_CODES)
    (latin1_sym, latin1, latin_ext, greek, cyrillic, armenian, hebrew, arabic, brahmic, e1, symbols, kana, han, hangul,
     compat, astral) = (rest.count(code) for code, _, _ in _NON_ASCII)
    devanagari = thai = zwj = han_common = selectors = emoji = 0
    # Split the mixed lead bytes by their second byte, only where that lead byte occurs at all, and in
    # the UTF-8 with ASCII deleted (a lead byte is still followed by its own continuation bytes there).
    wide = b.translate(None, _ASCII_BYTES) if brahmic or symbols or compat or astral else b""
    if brahmic:
        devanagari = wide.count(b"\xe0\xa4") + wide.count(b"\xe0\xa5")
        thai = wide.count(b"\xe0\xb8") + wide.count(b"\xe0\xb9")
        brahmic -= devanagari + thai
    if symbols:
        zwj = wide.count(b"\xe2\x80\x8d")  # joins emoji sequences
        symbols -= zwj
    if han:
        # Common hanzi are single tokens, the rest two or three: GB2312 holds the common simplified ones.
        gb = text.encode("gb2312", "ignore").translate(None, _BELOW_GB2312)
        han_common = min(han, len(gb[0::2].translate(None, _NOT_GB2312_LEVEL1)))
        han -= han_common
    if compat:
        selectors = wide.count(b"\xef\xb8")
        compat -= selectors
    if astral:
        emoji = wide.count(b"\xf0\x9f")
        astral -= emoji
    return ascii_part + (latin1_sym, latin1, latin_ext, greek, cyrillic, armenian, hebrew, arabic, devanagari, thai,
                         brahmic, e1, symbols, zwj, kana, han_common, han, hangul, compat, selectors, emoji, astral)


def estimate(text: str) -> int:
    """Tokens `text` will take, erring high: within about -5%/+30% of real BPE counts on long text."""
    if not text:
        return 0
    if text.isascii():  # most text is: the other 22 counts are zeros (the same sum, fewer steps)
        counts = _ascii_features(text.encode().translate(_CLASSES))
        return max(1, math.ceil(sum(map(operator.mul, _ASCII_WEIGHTS, counts))))
    return max(1, math.ceil(sum(map(operator.mul, WEIGHTS, features(text)))))
