"""The slixmpp seam: the installed slixmpp still has what our overrides were written against.

Each failure names the method or attribute that changed (xmpp_queue/slixmpp_seam.py
says why each override exists); and no class of ours overrides a slixmpp method
outside the seam.
"""

from __future__ import annotations

import configparser
import inspect
from importlib.metadata import version
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from slixmpp import ClientXMPP, ComponentXMPP
from slixmpp.xmlstream import XMLStream

from xmpp_queue import slixmpp_seam
from xmpp_queue.admin_client import AdminClient
from xmpp_queue.client.connection import QueueStream
from xmpp_queue.slixmpp_seam import (
    CALLED,
    OVERRIDES,
    RELIED_ON,
    SeamClient,
    SeamComponent,
    parameters,
)
from xmpp_queue.xmpp.component import QueueComponent

ROOT = Path(__file__).resolve().parents[2]


RECORDED = {**OVERRIDES, **CALLED}


@pytest.mark.parametrize(
    ("cls", "method"), list(RECORDED), ids=[f"{c.__name__}.{m}" for c, m in RECORDED]
)
def test_an_overridden_or_called_method_keeps_its_recorded_signature(
    cls: type, method: str
) -> None:
    found = getattr(cls, method, None)
    assert found is not None, f"slixmpp {cls.__name__}.{method} is gone (slixmpp_seam uses it)"
    assert parameters(found) == RECORDED[(cls, method)], (
        f"slixmpp {cls.__name__}.{method} changed its parameters: "
        f"{parameters(found)} (slixmpp_seam was written against {RECORDED[(cls, method)]})"
    )


@pytest.mark.parametrize(
    ("cls", "method", "text"), RELIED_ON, ids=[f"{c.__name__}.{m}" for c, m, _ in RELIED_ON]
)
def test_what_an_override_relies_on_is_still_there(cls: type, method: str, text: str) -> None:
    found = getattr(cls, method, None)
    assert found is not None, f"slixmpp {cls.__name__}.{method} is gone (slixmpp_seam relies on it)"
    assert text in inspect.getsource(found), (
        f"slixmpp {cls.__name__}.{method} no longer contains {text!r} (slixmpp_seam relies on it)"
    )


def test_the_attributes_the_seam_reads_are_declared() -> None:
    declared = XMLStream.__annotations__
    for name in ("waiting_queue", "_session_started", "transport"):
        assert name in declared, f"slixmpp XMLStream no longer declares {name} (slixmpp_seam)"


def _replaced(cls: type, base: type) -> set[str]:
    """The slixmpp methods and attributes *cls* itself defines again."""
    return {n for n in vars(cls) if not n.startswith("__") and hasattr(base, n)}


def test_the_seam_overrides_exactly_what_it_records() -> None:
    for seam, base in ((SeamComponent, ComponentXMPP), (SeamClient, ClientXMPP)):
        replaced = _replaced(seam, base)
        recorded = {m for c, m in OVERRIDES if c is base}
        assert replaced == recorded, f"{seam.__name__}: overrides {replaced}, records {recorded}"


@pytest.mark.parametrize("cls", [QueueComponent, QueueStream, AdminClient])
def test_no_class_of_ours_overrides_slixmpp_outside_the_seam(cls: type) -> None:
    base = ComponentXMPP if issubclass(cls, ComponentXMPP) else ClientXMPP
    seam = (SeamComponent, SeamClient)
    ours = [k for k in cls.__mro__ if k.__module__.startswith("xmpp_queue") and k not in seam]
    replaced = {
        f"{k.__name__}.{name}"
        for k in ours
        for name in vars(k)
        if name not in ("__init__", "__doc__", "__module__", "__qualname__") and hasattr(base, name)
    }
    assert not replaced, (
        f"slixmpp methods overridden outside xmpp_queue/slixmpp_seam.py: {replaced}"
    )


def test_setup_cfg_pins_the_range_the_seam_was_checked_against() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    requires = config["options"]["install_requires"].split()
    pinned = next(r for r in requires if r.startswith("slixmpp"))
    assert pinned == f"slixmpp{slixmpp_seam.SLIXMPP_TESTED}"
    assert version("slixmpp") in SpecifierSet(slixmpp_seam.SLIXMPP_TESTED)


# --- the replaced escape ---------------------------------------------------------------


def test_the_replaced_function_keeps_its_recorded_signature_and_use() -> None:
    from slixmpp.xmlstream.tostring import tostring

    for (module, name), recorded in slixmpp_seam.REPLACED.items():
        assert (module, name) == (slixmpp_seam.TOSTRING_MODULE, "escape")
        original = slixmpp_seam.SLIXMPP_ESCAPE
        assert original.__module__ == module, "slixmpp_seam did not keep slixmpp's own escape"
        assert parameters(original) == recorded, (
            f"slixmpp {module}.{name} changed its parameters: {parameters(original)}"
        )
    # tostring looks escape up by name in its module at every call: what the seam relies on
    assert "escape(" in inspect.getsource(tostring)


@given(st.text(), st.booleans())
def test_the_fast_escape_says_what_slixmpps_says(text: str, use_cdata: bool) -> None:
    assert slixmpp_seam.escape(text, use_cdata) == slixmpp_seam.SLIXMPP_ESCAPE(text, use_cdata)


def test_serialised_elements_are_the_same_text_with_either_escape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys
    import xml.etree.ElementTree as ET

    from slixmpp.xmlstream.tostring import tostring

    module = sys.modules[slixmpp_seam.TOSTRING_MODULE]
    payload = ET.fromstring(
        "<job xmlns='urn:x' a='&lt;&amp;&quot;&apos;&gt;'><n:b xmlns:n='urn:y'>x &amp; y"
        " &lt;z&gt; 'q' \"Q\"</n:b>tail &gt; &amp;<c/>" + "long text " * 500 + "</job>"
    )
    slixmpp_seam.install_fast_escape()
    assert module.escape is slixmpp_seam.escape
    ours = tostring(payload)
    monkeypatch.setattr(module, "escape", slixmpp_seam.SLIXMPP_ESCAPE)
    assert ours == tostring(payload)
