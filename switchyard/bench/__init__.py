"""`switchyard bench`'s load generator: exact-length prompts, streamed OpenAI requests timed
chunk by chunk, a concurrency sweep, and `vllm bench serve`'s metric definitions.

- prompts.py: random prompts of an exact token count for the served model's tokenizer.
- client.py: one streamed `/v1/completions` request -> a RequestRecord (request_record.py).
- load.py: one load level (concurrency cap, Poisson arrivals); where `--during-swap` plugs in.
- metrics.py: TTFT, TPOT, ITL, E2EL and throughputs from the records.
- sweep.py: warm-up, then one level per concurrency.
- report.py, plot.py, progress_display.py: table, JSON, PNG and the live display.
- config.py, tokenizer_source.py: the validated settings and where the tokenizer comes from.

Only the command (switchyard/commands/bench.py) wires these together.
"""
