"""Tracing: spans for every user line (GenAI semantic conventions), to a JSONL file and/or OTLP.

`spans` is the recorder the engine and the room instrument; `session.tracing` turns it on for a run.
"""
