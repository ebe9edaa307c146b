"""The data plane: the OpenAI gateway (`gateway/`), the relay from it to the engines
(`relay/`), the engine replicas (`engine/`, one Ray Serve application per model), the fleet
registry they all follow (`registry/`) and the endpoint's tenants (`tenants/`).
`internals.py` holds every private API of another package that Switchyard uses.
"""
