"""Unit tests of pipeline/security/: users, keys, groups, audit, egress and rate limits."""
