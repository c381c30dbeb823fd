"""Agentic search modes: loops over the retrieval engine instead of a single pass.

- ``config``: the iterative mode's settings (target, budget, thresholds, per-iteration limit, test mode);
- ``evaluate``: four-criteria scoring of results (LLM, or offline from retrieval signals) and the keep/discard
  decision against a threshold;
- ``refine``: the next query from what was kept and discarded (LLM, or offline pseudo-relevance feedback);
- ``sufficiency``: does what was kept answer the query (LLM, or offline aspect coverage), follow-up queries, and the
  iteration budget chosen by the query's complexity;
- ``compress``: long documents cut to their query-relevant sentences before the answer (LLM or extractive);
- ``loop``: one iteration as a step over a small serialisable state, and ``next_action`` (continue or stop);
- ``profiles``: specialist profiles run side by side, merged by category;
- ``seen``: what a user was already shown, so later runs skip it (by id, URL and near-duplicate embedding).

Nothing here imports Celery or FastAPI: the worker's tasks call these functions and enqueue the next step.
"""
