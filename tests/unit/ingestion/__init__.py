"""Unit tests of src/agentsearch/pipeline/ingestion/: ingestion progress and recovery."""
