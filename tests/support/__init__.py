"""Helpers shared by the integration and e2e tiers (running stacks, finding processes)."""
