"""Unit tests of worker/: the Celery app, its canvases and its tasks."""
