"""What the test machine has, and the CI rule for what it lacks.

The CI rule: a test that needs something this machine lacks (PostgreSQL,
Prosody, ejabberd, Spark) skips with a reason on a developer's machine, and
FAILS when the environment variable ``CI`` is set, because ``.ci/run`` installs
and starts all of them: there, a skip would hide a broken setup.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

PG_ENV = "XMPP_QUEUE_TEST_PG_URL"
PG_EXAMPLE = "postgresql://postgres@127.0.0.1:5432/test"


def in_ci() -> bool:
    """Whether we run in CI (``CI`` set to anything but empty/0/false/no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str, *, module: bool = False) -> NoReturn:
    """Skip for want of *reason* (the whole module when called at its top, *module*),
    or fail under CI, where nothing may be missing."""
    if in_ci():
        pytest.fail(
            f"{reason} (CI is set: .ci/run provides it, so this is a broken setup)",
            pytrace=False,
        )
    pytest.skip(reason, allow_module_level=module)
