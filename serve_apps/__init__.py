"""Ray Serve applications: one per model (vLLM engines) and the OpenAI gateway."""
