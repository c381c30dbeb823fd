"""The previous release's messages, states and task signatures (``capture.py``), and how it reads ours."""
