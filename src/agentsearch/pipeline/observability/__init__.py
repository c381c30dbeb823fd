"""Operators' view of the service: structured logs, Prometheus metrics aggregated in Redis, OpenTelemetry traces.

Framework-free: the API and the worker call these from their own start-up hooks.

- ``logs``: ``configure_logging(settings)``; ``log_context(job_id=..., task_id=..., agent_id=...)`` puts ids on
  every log line written inside it.
- ``metrics``: ``MetricsRecorder`` (workers write counters and histogram buckets to Redis);
  ``exposition.AgentSearchCollector`` (the API reads them back for ``/metrics``).
- ``tracing``: ``configure_tracing(settings, service)``; ``stage_span``/``agent_span``/``emit_job_span``.
"""
