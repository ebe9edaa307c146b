"""Metrics, Prometheus and Grafana: one catalogue of metric names and what is built from it."""
