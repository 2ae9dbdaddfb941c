"""Token estimation by script (E6): a fast, deliberately pessimistic count without a tokenizer.

ASCII runs at about 4 characters per token, CJK at 1, everything else at 2; regexes do the
counting so no Python loop walks characters.
"""
from __future__ import annotations

import re

_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def estimate(text: str) -> int:
    if not text:
        return 0
    if text.isascii():
        return len(text) // 4 + 1
    other = len(_NON_ASCII.findall(text))
    cjk = len(_CJK.findall(text))
    return (len(text) - other) // 4 + cjk + (other - cjk + 1) // 2 + 1
