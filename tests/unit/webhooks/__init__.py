"""Unit tests of src/agentsearch/pipeline/webhooks/: targets, signatures and delivery."""
