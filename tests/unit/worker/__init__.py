"""Unit tests of src/agentsearch/worker/: the Celery app, its canvases and its tasks."""
