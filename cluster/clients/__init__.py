"""The control plane's API for the CLI: one typed client for the fleet manager and one for
the fleet registry. Commands reach the cluster only through these (and `cluster/startup/`
to start or stop it); each client has a Protocol the commands are written against, so their
unit tests run on in-memory clients (tests/support/memory_clients.py).
"""
