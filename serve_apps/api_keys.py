"""Bearer-token check for the endpoint, in constant time so timing leaks nothing."""

from __future__ import annotations

import hmac

from pydantic import SecretStr


class ApiKeyCheck:
    def __init__(self, keys: tuple[SecretStr, ...]) -> None:
        self._keys = tuple(k.get_secret_value().encode() for k in keys)

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def allows(self, authorization: str | None) -> bool:
        if not self._keys:
            return True
        if not authorization or not authorization.startswith("Bearer "):
            return False
        offered = authorization[len("Bearer ") :].strip().encode()
        # Compare against every key, always, so the time taken does not reveal which
        # key (or how much of one) matched.
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(offered, key)
        return matched
