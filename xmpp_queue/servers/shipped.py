"""The shipped server examples (``examples/prosody.cfg.lua``, ``examples/ejabberd.yml``),
read so that the private test servers run their component settings.

Why: the tests must break when an example an operator copies would break the
service. A generated config that merely agrees with the example today proves
nothing about the example; so the private servers take the example's own text
for what concerns the component and keep only what a throw-away loopback
instance must own (ports, directories, names, secrets, stanza limits that let a
test reach the component's own limits).

Prosody: the example's global section (everything before its first
``VirtualHost`` or ``Component`` line) goes into the private config verbatim,
ahead of the private instance's own globals; the statements of the example's
``Component`` block (other than its secret) go into every component block. A
setting misplaced under the example's ``VirtualHost`` applies to that host
only, in Prosody and here alike, so it is missing here too.

ejabberd: the options of the example's ``ejabberd_service`` listener (other than
its port, address, hosts and stanza size) become those of the private listener;
its stanza size is read apart (:func:`read_ejabberd_stanza_limit`), for the test
servers that run the example's limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SECTION = re.compile(r"^\s*(VirtualHost|Component)\s")
_SECRET = re.compile(r"^\s*component_secret\s*=")
OWNED_LISTENER_KEYS = frozenset({"port", "ip", "hosts", "module", "max_stanza_size"})
"""Listener options the private ejabberd decides itself (free loopback port, its
components and secrets; the stanza limit is a parameter of its own)."""


@dataclass(frozen=True, slots=True)
class ProsodyExample:
    """The two parts of a Prosody example that concern a component."""

    global_lua: str
    component_lua: str


def read_prosody_example(path: Path) -> ProsodyExample:
    return parse_prosody_example(path.read_text())


def parse_prosody_example(text: str) -> ProsodyExample:
    """Split a Prosody config into its global section and its first Component block."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _SECTION.match(line)), len(lines))
    component: list[str] = []
    inside = False
    for line in lines[first:]:
        section = _SECTION.match(line)
        if section:
            if inside:
                break  # only the first component block: the queue service's
            inside = section.group(1) == "Component"
            continue
        if inside and not _SECRET.match(line):
            component.append(line)
    return ProsodyExample("\n".join(lines[:first]), "\n".join(component))


def read_ejabberd_listener(path: Path) -> dict[str, Any]:
    return parse_ejabberd_listener(path.read_text())


def parse_ejabberd_listener(text: str) -> dict[str, Any]:
    """The options of the example's ``ejabberd_service`` listener the private node takes."""
    listener = _service_listener(text)
    return {k: v for k, v in listener.items() if k not in OWNED_LISTENER_KEYS}


def read_ejabberd_stanza_limit(path: Path) -> int:
    """The ``max_stanza_size`` of the example's component listener (the stanza-size
    tests run an ejabberd with it: the limit an operator who copies the example gets)."""
    limit = _service_listener(path.read_text()).get("max_stanza_size")
    if not isinstance(limit, int):
        raise ValueError("the ejabberd example's ejabberd_service listener sets no max_stanza_size")
    return limit


def _service_listener(text: str) -> dict[str, Any]:
    import yaml  # only the tests and the benchmarks read the ejabberd example

    config = yaml.safe_load(text) or {}
    for listener in config.get("listen") or []:
        if isinstance(listener, dict) and listener.get("module") == "ejabberd_service":
            return listener
    raise ValueError("the ejabberd example has no ejabberd_service listener")
