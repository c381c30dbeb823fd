"""Celery side of agentsearch: the app, the tasks, the canvas builders and the embedded worker.

- ``app``: the Celery app and its configuration;          ``lifecycle``: what a worker does as it starts and stops;
- ``job_tasks``: the job's step tasks (one ``step_task``); ``canvas``: the workflow as canvases, and a job put on
  the queues (``enqueue_job``);                             ``agentic_tasks``: the agentic loops and profile schedules;
- ``reaper``: lost and overdue jobs;                       ``liveness``: which worker nodes are alive;
- ``ingestion``: documents indexed and deleted;            ``observability``: logs and traces of tasks;
- ``embedded``: an in-process worker on threads (embedded mode);
- ``webhooks``: completion webhook deliveries and the sweep for those that are due.
"""
