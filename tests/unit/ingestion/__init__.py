"""Unit tests of pipeline/ingestion/: ingestion progress and recovery."""
