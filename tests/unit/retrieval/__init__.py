"""Unit tests of src/agentsearch/pipeline/retrieval/: the embedders, the vector store, the retriever and its outcome."""
