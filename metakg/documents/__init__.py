"""Documents into extraction records: PDF (its text layer), Word, HTML, Markdown and plain text, each read into
blocks (headings, paragraphs, list items, tables) that know their page, then cut into chunks along the
document's own structure, each chunk knowing its file, pages, section path and character offsets.

Each library is used in one module: :mod:`metakg.documents.pdf` (pypdfium2), :mod:`metakg.documents.docx`
(python-docx), :mod:`metakg.documents.html` (lxml), :mod:`metakg.documents.markdown` (markdown-it-py).
"""
