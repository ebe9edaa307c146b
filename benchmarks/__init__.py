"""The project's own side-by-side measurements, as one tool.

    python -m benchmarks list                  # the suites, one line each
    python -m benchmarks run SUITE [options]   # run one (`run SUITE --help` for its options)
    python -m benchmarks report SUITE          # redraw its BENCHMARKS.md block from its result

`switchyard bench` is the user's load tool against any endpoint; the suites here compare
systems and strategies on one machine, and load them with its client. Each suite writes one
latest result file, benchmarks/results/<suite>.json; earlier results live in git history.
The registry of suites is suites.py. Not tests: nothing here asserts a number.
"""
