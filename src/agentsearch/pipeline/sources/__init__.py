"""Sources: where a collection's documents come from, kept in step by runs.

A source (``store``) belongs to a collection: a kind (``kinds/``: ``web``, ``feed``, ``git``, one module each), its
config checked by the kind's model, its credentials sealed (``credentials``), a schedule. A run (``run``) lists the
source's items through the kind, hands the new and changed to the ingestion uploads use (``ingest``), removes the
documents of items gone, and records its counts. Every HTTP read goes through the egress guard with limits
(``fetch``). The worker's tasks (``agentsearch.worker.sources``) only call ``run.run_source`` and send what it names.
"""
