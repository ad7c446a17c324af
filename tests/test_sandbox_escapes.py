"""The adversarial corpus (tests/support/sandbox_corpus.py): every attempt to get out of the
sandbox is contained, with the kernel layers on and with them off (the audit hook alone).

`benchmarks/sandbox_escapes.py` runs the same corpus and records contained / tried per category.
"""

from __future__ import annotations

import pytest

from tests.support.sandbox_corpus import ATTEMPTS, corpus_sandbox, start_outside, stop_outside, try_attempt

MODES = {"kernel layers on": True, "audit hook alone": False}


@pytest.fixture(scope="module")
def outside():
    world = start_outside()
    yield world
    stop_outside(world)


@pytest.fixture(scope="module", params=list(MODES))
def mode(request):
    with corpus_sandbox(MODES[request.param]) as sandbox:
        layers = sandbox.isolation()
        if MODES[request.param] and not (layers["landlock_fs"] or layers["seccomp"]):
            pytest.skip(f"no kernel layer on this machine: {layers}")
        yield sandbox


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[a.name for a in ATTEMPTS])
def test_attempt_is_contained(mode, outside, attempt):
    verdict = try_attempt(mode, outside, attempt)
    assert verdict.contained, f"{attempt.category}: {attempt.name} ({verdict.status}): {verdict.why}"
