"""PrivateProsody: a throw-away Prosody of our own, for tests, the demo and benchmarks.

Why not the system service: it listens on the standard ports, keeps state in
/var/lib/prosody and may not be running at all (containers have no systemd).
A private instance has its own config file and data directory in a temporary
directory, listens on free loopback ports only, and starts from a clean slate
(``default_storage = "memory"``; only the accounts we register are files).
Its settings, and why:

- ``run_as_root = true``: CI runs as root, and Prosody refuses root otherwise.
- ``modules_disabled = { "s2s"; "tls" }``, ``c2s_require_encryption = false``,
  ``allow_unencrypted_plain_auth = true``: loopback, plain streams, no
  certificates to generate.
- ``network_settings = { nagle = false }``: a queue sends many small stanzas;
  with Nagle's algorithm each waits for the previous ACK (README recommends it
  for production too).
- stanza size limits of 4 MiB: a test of the component's own payload limit
  must reach the component, not be cut off by the server first.

Use it as a context manager (sync or async) or call :meth:`start` and
:meth:`stop`; the process is stopped by its PID.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from xmpp_queue.servers._process import (
    LOOPBACK,
    ServerError,
    ServerLifecycle,
    ServerNotInstalled,
    free_port,
    log_tail,
    lua_string,
    port_accepts,
    stop_child,
    wait_until,
)
from xmpp_queue.servers.shipped import ProsodyExample

STANZA_SIZE_LIMIT = 4 * 1024 * 1024
_PORT_IN_USE = "Failed to open server port"
_START_ATTEMPTS = 3


class PrivateProsody(ServerLifecycle):
    """One Prosody process: a virtual host, external components and c2s users.

    ``components`` maps a component domain (``queue.localhost``) to its secret;
    ``users`` maps a user name (on ``domain``) to its password. ``nagle=True``
    keeps Prosody's default TCP behaviour (for comparisons). ``native_pubsub``
    adds Prosody's own pubsub at ``pubsub.<domain>``, the yardstick for
    benchmarks. ``extra_config`` is appended to the global section verbatim.
    ``example`` (:func:`~xmpp_queue.servers.shipped.read_prosody_example`) puts
    the shipped example's global section and component settings in the config
    instead of this module's own component settings (the tests run so).
    """

    host = LOOPBACK

    def __init__(
        self,
        components: Mapping[str, str] | None = None,
        users: Mapping[str, str] | None = None,
        *,
        domain: str = "localhost",
        nagle: bool = False,
        native_pubsub: bool = False,
        extra_config: str = "",
        log_level: str = "info",
        start_timeout: float = 20.0,
        tls_certificates: Path | None = None,
        example: ProsodyExample | None = None,
    ) -> None:
        self.example = example
        self.components = dict(components or {})
        self.users = dict(users or {})
        self.domain = domain
        self.nagle = nagle
        self.native_pubsub = native_pubsub
        self.extra_config = extra_config
        self.log_level = log_level
        self.start_timeout = start_timeout
        # A directory with <domain>.crt/.key: TLS on, and required (as a real server).
        self.tls_certificates = tls_certificates
        self.c2s_port = 0
        self.component_port = 0
        self.workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._registered = False

    # --- paths -------------------------------------------------------------------
    def _dir(self) -> Path:
        if self.workdir is None:
            raise ServerError("PrivateProsody is not started")
        return self.workdir

    @property
    def config_path(self) -> Path:
        return self._dir() / "prosody.cfg.lua"

    @property
    def log_path(self) -> Path:
        return self._dir() / "prosody.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # --- lifecycle ---------------------------------------------------------------
    def start(self) -> PrivateProsody:
        """Write the config, register the users, start Prosody, wait until both ports accept.

        A port taken between choosing it and Prosody binding it shows in Prosody's
        log; then we start again on new ports (up to three times).
        """
        prosody, prosodyctl = shutil.which("prosody"), shutil.which("prosodyctl")
        if prosody is None or prosodyctl is None:
            raise ServerNotInstalled("prosody", "prosody" if prosody is None else "prosodyctl")
        if self.running:
            return self
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._prepare(prosodyctl)
            self._launch(prosody)
            if self._wait_ready():
                if _PORT_IN_USE not in self._log_text():
                    atexit.register(self.stop)
                    return self
                self.stop()
                if attempt < _START_ATTEMPTS:
                    continue
                raise ServerError("Prosody could not bind free ports after 3 attempts")
            detail = self._failure_detail()
            self.stop()
            raise ServerError(f"Prosody did not start within {self.start_timeout:.0f} s{detail}")
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """SIGTERM the process, SIGKILL after 10 s; delete the temporary directory."""
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        if process is not None:
            stop_child(process)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
            self._registered = False

    def restart(self, down_for: float = 0.0) -> None:
        """Stop the process and start it again on the same ports, with the same
        accounts: what an operator's ``systemctl restart prosody`` does to clients
        (their streams close; they must reconnect). *down_for*: seconds between
        the stop and the start (an outage, not just a restart)."""
        prosody = shutil.which("prosody")
        if prosody is None or self.workdir is None:
            raise ServerError("PrivateProsody.restart() needs a started server")
        process, self._process = self._process, None
        if process is not None:
            stop_child(process)
        time.sleep(down_for)
        self._launch(prosody)
        if not self._wait_ready():
            raise ServerError(f"Prosody did not restart{self._failure_detail()}")

    def register(self, users: Mapping[str, str]) -> None:
        """Create accounts (name → password), all ``prosodyctl`` calls at once.

        Each call is a short Lua process (~70 ms); running them side by side
        registers ten users in about the time of one. Works before and after start.
        """
        prosodyctl = shutil.which("prosodyctl")
        if prosodyctl is None:
            raise ServerNotInstalled("prosody", "prosodyctl")
        calls = {
            user: subprocess.Popen(
                [prosodyctl, "--config", str(self.config_path), "register", user, self.domain, pw],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for user, pw in users.items()
        }
        failed = []
        for user, call in calls.items():
            out, _ = call.communicate(timeout=30)
            if call.returncode != 0:
                failed.append(f"{user}: {out.decode(errors='replace').strip()}")
        if failed:
            raise ServerError("prosodyctl register failed: " + "; ".join(failed))
        self.users.update(users)

    # --- steps -------------------------------------------------------------------
    def _prepare(self, prosodyctl: str) -> None:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="xq-prosody-"))
        for sub in ("data", "certs"):
            (self.workdir / sub).mkdir(exist_ok=True)
        self.c2s_port = free_port()
        self.component_port = free_port()
        while self.component_port == self.c2s_port:
            self.component_port = free_port()
        self.config_path.write_text(self.config_text())
        if self.users and not self._registered:
            self.register(self.users)
            self._registered = True

    def _launch(self, prosody: str) -> None:
        stdout = (self._dir() / "prosody.stdout").open("ab")
        try:
            # A session of its own: Ctrl-C in the demo's terminal reaches the demo,
            # which then stops Prosody in order, instead of killing it mid-run.
            self._process = subprocess.Popen(
                [prosody, "--config", str(self.config_path), "-F"],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            stdout.close()

    def _wait_ready(self) -> bool:
        return wait_until(
            lambda: port_accepts(self.c2s_port) and port_accepts(self.component_port),
            self.start_timeout,
            alive=lambda: self.running,
        )

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _failure_detail(self) -> str:
        tail = log_tail(self.log_path) or log_tail(self._dir() / "prosody.stdout")
        code = self._process.poll() if self._process is not None else None
        exited = f" (exited with {code})" if code is not None else ""
        return f"{exited}; log tail:\n{tail}" if tail else exited

    def config_text(self) -> str:
        """The Lua config file: global loopback settings, the host, the components."""
        work = self._dir()
        lines = []
        if self.example is not None:
            # First, so that what a private instance must own (below) wins.
            lines += ["-- the shipped example's global section", self.example.global_lua]
        lines += [
            "-- generated by xmpp_queue.servers.prosody; a private loopback instance",
            "run_as_root = true",
            f"pidfile = {lua_string(str(work / 'prosody.pid'))}",
            f"data_path = {lua_string(str(work / 'data'))}",
            f"certificates = {lua_string(str(self.tls_certificates or work / 'certs'))}",
            f"interfaces = {{ {lua_string(self.host)} }}",
            f"local_interfaces = {{ {lua_string(self.host)} }}",
            f"c2s_ports = {{ {self.c2s_port} }}",
            f"component_ports = {{ {self.component_port} }}",
            f"component_interfaces = {{ {lua_string(self.host)} }}",
            "s2s_ports = { }",
            "http_ports = { }",
            "https_ports = { }",
            'modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "presence"'
            + ('; "tls" }' if self.tls_certificates else " }"),
            'modules_disabled = { "s2s" }'
            if self.tls_certificates
            else 'modules_disabled = { "s2s"; "tls" }',
            f"c2s_require_encryption = {'true' if self.tls_certificates else 'false'}",
            "allow_unencrypted_plain_auth = true",
            'authentication = "internal_hashed"',
            'default_storage = "memory"',
            'storage = { accounts = "internal" }',
            f"c2s_stanza_size_limit = {STANZA_SIZE_LIMIT}",
            f"component_stanza_size_limit = {STANZA_SIZE_LIMIT}",
            f"log = {{ {self.log_level} = {lua_string(str(self.log_path))} }}",
        ]
        if self.example is None:
            # A standby that took the lease replaces a paused or cut-off old process.
            lines.append('component_conflict_resolve = "kick_old"')
        if not self.nagle:
            lines.append("network_settings = { nagle = false }")
        if self.extra_config:
            lines.append(self.extra_config)
        lines.append(f"VirtualHost {lua_string(self.domain)}")
        for name, secret in self.components.items():
            lines.append(f"Component {lua_string(name)}")
            lines.append(f"    component_secret = {lua_string(secret)}")
            if self.example is not None:
                lines.append(self.example.component_lua)
        if self.native_pubsub:
            lines.append(f'Component {lua_string("pubsub." + self.domain)} "pubsub"')
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        state = f"pid={self.pid} c2s={self.c2s_port} component={self.component_port}"
        return f"<PrivateProsody {state if self.running else 'stopped'}>"
