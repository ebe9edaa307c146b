"""A checkpoint as vLLM would load it, known from its config.json alone: the typed `ModelSpec`
(architecture family, attention, MoE, quantization; `hf_config.parse_hf_config` reads it once,
at the edge), and where its weights live, group by group, with their bytes.
"""
