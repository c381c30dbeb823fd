"""A collection's ingestion as its owner and the reaper see it, beside the chunking and embedding of
``pipeline.ingest``: which task carries each document and what it lost (``lease``), how far an upload is and when it
should end (``progress``), and the documents whose worker or task was lost (``recovery``).
"""
