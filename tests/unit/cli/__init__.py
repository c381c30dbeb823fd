"""Unit tests of cli/: the agentsearch command."""
