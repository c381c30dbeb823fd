"""Unit tests of pipeline/job/: a job's stages, state, store, answer and artifacts."""
