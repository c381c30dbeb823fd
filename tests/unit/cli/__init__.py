"""Unit tests of src/agentsearch/cli/: the agentsearch command."""
