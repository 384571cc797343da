"""What can go wrong for a client, as typed exceptions.

A caller decides on the *condition* (RFC 6120 §8.3.3) and the error *type*: a
``wait`` error is worth retrying, the others are not. The pubsub#errors child
(XEP-0060 §7 tables, e.g. ``configuration-required``) comes as
``app_condition`` so a caller can tell two ``not-acceptable`` errors apart.
"""

from __future__ import annotations


class ClientError(Exception):
    """Base of everything ``xmpp_queue.client`` raises on purpose."""


class ConnectionLost(ClientError):
    """The stream closed (or never opened) while a request was outstanding."""


class AuthenticationFailed(ClientError):
    """The XMPP server refused the JID / password."""


class LoginFailed(ClientError):
    """The login could not be completed (TLS required, wrong port, no answer); the
    message says what to change."""


class LockLost(ClientError):
    """The service no longer gives this worker the item's lock (timed out, or
    handed back already): a job's extend / unlock / dead_letter cannot apply."""


class StanzaError(ClientError):
    """An IQ came back with ``type='error'``."""

    def __init__(
        self,
        condition: str,
        text: str = "",
        etype: str = "cancel",
        app_condition: str | None = None,
    ) -> None:
        self.condition = condition
        self.text = text
        self.etype = etype
        self.app_condition = app_condition
        detail = f"{condition} ({etype})"
        if app_condition:
            detail += f" [{app_condition}]"
        super().__init__(f"{detail}: {text}" if text else detail)

    @property
    def retryable(self) -> bool:
        """RFC 6120 §8.3.2: ``wait`` means the same request may succeed later."""
        return self.etype == "wait"


class PublishError(StanzaError):
    """A publish failed for good (after retrying wait-type errors, or a timeout).

    ``condition`` is the stanza error condition, or ``remote-server-timeout`` when
    no answer came in time, or ``connection-lost`` when the stream closed first.
    """
