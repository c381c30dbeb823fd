"""What one search returns: the documents, with the metrics, warnings and suggestions that say how they were found.

The retriever makes it and the fusion of a query's translations (``language_route.fuse_translations``) merges
several; what a partial or empty one means for the job is ``agentsearch.pipeline.retrieval.outcome``'s to say.

Usage::

    result = retriever.search("c_ab12", "solar output 2025", SearchConfig(top_k=5))   # a RetrievalResult
    result.documents, result.metrics["returned"], result.warnings
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentsearch.pipeline.documents import Document


@dataclass
class RetrievalResult:
    documents: list[Document]
    metrics: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
