"""Unit tests of pipeline/observability/: logs, metrics and tracing."""
