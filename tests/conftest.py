import os

# Tests never reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The test models are tiny: one thread beats two on a 2-core machine (no cross-thread sync per
# small matmul), and subprocesses (CLI runs) inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
