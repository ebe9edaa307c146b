"""The fleet registry: the registry actor, the routing table, engine endpoints, and how a
gateway replica resolves a request's model to a route.
"""
