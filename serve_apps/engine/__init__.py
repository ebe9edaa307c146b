"""Engine replicas: the vLLM replica (Ray Serve LLM plus vLLM's own HTTP port), the fake engine
that stands in for it, their placement bundles and endpoint registration.
"""
