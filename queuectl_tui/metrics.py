"""Metrics: what the store counts, as Prometheus text and as the reference queue's JSON keys."""
