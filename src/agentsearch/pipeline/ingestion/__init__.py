"""Ingestion, from the upload to the indexed chunk. The format readers are ``agentsearch.pipeline.parsing``'s; the
Celery tasks (``agentsearch.worker.parsing``, ``agentsearch.worker.ingestion``) only call the bodies here and send the
tasks these name.

- ``uploads``: the files of an upload read (name, format, JSON Lines lines) and stored ``pending`` with their bytes;
  ``documents_in``: a document as a sender gives it, and a JSON Lines file checked whole; ``documents``: the
  document rows as their readers find them, and the writes of a row and its file.
- ``file_parse``: an uploaded file parsed in the sandboxed child, a window of pages at a time for a long one
  (``parse_document``'s body); ``files``: a parsed (or local) file as one document's text and parts;
  ``attachments``: an e-mail's attachments as documents of their own, within their sender's access and quota.
- ``chunking``: a document cut into chunks along its parts; ``indexing``: the chunks embedded and analysed as the
  rows Milvus indexes; ``index_batch``: a batch of document rows indexed and ended (``ingest_documents``' body).
- ``lease``: which task carries each document and what it lost; ``progress``: how far a collection's upload is and
  when it should end; ``recovery``: the documents whose worker or task was lost, for the reaper.
"""
