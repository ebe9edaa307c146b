"""`switchyard plan`: will this model fit, in which layout, and why not, before any download.

Only the standard library is imported at module level; `policies` (pure Python), `rich` and,
for hub ids, `huggingface_hub` are imported inside `run`. Nothing here imports ray, torch,
vllm or transformers, so the answer comes in well under a second.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.exit_codes import ExitCode, UserInputError

if TYPE_CHECKING:
    from cluster.staging.space_gate import DiskVerdict
    from policies.admission import Decision
    from policies.checkpoint.model_spec import ModelSpec
    from policies.checkpoint.weights import WeightSize
    from policies.inventory import ClusterInventory
    from policies.vllm_versions import MemoryRules

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="predict whether a model fits, in which layout, and why not",
        description=(
            "Decide from config.json and the cluster shape alone which vLLM layouts "
            "(TP, PP, DP, EP, DCP) accept the model, what each needs per GPU, how fast each "
            "decodes (one stream, and at load), and which to use. "
            "Exit 0 when admitted, 1 when rejected, 2 for bad input."
        ),
    )
    parser.add_argument(
        "model",
        metavar="MODEL",
        help="a config.json, a local model directory, or a Hugging Face repo id",
    )
    parser.add_argument("--gpu", required=True, metavar="KIND", help="GPU kind, e.g. h200")
    parser.add_argument("--gpus-per-node", required=True, type=int, metavar="N")
    parser.add_argument("--nodes", type=int, default=1, metavar="M")
    parser.add_argument(
        "--disk-free-gib",
        type=float,
        default=None,
        metavar="X",
        help="free disk per node for the weights (default: not checked)",
    )
    parser.add_argument(
        "--disk-reserve-gib",
        type=float,
        default=0.0,
        metavar="R",
        help="space kept free on each node's cache volume, not usable for weights (default 0)",
    )
    parser.add_argument(
        "--weights-gib",
        type=float,
        default=None,
        metavar="W",
        help="weight size on disk, overriding what is measured or estimated",
    )
    parser.add_argument(
        "--gpu-memory-utilization", type=float, default=0.9, metavar="U", help="default 0.9"
    )
    parser.add_argument("--kv-cache-dtype", choices=("auto", "fp8"), default="auto")
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        metavar="L",
        help="default: the model's full context",
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=None,
        metavar="T",
        help="the engine's token budget per step (default: vLLM's for the GPU)",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=int,
        default=None,
        metavar="S",
        help="the engine's sequences per step (default: vLLM's for the GPU)",
    )
    parser.add_argument(
        "--enforce-eager",
        action="store_true",
        help="the engine captures no CUDA graphs (no graph memory)",
    )
    parser.add_argument(
        "--dcp",
        type=int,
        default=None,
        metavar="N",
        help="judge only layouts with this decode context parallel size (default: all)",
    )
    parser.add_argument(
        "--objective",
        choices=("latency", "throughput"),
        default="throughput",
        help="what the recommendation optimises: latency (single-stream decode) or "
        "throughput (sustained decode at load, on the fewest GPUs); default throughput",
    )
    parser.add_argument(
        "--vllm-version",
        default=None,
        metavar="X.Y",
        help="apply the memory terms of this vLLM version (which it subtracts before sizing "
        "the KV cache); default: the installed vLLM, else the newest supported "
        f"({_NEWEST_VLLM})",
    )
    parser.add_argument(
        "--cuda-graph-estimate",
        choices=("on", "off"),
        default=None,
        help="VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS as the engines will have it (default: "
        "the vLLM version's default: on from 0.20; the variable exists from 0.18)",
    )
    parser.add_argument(
        "--flashinfer-sampler",
        choices=("on", "off"),
        default=None,
        help="VLLM_USE_FLASHINFER_SAMPLER as the engines will have it: how the profiling "
        "run's sampler applies top-k/top-p, which sizes its memory (default: unset, the "
        "version's own: FlashInfer before 0.12, a sort through 0.16, Triton from 0.17)",
    )
    parser.add_argument(
        "--language-model-only",
        action="store_true",
        help="vLLM's --language-model-only: a multimodal model's encoder is not loaded",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--max-candidates",
        type=int,
        default=DEFAULT_MAX_CANDIDATES,
        metavar="N",
        help="list at most N candidate layouts in --json (the recommended, then the usable, "
        "then the refused; the rest counted by reason in `candidates_left_out`); 0: all "
        f"(default {DEFAULT_MAX_CANDIDATES})",
    )
    parser.set_defaults(handler=run)


DEFAULT_MAX_CANDIDATES = 256
"""Bounds `plan --json` at a few hundred KiB however large the cluster."""


_NEWEST_VLLM = "0.32"
"""policies.vllm_versions.NEWEST_SUPPORTED, without importing the policy for `--help`."""


def vllm_rules(
    version: str | None, cuda_graph_estimate: str | None, flashinfer_sampler: str | None = None
) -> MemoryRules:
    """The memory rules `plan` applies: `version`'s, else the installed vLLM's (the
    nearest supported version's outside the supported range)."""
    from cluster.fleet.admission_gate import installed_rules_version
    from policies.vllm_versions import MemoryRules, VllmVersion

    estimate = None if cuda_graph_estimate is None else cuda_graph_estimate == "on"
    sampler = None if flashinfer_sampler is None else flashinfer_sampler == "on"
    if version is not None:
        try:
            parsed = VllmVersion.parse(version)
            return MemoryRules.of(parsed, cuda_graph_estimate=estimate, flashinfer_sampler=sampler)
        except ValueError as exc:
            raise UserInputError(f"--vllm-version: {exc}") from exc
    return MemoryRules.of(
        installed_rules_version(), cuda_graph_estimate=estimate, flashinfer_sampler=sampler
    )


def run(args: argparse.Namespace) -> int:
    from policies.admission import AdmissionRequest, Objective, admit
    from policies.errors import PolicyInputError, UnknownGpu
    from policies.memory import KvCacheDtype
    from policies.units import GIB

    _check_numbers(args)
    try:
        spec, weights, source = _load_model(args.model)
        inventory = _inventory(args)
        request = AdmissionRequest(
            max_model_len=args.max_model_len,
            gpu_memory_utilization=args.gpu_memory_utilization,
            kv_cache_dtype=KvCacheDtype(args.kv_cache_dtype),
            weights_override_bytes=(
                None if args.weights_gib is None else int(args.weights_gib * GIB)
            ),
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_num_seqs=args.max_num_seqs,
            enforce_eager=args.enforce_eager,
            dcp=args.dcp,
            objective=Objective(args.objective),
            vllm=vllm_rules(args.vllm_version, args.cuda_graph_estimate, args.flashinfer_sampler),
            language_model_only=args.language_model_only or _recipe_sets_language_only(spec),
        )
        decision = admit(spec, weights, inventory, request)
    except UnknownGpu as exc:
        raise UserInputError(f"--gpu: {exc}") from exc
    except PolicyInputError as exc:
        raise UserInputError(str(exc)) from exc
    disk = _disk_verdicts(args, decision.weights.total_bytes)
    recipe = _recipe(spec, args.model)
    if args.json:
        if args.max_candidates < 0:
            raise UserInputError(
                f"--max-candidates: {args.max_candidates} is negative; give 0 (all) or more"
            )
        report = decision.to_json_dict(args.max_candidates or None)
        report["recipe"] = recipe
        report["weights"] = {
            "total_bytes": decision.weights.total_bytes,
            "expert_bytes": decision.weights.expert_bytes,
            "source": decision.weights.source.value,
        }
        report["disk"] = _disk_json(disk)
        print(json.dumps(report, indent=2))
    else:
        _print_table(spec, decision, source, args)
        for verdict in disk:
            print(f"  disk: {verdict.describe()}")
        if recipe is not None:
            settings = ", ".join(f"{k}={v}" for k, v in sorted(recipe["engine"].items()))
            trust = "; needs trust_remote_code" if recipe["needs_trust_remote_code"] else ""
            print(f"  recipe {recipe['name']} ({recipe['source']}): {settings}{trust}")
    return ExitCode.OK if decision.admitted else ExitCode.REJECTED


def _recipe_sets_language_only(spec: ModelSpec) -> bool:
    from policies.recipes import recipe_for

    recipe = recipe_for(spec)
    return recipe is not None and bool(recipe.engine.get("language_model_only"))


def _recipe(spec: ModelSpec, model: str) -> dict[str, Any] | None:
    """The engine settings the architecture's recipe applies by default (policies/recipes.py),
    as a deployment would get them."""
    from cluster.fleet.deployment_resolution import miniature_stands_for
    from policies.recipes import recipe_for

    path = Path(model).expanduser()
    stands_for = miniature_stands_for(path if path.is_dir() else path.parent)
    recipe = recipe_for(spec, stands_for)
    if recipe is None:
        return None
    return {
        "name": recipe.name,
        "engine": dict(recipe.engine),
        "needs_trust_remote_code": recipe.needs_trust_remote_code,
        "source": recipe.source,
    }


def _check_numbers(args: argparse.Namespace) -> None:
    if args.gpus_per_node < 1:
        raise UserInputError(f"--gpus-per-node must be >= 1, got {args.gpus_per_node}")
    if args.nodes < 1:
        raise UserInputError(f"--nodes must be >= 1, got {args.nodes}")
    if args.disk_free_gib is not None and not args.disk_free_gib >= 0:
        raise UserInputError(f"--disk-free-gib must be >= 0, got {args.disk_free_gib}")
    if not args.disk_reserve_gib >= 0:
        raise UserInputError(f"--disk-reserve-gib must be >= 0, got {args.disk_reserve_gib}")
    if args.weights_gib is not None and not args.weights_gib > 0:
        raise UserInputError(f"--weights-gib must be > 0, got {args.weights_gib}")
    if not 0 < args.gpu_memory_utilization <= 1:
        raise UserInputError(
            f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}"
        )
    if args.max_model_len is not None and args.max_model_len < 1:
        raise UserInputError(f"--max-model-len must be >= 1, got {args.max_model_len}")
    for flag in ("max_num_batched_tokens", "max_num_seqs", "dcp"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UserInputError(f"--{flag.replace('_', '-')} must be >= 1, got {value}")


def _inventory(args: argparse.Namespace) -> ClusterInventory:
    from policies.inventory import ClusterInventory

    # Admission sees what staging could use: free space minus the reserve.
    usable = None
    if args.disk_free_gib is not None:
        usable = max(0.0, args.disk_free_gib - args.disk_reserve_gib)
    return ClusterInventory.homogeneous(args.gpu, args.nodes, args.gpus_per_node, usable)


def _disk_json(disk: list[DiskVerdict]) -> list[dict[str, Any]]:
    if not disk:
        return []  # the staging code imported only when there is a verdict to print
    from cluster.staging.disk_report import verdict_json

    return [verdict_json(v) for v in disk]


def _disk_verdicts(args: argparse.Namespace, need_bytes: int) -> list[DiskVerdict]:
    """Each node's verdict for the whole model (nothing is cached on a planned cluster);
    none when --disk-free-gib is not given."""
    if args.disk_free_gib is None:
        return []  # before the imports: the staging code costs a plan a tenth of a second
    from cluster.staging.space_gate import judge_disk
    from policies.units import GIB

    return [
        judge_disk(
            node=f"node-{i}",
            model=args.model,
            cache_dir="the cache volume",
            need_bytes=need_bytes,
            free_bytes=int(args.disk_free_gib * GIB),
            reserve_bytes=int(args.disk_reserve_gib * GIB),
            reserved_by_others_bytes=0,
        )
        for i in range(args.nodes)
    ]


def _load_model(model: str) -> tuple[ModelSpec, WeightSize | None, str]:
    """(spec, measured weights or None, where the config came from)."""
    from policies.checkpoint.hf_config import load_model_spec
    from policies.checkpoint.weights import weights_from_model_dir

    path = Path(model).expanduser()
    if path.is_dir():
        spec = load_model_spec(path)
        return spec, weights_from_model_dir(path, spec), str(path)
    if path.is_file():
        return load_model_spec(path), None, str(path)
    if _HUB_ID.match(model) and not model.startswith((".", "/", "~")):
        return _load_from_hub(model)
    raise UserInputError(
        f"MODEL {model!r} is neither an existing file or directory nor a hub repo id (owner/name)"
    )


def _load_from_hub(repo_id: str) -> tuple[ModelSpec, WeightSize | None, str]:
    """Fetch config.json and, if the repo has one, the safetensors index; nothing else."""
    from policies.checkpoint.hf_config import load_model_spec
    from policies.checkpoint.weights import INDEX_FILENAME, weights_from_index

    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError
    except ImportError as exc:  # pragma: no cover - huggingface_hub is a dependency
        raise UserInputError(f"MODEL {repo_id!r}: huggingface_hub is not installed") from exc
    try:
        config_path = Path(hf_hub_download(repo_id, "config.json"))
    except (HfHubHTTPError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserInputError(f"MODEL {repo_id!r}: cannot fetch config.json: {first}") from exc
    spec = load_model_spec(config_path)
    try:
        index_path = Path(hf_hub_download(repo_id, INDEX_FILENAME))
    except EntryNotFoundError:
        return spec, None, f"hub:{repo_id}"
    except (HfHubHTTPError, OSError, ValueError):
        # The config is enough to plan; without the index the weights are estimated.
        return spec, None, f"hub:{repo_id}"
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserInputError(f"MODEL {repo_id!r}: {INDEX_FILENAME} is unreadable: {exc}") from exc
    if not isinstance(index, dict):
        raise UserInputError(f"MODEL {repo_id!r}: {INDEX_FILENAME} is not a JSON object")
    return spec, weights_from_index(index, spec), f"hub:{repo_id}"


def _print_table(
    spec: ModelSpec, decision: Decision, source: str, args: argparse.Namespace
) -> None:
    from rich.console import Console
    from rich.table import Table

    from policies.units import gib

    # Piped output gets a wide table rather than rich's 80-column default.
    width = shutil.get_terminal_size((160, 24)).columns
    console = Console(file=sys.stdout, highlight=False, width=width)
    att = spec.attention
    moe = spec.moe
    shape = f"{spec.family.value}, {att.kind.value}"
    if att.has_sliding_full_mix:
        shape += f" ({att.num_sliding_layers} sliding-window layers)"
    if moe is not None:
        shape += f", {moe.num_experts} experts top-{moe.experts_per_token}"
    weights = decision.weights
    console.print(f"[bold]{spec.wrapper_architecture or spec.architecture}[/] from {source}")
    console.print(
        f"  {shape}; {spec.num_layers} layers; quantization {spec.quantization.format.value}; "
        f"context {spec.max_context:,}"
    )
    console.print(
        f"  weights {_size(weights.total_bytes)} ({weights.source.value}), "
        f"experts {_size(weights.expert_bytes)}"
    )
    console.print(
        f"  cluster: {args.nodes} x {args.gpus_per_node} {args.gpu}; max_model_len "
        f"{decision.max_model_len:,}; kv cache {args.kv_cache_dtype}; utilization "
        f"{args.gpu_memory_utilization}"
    )
    table = Table(show_lines=False)
    table.add_column("layout", no_wrap=True)
    for column in ("valid", "fits", "GiB/GPU", "KV B/tok/GPU", "KV tokens", "max conc"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("tok/s 1 stream", justify="right", no_wrap=True)
    table.add_column("tok/s at load", justify="right", no_wrap=True)
    table.add_column("reasons")
    first_message: dict[str, str] = {}
    for c in decision.candidates:
        for r in c.reasons:
            first_message.setdefault(r.code, f"{c.layout}: {r.message}")
        mark = "*" if decision.recommended is not None and c is decision.recommended else " "
        table.add_row(
            f"{mark}{c.layout}",
            "yes" if c.valid else "[red]no[/]",
            ("yes" if c.deployable else "[yellow]yes*[/]") if c.fits else "[red]no[/]",
            f"{gib(c.weights_bytes_per_gpu):.1f}",
            f"{c.kv_bytes_per_token_per_gpu:,}",
            f"{c.kv_cache_tokens:,}",
            f"{c.max_concurrency:.2f}",
            f"{c.decode_tok_s_ceiling:.0f}",
            f"{c.throughput_tok_s_ceiling:,.0f} @{c.saturation_concurrency}",
            ", ".join(r.code for r in c.reasons),
        )
    console.print(table)
    if first_message:
        console.print("Reasons (first layout that gave each):")
        for code, message in first_message.items():
            console.print(f"  {code}: {message}", soft_wrap=True)
    if decision.recommended is not None:
        best = decision.recommended
        console.print(
            f"[bold green]ADMITTED[/]: recommended for {decision.objective.value} "
            f"{best.layout} on {best.gpu} "
            f"({best.layout.total_gpus} GPU{'s' if best.layout.total_gpus > 1 else ''}, "
            f"~{best.decode_tok_s_ceiling:.0f} tok/s single-stream ceiling, "
            f"~{best.throughput_tok_s_ceiling:,.0f} tok/s at {best.saturation_concurrency} "
            f"sequences, {best.max_concurrency:.2f} full-length requests at once)"
        )
        for objective, other in decision.recommended_by_objective.items():
            if other is not None and other is not best:
                console.print(f"  for {objective.value}: {other.layout}")
        _print_breakdown(console, best, args.gpu_memory_utilization)
    else:
        console.print("[bold red]REJECTED[/]")
        for reason in decision.reasons:
            console.print(f"  - {reason}", soft_wrap=True)


def _print_breakdown(console: Any, best: Any, utilization: float) -> None:
    """The recommended layout's GPU, term by term (the stage that limits the KV cache)."""
    from policies.units import gib

    terms = [f"{name} {gib(size):.2f}" for name, size in best.memory_breakdown.items()]
    total = sum(best.memory_breakdown.values()) + best.kv_cache_bytes
    console.print(
        f"  per GPU (GiB): {', '.join(terms)}, kv_cache {gib(best.kv_cache_bytes):.2f} "
        f"= {gib(total):.2f} (memory x {utilization})",
        soft_wrap=True,
    )


def _size(n_bytes: int) -> str:
    from policies.units import GIB, MIB

    return f"{n_bytes / GIB:.1f} GiB" if n_bytes >= GIB else f"{n_bytes / MIB:.1f} MiB"
