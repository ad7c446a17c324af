"""Says which user the sandbox runs programs as, and fails unless it is the one given: `make
test-sandbox-users` checks with it that each of its runs took the path it means to test."""

import sys

from llm_marl_envs.sandbox import Sandbox

if __name__ == "__main__":
    sandbox = Sandbox()
    try:
        user = sandbox.isolation()["user"]
    finally:
        sandbox.close()
    print("test-sandbox-users: the sandbox runs programs as", user)
    sys.exit(0 if user == sys.argv[1] else f"test-sandbox-users: expected {sys.argv[1]!r}")
