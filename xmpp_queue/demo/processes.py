"""The demo's child processes: Prosody (installed if it must be) and the component.

Why a module of its own: the demo starts the component exactly as a user does
(``python -m xmpp_queue run -c FILE``) and stops everything it started, newest
first; the waiting and signalling is shared with the private server runners
(:mod:`xmpp_queue.servers._process`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from xmpp_queue.servers._process import log_tail, stop_child

Say = Callable[[str], object]


def ensure_prosody(say: Say) -> bool:
    """Prosody is there, or installed now (as root), or we say how to install it."""
    if shutil.which("prosody") and shutil.which("prosodyctl"):
        return True
    apt = shutil.which("apt-get")
    if os.geteuid() == 0 and apt:
        say("Prosody is not installed: installing Debian's package (apt-get install -y prosody)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = [apt, "install", "-y", "--no-install-recommends", "prosody"]
        if subprocess.run(install, env=env).returncode != 0:
            subprocess.run([apt, "update"], env=env)
            subprocess.run(install, env=env)
        if shutil.which("prosody") and shutil.which("prosodyctl"):
            return True
    say(
        "Prosody is not installed. The demo runs a private instance of Debian's package:\n"
        "    sudo apt-get install -y prosody\n"
        "(the system service it enables is not used; the demo starts its own on free ports)\n"
        "then run `xmpp-queue demo` again."
    )
    return False


def start_component(directory: Path, config: Path, say: Say) -> subprocess.Popen[bytes]:
    """``python -m xmpp_queue run -c <config>`` in *directory*, its output in
    ``component.log``."""
    command = [sys.executable, "-m", "xmpp_queue", "run", "-c", str(config)]
    say(f"Starting the component: python {' '.join(command[1:])}")
    # The component imports this very package, installed or not.
    source_root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {
        **os.environ,
        "PYTHONPATH": f"{source_root}{os.pathsep}{path}" if path else source_root,
    }
    with open(directory / "component.log", "wb") as out:
        # A session of its own: Ctrl-C reaches the demo only, which then stops
        # the workers before the component.
        component = subprocess.Popen(
            command,
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    say(f"  component pid {component.pid}, log in {directory / 'component.log'}")
    return component


def component_log_tail(directory: Path, lines: int = 15) -> str:
    path = directory / "component.log"
    if not path.exists():
        return "(no component.log)"
    return log_tail(path, lines)


def stop_component(component: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the component drains and closes its store), SIGKILL after 10 s."""
    stop_child(component, 10.0)
