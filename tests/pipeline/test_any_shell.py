"""``xmpp-queue pipeline enqueue`` from a shell where ``python3`` is another Python.

The console script is run by its full path (as pipx, systemd or cron run it:
no activated venv), with a ``python3`` first on PATH that lacks slixmpp (a bare
venv) and no ``PYSPARK_PYTHON``. Spark's Python workers must still be the
interpreter that runs ``xmpp-queue``: every row is published.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

from tests.kit.ledger import needs_spark

needs_spark()

from tests.kit.integration import PASSWORD, ComponentFactory, subprocess_env  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ROWS = 12


def console_script() -> Path:
    """The installed ``xmpp-queue`` next to this interpreter (pip puts it there)."""
    script = Path(sys.executable).parent / "xmpp-queue"
    if not script.is_file():
        pytest.fail(f"{script} is missing: install the package (pip install -e '.[spark]')")
    return script


def other_python(where: Path) -> Path:
    """A bare venv: a real ``python3`` that cannot import slixmpp."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    python3 = where / "bin" / "python3"
    probe = subprocess.run([python3, "-c", "import slixmpp"], capture_output=True)
    assert probe.returncode != 0, "the other Python must lack slixmpp for this test to mean much"
    return python3


async def test_enqueue_runs_by_full_path_with_another_python3_first_on_path(
    prosody: Any,
    component: ComponentFactory,
    tmp_path: Path,
) -> None:
    from xmpp_queue.client import Publisher

    service = await component(database_url=f"sqlite:///{tmp_path / 'queue.sqlite'}")
    node = "any-shell"
    async with Publisher(
        "pub@localhost",
        PASSWORD,
        "queue.localhost",
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
    ) as pub:
        await pub.create_queue(node)

    config = tmp_path / "pipeline.toml"
    config.write_text(
        service.config_path.read_text()
        + "\n[pipeline]\n"
        + 'master = "local[1]"\n'
        + 'publisher_jid = "pub@localhost"\n'
        + f'publisher_password = "{PASSWORD}"\n'
        + 'service_jid = "queue.localhost"\n'
        + f"xmpp_host = {prosody.host!r}\n".replace("'", '"')
        + f"xmpp_port = {prosody.c2s_port}\n"
        + "allow_plain = true\n"
    )
    source = tmp_path / "rows.csv"
    source.write_text("key,n\n" + "".join(f"r{n},{n}\n" for n in range(ROWS)))
    python3 = other_python(tmp_path / "other")

    env = subprocess_env()
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join([str(python3.parent), "/usr/bin", "/bin"])
    env["PYSPARK_SUBMIT_ARGS"] = "--driver-java-options=-XX:TieredStopAtLevel=1 pyspark-shell"
    command = [
        str(console_script()),
        "pipeline",
        "enqueue",
        "-c",
        str(config),
        "--node",
        node,
        "--input",
        str(source),
        "--id-column",
        "key",
    ]
    result = await asyncio.to_thread(
        subprocess.run,
        command,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = result.stdout + result.stderr
    assert "ModuleNotFoundError" not in output, output[-3000:]
    assert result.returncode == 0, output[-3000:]
    async with Publisher(
        "pub@localhost",
        PASSWORD,
        "queue.localhost",
        host=prosody.host,
        port=prosody.c2s_port,
        allow_plain=True,
    ) as pub:
        assert sorted(await pub.link.item_ids(node)) == sorted(f"r{n}" for n in range(ROWS))


async def test_a_misspelt_node_is_one_line_before_spark_starts(
    prosody: Any,
    component: ComponentFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import time

    from xmpp_queue.cli import main

    service = await component(database_url=f"sqlite:///{tmp_path / 'queue.sqlite'}")
    config = tmp_path / "pipeline.toml"
    config.write_text(
        service.config_path.read_text()
        + "\n[pipeline]\n"
        + 'publisher_jid = "pub@localhost"\n'
        + f'publisher_password = "{PASSWORD}"\n'
        + 'service_jid = "queue.localhost"\n'
        + f'xmpp_host = "{prosody.host}"\n'
        + f"xmpp_port = {prosody.c2s_port}\n"
        + "allow_plain = true\n"
    )
    source = tmp_path / "rows.csv"
    source.write_text("key,n\nr1,1\n")
    argv = ["pipeline", "enqueue", "-c", str(config), "--node", "no-such-node"]
    started = time.monotonic()
    status = await asyncio.to_thread(main, [*argv, "--input", str(source)])
    assert status == 2
    assert time.monotonic() - started < 10, "refused before a Spark session starts"
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("xmpp-queue:")]
    assert len(lines) == 1, err
    line = lines[0]
    assert "'no-such-node' does not exist on queue.localhost" in line
