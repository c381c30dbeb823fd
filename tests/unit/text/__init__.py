"""Unit tests of src/agentsearch/pipeline/text/: text locations."""
