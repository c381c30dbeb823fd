"""Unit tests of pipeline/eval/: the evaluations."""
