"""The XMPP client behind ``xmpp-queue admin``: log in, run a XEP-0050 command,
answer its forms; and where its login comes from (flags, the demo's
connection.json, or ``-c config.toml``'s optional ``[admin]`` section).

``[admin]`` (read here only; ``xmpp-queue run`` ignores it) names the account the
CLI logs in as, which must be listed in ``[admins] jids``::

    [admin]
    jid = "ops@example.org"
    password_file = "/etc/xmpp-queue/admin.password"   # or password = "..."
    server = "127.0.0.1:5222"                          # optional: else DNS
    plain = false                                      # loopback test servers only

The service is ``[component] jid`` of the same file.
"""

from __future__ import annotations

import argparse
import asyncio
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slixmpp import JID, ClientXMPP, Iq
from slixmpp.exceptions import IqError
from slixmpp.plugins.xep_0004 import Form

from xmpp_queue.client.account import Account
from xmpp_queue.core.placement import parse_node_uri

TIMEOUT = 15.0
STANZAS = "urn:ietf:params:xml:ns:xmpp-stanzas"
PUBSUB = "http://jabber.org/protocol/pubsub"
ADMIN_KEYS = ("jid", "password", "password_file", "server", "plain")

Answers = Sequence[Mapping[str, str | list[str]]]


class UsageError(Exception):
    """Bad arguments: one line on standard error, exit status 2."""


class AdminClient(ClientXMPP):
    """An XMPP client that drives the service's admin commands."""

    def __init__(self, account: Account) -> None:
        plain = account.allow_plain
        config = {"feature_mechanisms": {"unencrypted_plain": True}} if plain else {}
        super().__init__(account.jid, account.password, plugin_config=config)
        self.account = account
        if plain:
            self.enable_starttls = False
            self.enable_direct_tls = False
            self.enable_plaintext = True
        self.register_plugin("xep_0030")  # service discovery: the command list
        self.register_plugin("xep_0004")  # data forms
        self.register_plugin("xep_0050")  # ad-hoc commands

    async def start(self) -> None:
        """Connect and wait until the session is up (or fail with the reason).

        The account's server, or without one (``host=None``) the JID's domain's
        DNS records, as any XMPP client finds its server."""
        address = None if self.account.host is None else self.account.address
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def fail(reason: str) -> Any:
            def handler(event: Any) -> None:
                if not ready.done():
                    ready.set_exception(ConnectionError(f"{reason}: {event}"))

            return handler

        def started(_: Any) -> None:
            if not ready.done():
                ready.set_result(None)

        self.add_event_handler("session_start", started, disposable=True)
        self.add_event_handler("failed_all_auth", fail("authentication failed"), disposable=True)
        self.add_event_handler("connection_failed", fail("cannot connect"), disposable=True)
        if address:
            self.connect(*address)
        else:
            self.connect()
        try:
            await asyncio.wait_for(ready, TIMEOUT)
        except BaseException:
            self.cancel_connection_attempt()
            self.abort()
            raise

    async def stop(self) -> None:
        await self.disconnect()

    async def service_of(self, service: str, node: str) -> str:
        """The service that holds queue *node*: a sharded service's directory
        answers with a redirect to the node's shard (docs/scaling.md); any other
        answer means *service* itself."""
        try:
            await self.plugin["xep_0030"].get_info(jid=JID(service), node=node, timeout=TIMEOUT)
        except IqError as exc:
            return _redirect(exc) or service
        return service

    async def place_new(self, service: str, node: str) -> str:
        """The shard a sharded service's directory places the new *node* on (a pubsub
        create sent to the directory places the name and redirects)."""
        request = self.make_iq_set(ito=JID(service))
        pubsub = ET.SubElement(request.xml, f"{{{PUBSUB}}}pubsub")
        ET.SubElement(pubsub, f"{{{PUBSUB}}}create", {"node": node})
        try:
            await request.send(timeout=TIMEOUT)
        except IqError as exc:
            found = _redirect(exc)
            if found is not None:
                return found
            raise
        return service

    async def commands(self, service: str) -> list[tuple[str, str]]:
        """(node, name) of each command the service offers this account."""
        reply = await self.plugin["xep_0050"].get_commands(service, timeout=TIMEOUT)
        found = reply.xml.findall("{http://jabber.org/protocol/disco#items}query/*")
        return [(item.get("node", ""), item.get("name", "")) for item in found]

    async def run(self, service: str, node: str, answers: Answers) -> Iq:
        """Execute a command and answer its forms in order; returns the last reply.

        Each answer fills the form of one stage; the stage's own actions decide
        whether it is sent with ``next`` or ``complete``. A stage left unanswered
        is cancelled, so no session stays open on the service.
        """
        adhoc = self.plugin["xep_0050"]
        reply: Iq = await adhoc.send_command(service, node, timeout=TIMEOUT)
        for values in answers:
            command = reply["command"]
            if command["status"] != "executing":
                break
            action = "complete" if "complete" in command["actions"] else "next"
            reply = await adhoc.send_command(
                service,
                node,
                action=action,
                sessionid=command["sessionid"],
                payload=submit(values),
                timeout=TIMEOUT,
            )
        command = reply["command"]
        if command["status"] == "executing":
            await adhoc.send_command(
                service, node, action="cancel", sessionid=command["sessionid"], timeout=TIMEOUT
            )
            raise UsageError(f"{node} asked for more input than the command line gave")
        return reply


def _redirect(exc: IqError) -> str | None:
    """The service a redirect (or gone) error points to (RFC 6120: an xmpp: URI)."""
    error = exc.iq["error"]
    if error["condition"] not in ("redirect", "gone"):
        return None
    found = error.xml.find(f"{{{STANZAS}}}{error['condition']}")
    uri = (found.text if found is not None else None) or error["text"] or ""
    try:
        return parse_node_uri(uri)[0]
    except ValueError:
        return None


def submit(values: Mapping[str, str | list[str]]) -> Form:
    form = Form()
    form["type"] = "submit"
    for var, value in values.items():
        form.add_field(var=var, value=value)
    return form


def login_from_config(args: argparse.Namespace) -> None:
    """Fill the login the command line left open from ``-c FILE``: ``[admin]`` for the
    account, ``[component] jid`` for the service. Flags given win."""
    path = Path(args.config)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    admin: Any = data.get("admin", {})
    if not isinstance(admin, dict):
        raise UsageError(f"{path}: [admin] must be a table")
    unknown = sorted(set(admin) - set(ADMIN_KEYS))
    if unknown:
        raise UsageError(
            f"{path}: admin.{unknown[0]}: unknown key (expected {', '.join(ADMIN_KEYS)})"
        )
    component: Any = data.get("component", {})
    shards: Any = data.get("shards", {})
    if not args.service and isinstance(shards, dict):  # the public name: the directory
        args.shards = tuple(shards.get("domains") or ())
    args.service = args.service or (component.get("jid") if isinstance(component, dict) else None)
    args.jid = args.jid or admin.get("jid")
    if not args.password:
        if "password_file" in admin:
            try:
                args.password = Path(admin["password_file"]).read_text().strip()
            except OSError as exc:
                raise UsageError(f"admin.password_file: {exc.strerror or exc}") from None
        else:
            args.password = admin.get("password")
    args.server = args.server or admin.get("server")
    args.allow_plain = args.allow_plain or bool(admin.get("plain", False))
