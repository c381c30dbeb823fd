"""Unit tests of src/agentsearch/pipeline/job/: a job's stages, state, store, answer and artifacts."""
