"""The control plane: the fleet core (`fleet/`, no Ray) and what runs it on a Ray cluster.

`clients/` is the CLI's way in (typed clients of the manager and the registry);
`ray_adapters/` implements the core's ports on Ray and Serve and holds the manager actor;
`startup/` starts or joins a cluster; `telemetry/` measures the fleet; `inventory/` knows each
node's hardware; `staging/` puts weights on the nodes; `miniature_generator/` writes the
small models tests and `make run` serve.
"""
