"""A parallel layout: how one model is spread over GPUs, in vLLM's terms."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """`tp` x `pp` GPUs per engine, `dp` data-parallel ranks, optional expert parallel, and
    `dcp` decode-context-parallel ranks inside each TP group (they shard the KV cache by
    token; they add no GPUs).

    For a MoE model the DP ranks are not independent replicas: vLLM shards the routed experts
    over all TP x DP ranks (split without `ep`, whole and spread with it), and only attention
    and dense parts are replicated per DP rank.
    """

    tp: int
    pp: int = 1
    dp: int = 1
    ep: bool = False
    dcp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "dcp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Layout.{name} must be a positive integer, got {value!r}")

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def total_gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def moe_group_size(self) -> int:
        """Ranks the routed experts are sharded over (vLLM flattens TP across DP for MoE)."""
        return self.tp * self.dp

    @property
    def moe_split(self) -> int:
        """How many ways each expert's intermediate dimension is cut: TP x DP, or 1 with EP."""
        return 1 if self.ep else self.moe_group_size

    def __str__(self) -> str:
        dcp = f"xDCP{self.dcp}" if self.dcp > 1 else ""
        return f"TP{self.tp}xPP{self.pp}xDP{self.dp}{dcp}" + ("+EP" if self.ep else "")
