"""Unit tests of src/agentsearch/pipeline/operations/: backup and retention."""
