"""Celery side of agentsearch: the app, the thin tasks, the canvas builder and the embedded worker."""
