"""A client's login failures, each one line that says what to change (issue 13).

Against the real servers: a wrong password, the component port instead of the
client port, and a Prosody that requires TLS (STARTTLS offered and required,
with a throw-away self-signed certificate) while the client asked for a plain
connection. Each must fail within seconds, with a message naming the fix.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.env import missing
from tests.kit.integration import COMPONENTS, PASSWORD
from xmpp_queue.client import AuthenticationFailed, LoginFailed, Publisher
from xmpp_queue.servers import PrivateProsody, ServerNotInstalled

pytestmark = pytest.mark.integration

QUICK = 10.0


def _publisher(server: Any, port: int, password: str = PASSWORD) -> Publisher:
    return Publisher(
        f"pub@{server.domain}",
        password,
        "queue.localhost",
        host=server.host,
        port=port,
        allow_plain=True,
        reply_timeout=QUICK,
    )


async def test_a_wrong_password_says_so(xmpp_server: Any) -> None:
    started = time.monotonic()
    with pytest.raises(AuthenticationFailed) as caught:
        await _publisher(xmpp_server, xmpp_server.c2s_port, "not-the-password").connect()
    assert time.monotonic() - started < QUICK
    message = str(caught.value)
    assert "pub@localhost" in message and "wrong password, or no such account" in message
    assert "No appropriate login method" not in message and "{}" not in message


async def test_the_component_port_is_not_a_client_port(xmpp_server: Any) -> None:
    with pytest.raises(LoginFailed, match=r"client \(c2s\) port"):
        await _publisher(xmpp_server, xmpp_server.component_port).connect()


@pytest.fixture(scope="module")
def tls_prosody(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateProsody]:
    openssl = shutil.which("openssl")
    if openssl is None:
        missing("openssl is not installed (apt-get install openssl)")
    certs = tmp_path_factory.mktemp("certs")
    key, cert = str(certs / "localhost.key"), str(certs / "localhost.crt")
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
    subject = ["-subj", "/CN=localhost", "-keyout", key, "-out", cert]
    subprocess.run(
        [openssl, *request, *subject],
        check=True,
        capture_output=True,
    )
    server = PrivateProsody(COMPONENTS, {"pub": PASSWORD}, tls_certificates=Path(certs))
    try:
        server.start()
    except ServerNotInstalled as exc:
        missing(str(exc))
    yield server
    server.stop()


async def test_a_plain_login_to_a_server_requiring_tls_fails_at_once(
    tls_prosody: PrivateProsody,
) -> None:
    started = time.monotonic()
    with pytest.raises(LoginFailed) as caught:
        await _publisher(tls_prosody, tls_prosody.c2s_port).connect()
    assert time.monotonic() - started < QUICK, "no 30 s hang"
    assert "requires TLS" in str(caught.value)
    assert "without --plain" in str(caught.value)


async def test_tls_to_a_plain_text_port_names_tls_not_a_server_that_is_down(
    xmpp_server: Any,
) -> None:
    """Issue 24: a client using TLS against the plain-text client port of a private
    server was told "is the XMPP server running?" (slixmpp's direct-TLS attempt
    failed first and ended the login); the failure is a TLS one."""
    publisher = Publisher(
        f"pub@{xmpp_server.domain}",
        PASSWORD,
        "queue.localhost",
        host=xmpp_server.host,
        port=xmpp_server.c2s_port,
        allow_plain=False,
        reply_timeout=QUICK,
    )
    started = time.monotonic()
    with pytest.raises(LoginFailed) as caught:
        await publisher.connect()
    assert time.monotonic() - started < QUICK
    message = str(caught.value)
    assert "TLS" in message and "is the XMPP server running" not in message
    assert "allow_plain" in message


async def test_a_certificate_not_trusted_here_is_named(tls_prosody: PrivateProsody) -> None:
    """STARTTLS to a server whose self-signed certificate is not trusted."""
    publisher = Publisher(
        "pub@localhost",
        PASSWORD,
        "queue.localhost",
        host=tls_prosody.host,
        port=tls_prosody.c2s_port,
        reply_timeout=QUICK,
    )
    started = time.monotonic()
    with pytest.raises(LoginFailed) as caught:
        await publisher.connect()
    assert time.monotonic() - started < QUICK
    assert "TLS failed" in str(caught.value) and "certificate" in str(caught.value)
