"""Two short sources and a question one of them answers: what the answer step's unit tests ask a fake LLM about."""

from __future__ import annotations

from agentsearch.pipeline.agents.base import Document

DOCS = [
    Document(id="sb50", title="Super Bowl 50", score=0.91,
             text="The Denver Broncos defeated the Carolina Panthers 24–10 to earn their third Super Bowl title."),
    Document(id="sb49", title="Super Bowl XLIX", score=0.80,
             text="The New England Patriots won Super Bowl XLIX. The game was played in Glendale, Arizona."),
]
QUESTION = "Who won Super Bowl XLIX?"
