"""How an admin command says no: the XEP-0050 §4.4 errors, and the core's errors mapped to them.

A command never crashes and never lets slixmpp answer "Slixmpp got into trouble":
bad form input becomes ``bad-request`` + ``<bad-payload/>`` with a text saying what
to fix (type modify, so the session stays open and the admin can resubmit), a
domain error from the service becomes the same with the service's own text, and
anything unexpected becomes ``internal-server-error`` with one logged trace.
"""

from __future__ import annotations

import logging

from slixmpp.exceptions import XMPPError
from slixmpp.types import ErrorConditions, ErrorTypes

from xmpp_queue.core.errors import Forbidden, InvalidNodeConfig, PubSubError, StorageUnavailable
from xmpp_queue.core.node_config import config_field

COMMANDS_NS = "http://jabber.org/protocol/commands"

log = logging.getLogger("xmpp_queue.admin")


class BadPayload(Exception):
    """The submitted form cannot be used; ``text`` tells the admin what to fix."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _command_error(
    condition: ErrorConditions, etype: ErrorTypes, specific: str | None, text: str
) -> XMPPError:
    return XMPPError(
        condition,
        text=text,
        etype=etype,
        extension=specific,
        extension_ns=COMMANDS_NS if specific else None,
    )


def bad_payload(text: str) -> XMPPError:
    return _command_error("bad-request", "modify", "bad-payload", text)


def bad_action(text: str) -> XMPPError:
    return _command_error("bad-request", "modify", "bad-action", text)


def malformed_action(text: str) -> XMPPError:
    return _command_error("bad-request", "modify", "malformed-action", text)


def bad_sessionid(text: str) -> XMPPError:
    return _command_error("bad-request", "modify", "bad-sessionid", text)


def session_expired(text: str) -> XMPPError:
    return _command_error("not-allowed", "cancel", "session-expired", text)


def forbidden(text: str) -> XMPPError:
    return _command_error("forbidden", "cancel", None, text)


def unavailable(text: str) -> XMPPError:
    """A stranger's disco of the command list or a command: as if nothing lived here."""
    return _command_error("service-unavailable", "cancel", None, text)


def _domain_text(exc: PubSubError) -> str:
    if isinstance(exc, InvalidNodeConfig):
        spec = config_field(exc.field)
        return f"{spec.label if spec else exc.field}: {exc.reason}"
    return str(exc)


def to_xmpp_error(exc: Exception, command: str) -> XMPPError:
    """The error reply for an exception raised by a command step."""
    if isinstance(exc, XMPPError):
        return exc
    if isinstance(exc, BadPayload):
        return bad_payload(exc.text)
    if isinstance(exc, Forbidden):
        return forbidden(str(exc))
    if isinstance(exc, StorageUnavailable):
        return _command_error("internal-server-error", "wait", None, str(exc))
    if isinstance(exc, PubSubError):
        # The admin picked or typed something the service refuses (a node deleted
        # meanwhile, an id that exists, a value out of range): fix and resubmit.
        return bad_payload(_domain_text(exc))
    log.exception("event=admin_command_failed command=%s", command)
    return _command_error(
        "internal-server-error", "wait", None, "the command failed; the service log has details"
    )
