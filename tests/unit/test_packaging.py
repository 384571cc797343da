"""What an installed xmpp-queue carries for its users' tools (issue 24)."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_is_marked_typed_and_ships_the_marker() -> None:
    """PEP 561: without py.typed, mypy ignores the client's hints in users' code."""
    assert (ROOT / "xmpp_queue" / "py.typed").is_file()
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert "py.typed" in setup["options.package_data"]["xmpp_queue"]
    assert "include xmpp_queue/py.typed" in (ROOT / "MANIFEST.in").read_text()
