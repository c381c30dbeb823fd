"""Unit tests of src/agentsearch/pipeline/observability/: logs, metrics and tracing."""
