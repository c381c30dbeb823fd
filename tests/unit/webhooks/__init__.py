"""Unit tests of pipeline/webhooks/: targets, signatures and delivery."""
