"""Unit tests of pipeline/parsing/: the readers of uploaded files."""
