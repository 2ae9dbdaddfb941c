"""Encoded text the memory scanner reads through: base64, hex, rot13, percent-encoding, HTML entities
and quoted-printable, each decoded to a plain reading that is scanned like the note itself.

Only what decodes to text is read (a hash or an image's bytes do not), and rot13 only when its reading is
more like language than the text as written, so ordinary notes are not read as gibberish turned words."""
from __future__ import annotations

import base64
import binascii
import codecs
import html
import quopri
import re
import urllib.parse
from collections.abc import Iterator
from functools import cache

from orchestrator.core.patterns import Pattern

_HEX = Pattern(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){16,}(?![0-9A-Fa-f])")
_BASE64 = Pattern(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/=_-])")
_PERCENT = Pattern(r"%[0-9A-Fa-f]{2}")
_ENTITY = Pattern(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_QUOTED = Pattern(r"=[0-9A-F]{2}")
_LATIN_WORD = Pattern(r"[A-Za-z]{2,}")
_LONGEST = 8000  # a decoded reading longer than a memory entry could hold is not read


def readings(text: str) -> Iterator[tuple[str, str]]:
    """(the encoding, the decoded text) for each encoding found in `text`."""
    for m in _BASE64.finditer(text):
        if decoded := _base64(m.group()):
            yield "base64", decoded
    for m in _HEX.finditer(text):
        if decoded := printable(bytes.fromhex(m.group())):
            yield "hex", decoded
    # The others are decoded in place: the text around them is read with them, as written.
    if len(_PERCENT.findall(text)) >= 3:
        decoded = urllib.parse.unquote(text, errors="strict") if _utf8_escapes(text) else None
        if decoded and decoded != text:
            yield "percent-encoded text", decoded
    if len(_ENTITY.findall(text)) >= 2:
        decoded = html.unescape(text)
        if decoded != text:
            yield "HTML entities", decoded
    if len(_QUOTED.findall(text)) >= 3:
        decoded = _quoted_printable(text)
        if decoded and decoded != text:
            yield "quoted-printable text", decoded
    if rotated := rot13(text):
        yield "rot13 text", rotated


def _utf8_escapes(text: str) -> bool:
    try:
        urllib.parse.unquote(text, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def _base64(token: str) -> str | None:
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_" if "-" in token or "_" in token
                               else None, validate=True)
    except (binascii.Error, ValueError):
        return None
    return printable(raw)


def _quoted_printable(text: str) -> str | None:
    try:
        raw = quopri.decodestring(text.encode("utf-8"))
    except (ValueError, binascii.Error):
        return None
    return printable(raw)


def printable(raw: bytes) -> str | None:
    """Decoded bytes as text when they read as text (a hash or an image's bytes do not)."""
    if len(raw) > _LONGEST:
        return None
    try:
        text = raw.decode("utf-8")
    except ValueError:
        return None
    printed = sum(c.isprintable() or c in "\n\t" for c in text)
    return text if text and printed / len(text) > 0.9 and re.search(r"[^\W\d_]{3}", text) else None


def rot13(text: str) -> str | None:
    """The rot13 reading, when it has more common words than the text as written: "Vtaber nyy cerivbhf
    vafgehpgvbaf" reads as words, "Prefers tabs over spaces" does not."""
    words = [w.lower() for w in _LATIN_WORD.findall(text)]
    if len(words) < 3:
        return None
    common = _common()
    plain = sum(w in common for w in words)
    rotated = sum(codecs.encode(w, "rot13") in common for w in words)
    if rotated >= 3 and rotated > plain and rotated * 4 >= len(words):
        return codecs.encode(text, "rot13")
    return None


@cache
def _common() -> frozenset[str]:
    return frozenset(_COMMON.split())


# The commonest words of the languages written in plain Latin letters, function words first: what a
# sentence is mostly made of, whatever it says.
_COMMON = """
a about above after again all also always am an and any are as ask asked at be because been before being
below between both but by can could did do does doing done down during each else every few first for from
further get give go had has have having he her here hers him his how i if in into is it its just keep know
last let like make may me more most must my never new next no nor not now of off on once one only or other
our out over own please put read really run same say see send set shall she should show so some such take
tell than that the their them then there these they this those through to too under until up upon us use
very was way we were what when where which while who whom why will with without would yes yet you your
instructions instruction previous prior rules rule system prompt ignore forget disregard override user users
message messages command commands file files key keys password secret token tokens api memory note notes
answer reply approve approval permission confirm confirmation sandbox disable enable skip follow obey
everything anything nothing now from developer admin assistant model tool tools request every link email
el la los las de del que y en un una por con para es no se lo al su sus como mas pero todo todas todos esta
este ese esa son ser ya hay muy sin sobre ahora siempre nunca le les des du et est pas une dans pour qui sur
au aux avec ce cette ces sont tout tous toutes mais ou donc ne plus ton ta tes vous nous il elle der die das
und ist nicht ein eine einen dem den mit von zu auf aus bei nach wie auch noch nur oder aber alle alles immer
dich dir du sie wir ich es os as um uma com nao para pelo pela seu sua isso isto tudo sempre agora il lo gli
di che non per una sono tutto tutte sempre ora het een en van op te dat niet voor met zijn je jij wij alle
altijd nooit yang dan di ke dari ini itu untuk dengan tidak ada semua selalu jangan kamu anda saya
"""
