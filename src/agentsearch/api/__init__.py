"""The HTTP API (FastAPI) and the ``agentsearch`` command line."""
