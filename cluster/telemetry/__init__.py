"""What the manager measures and samples: fleet gauges on Ray, live tokens/s and TTFT per
model, and where Prometheus finds the metrics.
"""
