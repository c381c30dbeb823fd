"""Unit tests of pipeline/text/: text locations."""
