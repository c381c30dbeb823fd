"""Unit tests of src/agentsearch/pipeline/eval/: the evaluations."""
