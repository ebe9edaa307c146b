"""The relay: a resolved request forwarded to its model's engines (`forwarder.py`), over the
engine's own HTTP port with the Serve handle as the fallback, and the answer streamed back.
"""
