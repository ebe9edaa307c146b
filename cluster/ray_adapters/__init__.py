"""The fleet core's ports implemented on Ray and Ray Serve, and the manager actor that composes
them on the head node.
"""
