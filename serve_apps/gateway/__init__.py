"""The OpenAI-compatible gateway: the ASGI app, its routes, guard, errors and OpenAI bodies,
and its Ray Serve wiring.
"""
