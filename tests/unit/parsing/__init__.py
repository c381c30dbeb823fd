"""Unit tests of src/agentsearch/pipeline/parsing/: the readers of uploaded files."""
