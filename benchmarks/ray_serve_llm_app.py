"""Deploy Ray Serve LLM's own OpenAI app (`build_openai_app`) for one model, then exit.

Run by the serving-comparison suite against a Ray head it started. Only what the CPU
needs and what every compared engine shares is set (a one-CPU bundle, `enforce_eager`,
VLLM_CPU_KVCACHE_SPACE=1); everything else is Ray Serve LLM's default, as a user gets it.

    python -m benchmarks.ray_serve_llm_app --address 127.0.0.1:PORT --model-dir DIR \
        --name NAME --port HTTP_PORT
"""

from __future__ import annotations

import argparse
import logging


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    import ray
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    ray.init(address=args.address, logging_level=logging.WARNING, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    config = LLMConfig(
        model_loading_config={"model_id": args.name, "model_source": args.model_dir},
        engine_kwargs={"enforce_eager": True},
        placement_group_config={"bundles": [{"CPU": 1}]},
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
    )
    serve.run(build_openai_app({"llm_configs": [config]}), blocking=False)
    print(f"ray-serve-llm: serving {args.name} on http://127.0.0.1:{args.port}/v1", flush=True)


if __name__ == "__main__":
    main()
