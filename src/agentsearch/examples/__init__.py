"""The demo's sample corpus and its follow-up questions, shipped inside the package (``agentsearch demo``,
``agentsearch eval followups``)."""
