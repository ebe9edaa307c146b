"""Tenants at the gateway: who may call which model, quotas, and the cluster-wide usage tally."""
