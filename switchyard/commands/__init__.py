"""Subcommands of `switchyard`; each module registers one (see switchyard.cli)."""
