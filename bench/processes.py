"""Child processes of the benchmark: the component under test, the null component, PostgreSQL.

Why a module of its own: every process the benchmark starts must be stopped by its PID
whatever happens (a failed run, the global timeout, Ctrl-C), and its CPU time read from
/proc the same way, so the figures of the real and the null component compare.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xmpp_queue.servers.prosody import PrivateProsody

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def private_prosody(
    components: dict[str, str], users: dict[str, str], *, nagle: bool, extra_config: str
) -> PrivateProsody:
    """The project's own PrivateProsody (loopback, free ports), quiet: Prosody logs at warn.

    Imported here, with the repository put on sys.path, because the benchmark runs as a
    script from `bench/` and the package need not be installed.
    """
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from xmpp_queue.servers.prosody import PrivateProsody

    return PrivateProsody(
        components, users, nagle=nagle, extra_config=extra_config, log_level="warn"
    )


def run_prosody(
    components: dict[str, str], users: dict[str, str], args: Any, *, nagle: bool = False
) -> PrivateProsody:
    """:func:`private_prosody` as a run's arguments ask for it: its Lua GC mode
    (``--prosody-gc``) and the extra lines of ``--prosody-extra``."""
    gc = f'gc = {{ mode = "{args.prosody_gc}" }}'
    return private_prosody(
        components, users, nagle=nagle, extra_config=f"{gc}\n{args.prosody_extra}"
    )


def prosody_version() -> str:
    """The version line of `prosodyctl about` (`prosody --version` would start a server)."""
    try:
        out = subprocess.run(
            ["prosodyctl", "about"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("Prosody "):
            return line.strip()
    return "unknown"


def machine_busy_seconds() -> tuple[float, float]:
    """CPU seconds the whole machine spent busy, and stolen by the hypervisor (/proc/stat).

    Why: the machine is shared; busy time not spent by the benchmark's own processes
    tells whether a run was disturbed by someone else's load.
    """
    with open("/proc/stat", "rb") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq) / _TICK, steal / _TICK


class Child:
    """One child process with its log file; `stop()` is idempotent."""

    def __init__(
        self, name: str, argv: list[str], log: Path, cwd: Path = REPO, src: Path = REPO
    ) -> None:
        self.name, self.argv, self.log = name, argv, log
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src), env.get("PYTHONPATH", "")) if p)
        self._log = open(log, "wb")  # closed in stop()
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def start_null_component(
    port: int, domain: str, secret: str, mode: str, log: Path, database: str = "", *extra: str
) -> Child:
    argv = [
        sys.executable,
        str(BENCH / "null_component.py"),
        "--port",
        str(port),
        "--domain",
        domain,
        "--secret",
        secret,
        "--mode",
        mode,
    ]
    if database:
        argv += ["--database", database]
    argv += extra
    return Child(f"null-{mode}", argv, log, cwd=BENCH)


def component_config(
    path: Path, *, jid: str, secret: str, port: int, database_url: str, log_level: str
) -> Path:
    """The TOML file `python -m xmpp_queue run -c FILE` reads (keys of config.example.toml)."""
    path.write_text(
        "[component]\n"
        f'jid = "{jid}"\n'
        f'secret = "{secret}"\n'
        'server_host = "127.0.0.1"\n'
        f"server_port = {port}\n"
        "\n[database]\n"
        f'url = "{database_url}"\n'
        "\n[admins]\n"
        "jids = []\n"
        # The benchmark measures the service's capacity, so the per-JID publish
        # rate limit (1000/s by default) is off; every other default stays.
        "\n[limits]\n"
        "publish_rate = 0\n"
        "\n[logging]\n"
        f'level = "{log_level}"\n'
    )
    return path


def migrate(config: Path, log: Path, timeout: float = 120.0, src: Path = REPO) -> None:
    """Migrate with the package of the checkout *src* (another commit, to compare)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    with open(log, "ab") as out:
        done = subprocess.run(
            [sys.executable, "-m", "xmpp_queue", "migrate", "-c", str(config)],
            cwd=src,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    if done.returncode != 0:
        text = log.read_text(errors="replace").splitlines()[-25:]
        raise RuntimeError("migrate failed:\n" + "\n".join(text))


def start_component(config: Path, log: Path, src: Path = REPO) -> Child:
    """``xmpp-queue run`` from the checkout *src* (this one unless comparing commits)."""
    argv = [sys.executable, "-m", "xmpp_queue", "run", "-c", str(config)]
    return Child("component", argv, log, cwd=src, src=src)


_CREATED_DATABASES: set[str] = set()  # what this process made, and so may drop


def scratch_db_name(prefix: str) -> str:
    """A database name of this run's own (*prefix*, the PID and a random part): a
    benchmark never reuses, and so never drops, a database someone else made."""
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def recreate_postgres_db(name: str, host: str = "127.0.0.1", user: str = "postgres") -> None:
    """A clean database per run: drop it if this process created it before, then
    create it (``createdb`` fails on a name that exists: nothing is overwritten)."""
    base = ["-h", host, "-U", user]
    if name in _CREATED_DATABASES:
        subprocess.run(["dropdb", *base, "--if-exists", "--force", name], check=True, timeout=60)
    subprocess.run(["createdb", *base, name], check=True, timeout=60)
    _CREATED_DATABASES.add(name)


def drop_postgres_db(name: str, host: str = "127.0.0.1", user: str = "postgres") -> None:
    """Drop *name* if this process created it (anything else is left alone)."""
    if name not in _CREATED_DATABASES:
        return
    subprocess.run(
        ["dropdb", "-h", host, "-U", user, "--if-exists", "--force", name],
        check=False,
        timeout=60,
    )
    _CREATED_DATABASES.discard(name)


def wait_exit(child: Child, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while child.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
