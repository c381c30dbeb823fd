"""Unit tests of pipeline/retrieval/: the embedders, the vector store, the retriever and its outcome."""
