"""The fleet core: the fleet engine, swap flow, reconcile, fleet plan and journal, written
against ports (`ports.py`). Plain code: nothing here, nor anything it imports from the
project, imports Ray (tests/unit/test_layers.py).
"""
