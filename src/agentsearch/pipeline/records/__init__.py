"""The records every layer reads, at the bottom of ``src/agentsearch/pipeline/``: what an agent's run was, what a job
keeps of it, and what a finished job answered.

- ``agent_runs``: the stages, the spec a job runs an agent with (``AgentSpec``), the record of each run
  (``AgentResult``, ``AgentRun``) and a stored artifact's reference (``ArtifactRef``);
- ``job_response``: a finished job's response (``JobResponse``) as its row keeps it and the API serves it.

They import nothing above ``agentsearch.pipeline.documents`` and ``agentsearch.pipeline.platform``: the agents, metrics
and traces, webhooks, the job, the API and the worker all read them, and none of those is needed to read one.
"""
