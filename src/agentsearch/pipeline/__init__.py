"""agentsearch core: the agent contract, the built-in agents, retrieval, answers, caches and breakers.

Nothing in this package imports Celery or FastAPI; ``worker`` and ``api`` build on it.
"""
