"""docs/queueing.md's ordered-work example through the client library, Prosody and
the component (issue 20): ``PublishItem(..., ordering_key=...)`` in a batch, two
workers reading ``job.ordering_key``, a nack that comes back before the rest of its key."""

from __future__ import annotations

import asyncio
import re
import sys
from typing import Any

import pytest

from tests.integration.test_client_attributes import attr_component  # noqa: F401

pytestmark = pytest.mark.integration


async def test_the_ordered_work_example_runs_as_written(
    prosody: Any,
    attr_component: Any,  # noqa: F811
    accounts: Any,
    tmp_path: Any,
) -> None:
    from tests.kit.integration import REPO_ROOT, subprocess_env

    guide = (REPO_ROOT / "docs" / "queueing.md").read_text(encoding="utf-8")
    section = guide.split("### A runnable example", 1)[1]
    script = section.split("```python\n", 1)[1].split("```", 1)[0]
    settings = {
        "SERVICE": repr(accounts.component_jid),
        "PUBLISHER": repr((f"pub@{prosody.domain}", accounts.password)),
        "WORKER": repr((f"w2@{prosody.domain}", accounts.password)),
        "CONNECT": repr({"host": prosody.host, "port": prosody.c2s_port, "allow_plain": True}),
    }
    for name, value in settings.items():
        script, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", script, flags=re.M)
        assert n == 1, f"the example sets {name} once"
    path = tmp_path / "ordering_example.py"
    path.write_text(script, encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(path),
        env=subprocess_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[-1] == "['c1-1', 'c1-2', 'c1-3', 'c1-4']", lines
    seen = [tuple(line.split()[:2]) for line in lines[:-1]]
    assert set(seen[:2]) == {("c1", "c1-1"), ("c2", "c2-1")}, seen
    c1 = [item for key, item in seen if key == "c1"]
    assert c1 == ["c1-1", "c1-2", "c1-2", "c1-3", "c1-4"], seen
    assert "c1-2 attempt 2" in out.decode()
