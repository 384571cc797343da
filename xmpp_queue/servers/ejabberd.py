"""PrivateEjabberd: a throw-away ejabberd node of our own (Debian's ejabberd 23.01).

What matters, and why:

- Its own config dir, spool (Mnesia) dir and log dir in a temporary directory,
  and its own Erlang node name (``xq-<random>@localhost``, never the packaged
  ``ejabberd@localhost``).
- A fixed ``ERL_DIST_PORT`` on loopback and the cookie on the command line:
  then ``ejabberdctl`` neither starts nor uses epmd (RabbitMQ on the same
  machine does; we never stop epmd) and writes no cookie file.
- ``global_routes: false`` on the ``ejabberd_service`` listener: with the
  default the first component to connect receives the stanzas of every
  component domain of that listener.
- Open ports are not readiness: ejabberd opens listeners before its modules
  and auth backend are up. A short-lived hidden Erlang node waits until the
  ``ejabberd`` application reports started, then registers every user in the
  same VM (``ejabberdctl register`` would boot one VM per user, ~0.7 s each).
- Run as root, ``ejabberdctl`` switches to the ``ejabberd`` user, so the
  private directories belong to it.
- No shaper (the c2s shaper of Debian's default config, 3000 bytes/s per
  connection, would throttle a queue benchmark), no s2s, http, TLS or ACME.

Stop is by PID: the Erlang VM shuts down cleanly on SIGTERM. The config files
themselves are written by ``ejabberd_config.py``.
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xmpp_queue.servers._process import (
    LOOPBACK,
    ServerError,
    ServerLifecycle,
    ServerNotInstalled,
    free_port,
    log_tail,
    pid_alive,
    port_accepts,
    terminate_pid,
)
from xmpp_queue.servers.ejabberd_config import STANZA_SIZE_LIMIT, EjabberdConfigFiles

RUN_USER = "ejabberd"
_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
_EJABBERDCTL_PATHS = ("/usr/sbin/ejabberdctl", "/usr/local/sbin/ejabberdctl")


def _ejabberdctl() -> str:
    found = shutil.which("ejabberdctl")
    if found:
        return found
    for path in _EJABBERDCTL_PATHS:  # /usr/sbin is not on a normal user's PATH
        if os.access(path, os.X_OK):
            return path
    raise ServerNotInstalled("ejabberd", "ejabberdctl")


def _erl_binary(text: str) -> str:
    """*text* as an Erlang binary literal; only names that need no escaping."""
    if not _SAFE.match(text):
        raise ValueError(f"{text!r}: use letters, digits, '.', '_' or '-'")
    return f'<<"{text}">>'


class PrivateEjabberd(EjabberdConfigFiles, ServerLifecycle):
    """One ejabberd node: a virtual host, external components and c2s users.

    Same shape as :class:`~xmpp_queue.servers.prosody.PrivateProsody`:
    ``components`` maps a component domain to its secret, ``users`` a user name
    to its password; ``.c2s_port``, ``.component_port`` and ``.config_path``
    once started. ``native_pubsub`` adds ejabberd's mod_pubsub at
    ``pubsub.<domain>`` (for benchmarks). ``service_options`` (the shipped
    example's listener, :func:`~xmpp_queue.servers.shipped.read_ejabberd_listener`)
    replace this module's own options of the component listener.
    ``component_stanza_limit`` is that listener's ``max_stanza_size`` (default 4 MiB,
    so most tests never meet it; the stanza-size tests set the shipped example's).
    """

    host = LOOPBACK

    def __init__(
        self,
        components: Mapping[str, str] | None = None,
        users: Mapping[str, str] | None = None,
        *,
        domain: str = "localhost",
        native_pubsub: bool = False,
        log_level: str = "warning",
        start_timeout: float = 60.0,
        service_options: Mapping[str, Any] | None = None,
        component_stanza_limit: int = STANZA_SIZE_LIMIT,
    ) -> None:
        self.service_options = dict(service_options) if service_options is not None else None
        self.component_stanza_limit = component_stanza_limit
        self.components = dict(components or {})
        self.users = dict(users or {})
        for name in (domain, *self.components, *self.components.values()):
            _erl_binary(name)  # fail early on a name the YAML/Erlang below cannot carry
        for user, password in self.users.items():
            _erl_binary(user)
            _erl_binary(password)
        self.domain = domain
        self.native_pubsub = native_pubsub
        self.log_level = log_level
        self.start_timeout = start_timeout
        self.node = f"xq-{secrets.token_hex(4)}@localhost"
        self.cookie = secrets.token_hex(16)
        self.c2s_port = 0
        self.component_port = 0
        self.dist_port = 0
        self.workdir: Path | None = None
        self._pid: int | None = None
        self._ctl_calls = 0

    # --- paths -------------------------------------------------------------------
    def _dir(self) -> Path:
        if self.workdir is None:
            raise ServerError("PrivateEjabberd is not started")
        return self.workdir

    @property
    def config_dir(self) -> Path:
        return self._dir() / "etc"

    @property
    def config_path(self) -> Path:
        return self.config_dir / "ejabberd.yml"

    @property
    def log_dir(self) -> Path:
        return self._dir() / "log"

    @property
    def spool_dir(self) -> Path:
        return self._dir() / "db"

    @property
    def pid_path(self) -> Path:
        return self._dir() / "ejabberd.pid"

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def running(self) -> bool:
        return self._pid is not None and pid_alive(self._pid)

    # --- lifecycle ---------------------------------------------------------------
    def start(self) -> PrivateEjabberd:
        """Write the config, start the node detached, wait for it, register the users."""
        ctl = _ejabberdctl()
        if shutil.which("erl") is None:
            raise ServerNotInstalled("ejabberd", "erl")
        as_root = os.geteuid() == 0
        if not as_root and pwd.getpwuid(os.geteuid()).pw_name != RUN_USER:
            raise ServerError(
                "a private ejabberd needs root (ejabberdctl then runs it as the "
                f"{RUN_USER} user) or to be started as the {RUN_USER} user"
            )
        if self.running:
            return self
        self._prepare(as_root)
        try:
            self._ctl(ctl, "start")
            self._await_started_and_register()
            self._pid = int(self.pid_path.read_text().strip())
            for port in (self.c2s_port, self.component_port):
                if not port_accepts(port):
                    raise ServerError(f"ejabberd started but nothing listens on {port}")
        except BaseException as exc:
            detail = log_tail(self.log_dir / "ejabberd.log") or log_tail(self.log_dir / "error.log")
            self._stop_node(ctl)
            self._remove_dir()
            if isinstance(exc, ServerError) and detail:
                raise ServerError(f"{exc}; log tail:\n{detail}") from None
            raise
        atexit.register(self.stop)
        return self

    def stop(self) -> None:
        """SIGTERM the node's VM (clean Erlang shutdown), SIGKILL after 15 s; delete its dir."""
        atexit.unregister(self.stop)
        if self.workdir is None:
            return
        try:
            self._stop_node(_ejabberdctl())
        finally:
            self._remove_dir()

    def restart(self) -> None:
        """Stop the node and start it again on the same ports; accounts live in its
        spool (Mnesia) and survive. Clients' streams close and must reconnect."""
        if self.workdir is None:
            raise ServerError("PrivateEjabberd.restart() needs a started server")
        ctl = _ejabberdctl()
        self._stop_node(ctl)
        self._ctl(ctl, "start")
        self._await_started_and_register(register=False)
        self._pid = int(self.pid_path.read_text().strip())

    def register(self, users: Mapping[str, str]) -> None:
        """Create accounts (name → password) on the running node, in one Erlang VM."""
        self._rpc_eval(self._register_expr(users), what="user registration")
        self.users.update(users)

    # --- steps -------------------------------------------------------------------
    def _prepare(self, as_root: bool) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="xq-ejabberd-"))
        for sub in (self.config_dir, self.spool_dir, self.log_dir):
            sub.mkdir()
        ports: set[int] = set()
        while len(ports) < 3:
            ports.add(free_port())
        self.c2s_port, self.component_port, self.dist_port = sorted(ports)
        (self.config_dir / "ejabberdctl.cfg").write_text(self.ctl_config_text())
        inetrc = Path("/etc/ejabberd/inetrc")
        (self.config_dir / "inetrc").write_text(
            inetrc.read_text()
            if inetrc.is_file()
            else '{lookup,["file","native"]}.\n{host,{127,0,0,1}, ["localhost"]}.\n'
        )
        self.config_path.write_text(self.config_text())
        if as_root:
            run_as = pwd.getpwnam(RUN_USER)
            for path in (self.workdir, *self.workdir.rglob("*")):
                os.chown(path, run_as.pw_uid, run_as.pw_gid)
        self.workdir.chmod(0o700)

    def _ctl(self, ctl: str, *command: str) -> None:
        env = {**os.environ, "EJABBERD_BYPASS_WARNINGS": "true"}
        result = subprocess.run(
            [
                ctl,
                "--config-dir",
                str(self.config_dir),
                "--node",
                self.node,
                "--spool",
                str(self.spool_dir),
                "--logs",
                str(self.log_dir),
                *command,
            ],
            cwd=self.spool_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()
            raise ServerError(f"ejabberdctl {' '.join(command)} failed: {output}")

    def _rpc_eval(self, body: str, what: str, timeout: float = 30.0) -> None:
        """Run Erlang expressions on a short-lived hidden node connected to ours (``N``).

        ``-dist_listen false`` and ``-erl_epmd_port``: it reaches our node through
        the fixed distribution port, without epmd.
        """
        self._ctl_calls += 1
        name = f"xqctl{os.getpid()}x{self._ctl_calls}@localhost"
        env = {**os.environ, "ERL_CRASH_DUMP_BYTES": "0"}
        try:
            result = subprocess.run(
                [
                    "erl",
                    "-sname",
                    name,
                    "-setcookie",
                    self.cookie,
                    "-hidden",
                    "-noshell",
                    "-noinput",
                    "-erl_epmd_port",
                    str(self.dist_port),
                    "-start_epmd",
                    "false",
                    "-dist_listen",
                    "false",
                    "-eval",
                    f"N = '{self.node}', {body}",
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise ServerError(f"ejabberd {what}: no answer within {timeout:.0f} s") from None
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()
            raise ServerError(f"ejabberd {what} failed (exit {result.returncode}): {output}")

    def _await_started_and_register(self, register: bool = True) -> None:
        tries = int(self.start_timeout / 0.05)
        wait = (
            "Wait = fun W(0) -> halt(1); W(K) -> "
            "case catch rpc:call(N, application, which_applications, [], 1000) of "
            "L when is_list(L) -> case lists:keymember(ejabberd, 1, L) of "
            "true -> ok; false -> timer:sleep(50), W(K - 1) end; "
            "_ -> timer:sleep(50), W(K - 1) end end, "
            f"Wait({tries}), "
        )
        then = self._register_expr(self.users) if register else "halt(0)."
        self._rpc_eval(
            wait + then,
            what=f"start (not started within {self.start_timeout:.0f} s, or registration)",
            timeout=self.start_timeout + 30,
        )

    def _register_expr(self, users: Mapping[str, str]) -> str:
        """Erlang: register *users* through ejabberd_admin:register/3 (what
        ``ejabberdctl register`` calls), then halt 0, or 2 naming the failures."""
        entries = ", ".join(f"{{{_erl_binary(u)}, {_erl_binary(p)}}}" for u, p in users.items())
        domain = _erl_binary(self.domain)
        return (
            f"Bad = [{{U, R}} || {{U, P}} <- [{entries}], "
            f"R <- [rpc:call(N, ejabberd_admin, register, [U, {domain}, P])], "
            "element(1, R) =/= ok], "
            "case Bad of [] -> halt(0); _ -> "
            'io:format(standard_error, "register failed: ~p~n", [Bad]), halt(2) end.'
        )

    def _stop_node(self, ctl: str) -> None:
        pid = self._pid
        if pid is None and self.workdir is not None and self.pid_path.is_file():
            try:
                pid = int(self.pid_path.read_text().strip())
            except ValueError:
                pid = None
        self._pid = None
        if pid is not None:
            terminate_pid(pid, grace=15.0)
            return
        if self.workdir is not None and (self.config_dir / "ejabberdctl.cfg").is_file():
            # Started but no PID file yet: ask the node itself, over our dist port.
            try:
                self._ctl(ctl, "stop")
            except (ServerError, subprocess.TimeoutExpired):
                pass

    def _remove_dir(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __repr__(self) -> str:
        ports = f"c2s={self.c2s_port} component={self.component_port}"
        state = f"node={self.node} pid={self.pid} {ports}"
        return f"<PrivateEjabberd {state if self.running else 'stopped'}>"
