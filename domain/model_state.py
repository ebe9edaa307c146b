"""Lifecycle of a model as the gateway and the fleet see it."""

from enum import StrEnum


class ModelState(StrEnum):
    """Where a model is in its life. The gateway routes only to READY models.

    LOADING -> READY -> DRAINING -> REMOVED is the normal path; FAILED is terminal for a
    deployment attempt (the manager rolls back or removes it); DEGRADED means it was READY
    but lost replicas (engine death, node loss) and Serve is replacing them. A parked model
    goes READY -> DRAINING -> PARKED and comes back PARKED -> WAKING -> READY.
    """

    LOADING = "loading"
    """Placement group and engines are starting; requests get 503 + Retry-After."""
    READY = "ready"
    """Healthy and warmed: the gateway sends it traffic."""
    DRAINING = "draining"
    """No new requests; in-flight requests and streams finish up to the drain deadline."""
    DEGRADED = "degraded"
    """Was READY, has no running replica right now; requests get 503 until it recovers."""
    FAILED = "failed"
    """Could not be brought up; the error is kept for `status`."""
    PARKED = "parked"
    """Its engine is unloaded and its accelerators free (`switchyard park`); its name,
    aliases and routes are kept and /v1/models lists it. Requests get 503 until it is woken."""
    WAKING = "waking"
    """Coming back from PARKED: admission, then a cold start of its engine (park mode
    `unload`); requests get 503 + Retry-After."""
    REMOVED = "removed"
    """Gone; kept as a tombstone so requests naming it learn its replacement."""
