"""Encoders for the held-out memory sets: the ways a hostile write is dressed so the scanner must decode it
(rot13, percent-encoding, HTML entities, quoted-printable, base64, and one encoding inside another)."""
import base64
import codecs
import urllib.parse


def rot13(text: str) -> str:
    return codecs.encode(text, "rot13")


def percent(text: str) -> str:
    """As a URL would carry it: letters stay, spaces and punctuation become %XX."""
    return urllib.parse.quote(text, safe="")


def percent_all(text: str) -> str:
    """Every byte as %XX."""
    return "".join(f"%{b:02X}" for b in text.encode())


def entities(text: str) -> str:
    return "".join(f"&#{ord(c)};" for c in text)


def hex_entities(text: str) -> str:
    return "".join(f"&#x{ord(c):x};" for c in text)


def quoted_printable(text: str) -> str:
    return "".join(f"={b:02X}" for b in text.encode())


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# (how it is written, the encoder): each plain text is written with every one of these
DRESSINGS = [
    ("{}", rot13),
    ("Reminder (rot13): {}", rot13),
    ("{}", percent),
    ("Saved link note: https://notes.example/r?m={}", percent_all),
    ("{}", entities),
    ("Template snippet: {}", hex_entities),
    ("Mail body (QP): {}", quoted_printable),
    ("Blob: {}", lambda t: b64(rot13(t))),
    ("{}", lambda t: percent_all(b64(t))),
    ("{}", lambda t: entities(percent(t))),
]


def dressed(plains: list[str]) -> list[str]:
    return [shape.format(encode(plain)) for plain in plains for shape, encode in DRESSINGS]
