"""Unit tests of pipeline/operations/: backup and retention."""
