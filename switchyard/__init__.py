"""Switchyard: run several huge LLMs on a Ray cluster behind one OpenAI endpoint.

The import of this package stays light (no ray, torch or vllm) so that the CLI's
planning commands answer in milliseconds.
"""

__version__ = "0.1.0"
