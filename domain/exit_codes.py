"""Process exit codes shared by every command, so scripts and `ray job submit` can branch."""

from enum import IntEnum


class ExitCode(IntEnum):
    """What a `switchyard` command's exit status means."""

    OK = 0
    """The command did what was asked (a plan that admits, a swap that completed)."""
    REJECTED = 1
    """The request was valid but refused or undone: not admitted, rolled back."""
    BAD_INPUT = 2
    """The input could not be understood: unreadable file, unknown name, bad number."""
    HEAD_UNAVAILABLE = 3
    """The cluster's head does not answer (stopped, or recovering): nothing was done."""


class UserInputError(Exception):
    """Bad input from the user. The message is one line and names the field and value."""


class Rejected(Exception):
    """A valid request that Switchyard refused; the message says why."""


class HeadUnavailable(Exception):
    """The cluster's GCS does not answer: stopped, or restarting after a failure."""

    def __init__(self, address: str) -> None:
        super().__init__(
            f"the Ray head at {address} does not answer (its GCS is down, or recovering "
            "after a failure); nothing was changed: retry once `switchyard status` shows "
            "the head back"
        )
        self.address = address


class ControlActorUnresponsive(HeadUnavailable):
    """The cluster answers but one of its control actors (the fleet manager, the registry)
    did not within its deadline: Ray is starting it again after the head's loss, or cannot
    place it (no head node yet). Exits HEAD_UNAVAILABLE, as a head that does not answer."""

    def __init__(self, address: str, message: str) -> None:
        Exception.__init__(self, message)
        self.address = address


class EndpointUnreachable(Exception):
    """`status --url`: the endpoint did not answer (nothing listens, or its registry is
    away); exits HEAD_UNAVAILABLE, as a head that does not answer does."""
