"""Text of PDF and .docx documents, through the optional `docs` extra (pypdf, python-docx).

Shared by read_file and the knowledge base; neither needs the other to read a document.
"""
from __future__ import annotations
from orchestrator.core.extras import install_hint

import io


class DocumentError(Exception):
    """The document's text cannot be had: the extra is missing, or the file is damaged or encrypted."""


def document_text(suffix: str, data: bytes) -> str:
    """Text of a PDF or .docx, through the optional `docs` extra (pypdf, python-docx)."""
    try:
        if suffix == ".pdf":
            import pypdf
        else:
            import docx
    except ImportError:
        raise DocumentError(f"reading {suffix} files needs the `docs` extra: {install_hint('docs')}") \
            from None
    try:
        if suffix == ".pdf":
            reader = pypdf.PdfReader(io.BytesIO(data))
            return "\n\n".join(f"--- page {i} ---\n{page.extract_text() or ''}"
                               for i, page in enumerate(reader.pages, 1))
        document = docx.Document(io.BytesIO(data))
        parts = [p.text for p in document.paragraphs]
        parts += ["\t".join(cell.text for cell in row.cells) for table in document.tables for row in table.rows]
        return "\n".join(parts)
    except Exception as exc:  # a damaged or encrypted document is the model's to hear about
        raise DocumentError(f"could not extract text from this {suffix} file: {type(exc).__name__}: {exc}") from None
