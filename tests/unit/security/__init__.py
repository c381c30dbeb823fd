"""Unit tests of src/agentsearch/pipeline/security/: users, keys, groups, audit, egress and rate limits."""
