"""Retrieval: local embeddings and the Milvus vector store."""
