"""One call on a control actor (the fleet manager, the registry) from a command, with a
deadline: after the head's loss Ray starts these actors again on the new head, and a call
made before one is placed would otherwise wait for as long as the head takes, or forever
when it never comes back (an `add` that did not return in 600 s)."""

from __future__ import annotations

from typing import Any

from cluster.startup.ray_runtime import advertised_address
from domain.exit_codes import ControlActorUnresponsive

ANSWER_S = 60.0
"""How long a command waits for one answer of a control actor. Not an operation's whole
run (an engine start takes minutes): during one, the manager's progress is polled, and this
is how long it may go unanswered."""


def answer(ref: Any, actor: str, what: str, *, timeout_s: float = ANSWER_S) -> Any:
    """`ray.get(ref)` within `timeout_s`; ControlActorUnresponsive, in one line naming
    `actor` and `what` was asked, when no answer comes."""
    import ray
    from ray.exceptions import GetTimeoutError

    try:
        return ray.get(ref, timeout=timeout_s)
    except GetTimeoutError:
        raise ControlActorUnresponsive(
            advertised_address(),
            f"the {actor} did not answer {what} within {timeout_s:.0f} s (Ray starts it "
            "again once the head is back after a failure); nothing was changed: retry once "
            "`switchyard status` answers",
        ) from None
