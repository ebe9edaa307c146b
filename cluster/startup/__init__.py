"""Starting or joining a Ray cluster: the local head, token authentication, Ray and Serve
settings, and which nodes serve the endpoint.
"""
