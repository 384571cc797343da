"""XEP-0004 forms for the admin commands: built from the core's tables, read back strictly.

Building: every configuration field comes from ``core/node_config.py``'s
``NODE_CONFIG_FIELDS`` (var, type, label, datatype), so a field added there shows
up here without being typed twice. Reading: :class:`Submitted` holds the raw
values of a submitted form and turns each into what the command needs, raising
:class:`BadPayload` with a sentence an admin can act on ("Holder JID: 'a@@b' is
not a valid JID") instead of letting a bad value reach the service.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from slixmpp import JID
from slixmpp.jid import InvalidJID
from slixmpp.plugins.xep_0004 import Form, FormField

from xmpp_queue.admin.errors import BadPayload
from xmpp_queue.core.model import Node
from xmpp_queue.core.node_config import ConfigField, parse_bool

DATA_FORMS_NS = "jabber:x:data"
XDATA_VALIDATE_NS = "http://jabber.org/protocol/xdata-validate"


# --- building ---------------------------------------------------------------------------


def new_form(title: str, instructions: str = "", kind: str = "form") -> Form:
    form = Form()  # type: ignore[no-untyped-call]
    form["type"] = kind
    form["title"] = title
    if instructions:
        form["instructions"] = instructions
    return form


def add_field(
    form: Form,
    var: str = "",
    ftype: str = "text-single",
    label: str = "",
    desc: str = "",
    required: bool = False,
    value: object = None,
    options: Sequence[Mapping[str, str]] | None = None,
) -> FormField:
    """slixmpp's ``Form.add_field``, typed."""
    field: FormField = form.add_field(  # type: ignore[no-untyped-call]
        var=var,
        ftype=ftype,
        label=label,
        desc=desc,
        required=required,
        value=value,
        options=options,
    )
    return field


def add_fixed(form: Form, text: str) -> None:
    """A read-only line of text inside a form (XEP-0004 ``fixed``)."""
    add_field(form, ftype="fixed", value=text)


def add_node_choice(
    form: Form,
    nodes: Sequence[Node],
    *,
    label: str,
    desc: str,
    value: str | None = None,
    var: str = "node",
) -> FormField:
    """A required ``list-single`` of existing nodes; queue nodes are labelled as such."""
    options = [
        {"value": n.node_id, "label": f"{n.node_id} (queue)" if n.config.queue else n.node_id}
        for n in nodes
    ]
    field = add_field(
        form, var=var, ftype="list-single", label=label, desc=desc, required=True, options=options
    )
    if value is not None and any(n.node_id == value for n in nodes):
        field["value"] = value
    return field


def add_config_field(
    form: Form, spec: ConfigField, value: str, required: bool = False
) -> FormField:
    """One field of the node configuration table, with its XEP-0122 datatype if any."""
    field = add_field(
        form,
        var=spec.var,
        ftype=spec.kind,
        label=spec.label,
        required=required,
        options=[{"value": o, "label": o} for o in spec.options] if spec.options else None,
    )
    field["value"] = value
    if spec.datatype:
        ET.SubElement(field.xml, f"{{{XDATA_VALIDATE_NS}}}validate", {"datatype": spec.datatype})
    return field


def add_result(form: Form, var: str, label: str, value: str | Sequence[str]) -> None:
    """A value shown in a ``result`` form: one line (text-single) or several (text-multi)."""
    if isinstance(value, str):
        add_field(form, var=var, ftype="text-single", label=label, value=value)
    else:
        add_field(form, var=var, ftype="text-multi", label=label, value=list(value))


# --- typed results -----------------------------------------------------------------
#
# Values in forms are strings; scripts need numbers, times and lists. Every value a
# result shows is written in its machine form with its XEP-0122 datatype, so that
# any client can type it back (the admin CLI's --json does): counts are
# xs:integer, seconds xs:decimal (vars ending in ``_seconds``), instants
# xs:dateTime (XEP-0082, UTC), flags xs:boolean, an item's attributes
# ``x:attributes`` (one ``name=value`` per line). Empty means "none" (null).

INTEGER, SECONDS, TIME, BOOLEAN, ATTRIBUTES = (
    "xs:integer",
    "xs:decimal",
    "xs:dateTime",
    "xs:boolean",
    "x:attributes",
)
TABLE_VAR = "table"
"""A hidden field naming what a table's rows are (``locks``, ``subscribers``...)."""

Cell = str | int | float | bool | datetime | Mapping[str, str] | Sequence[str] | None


def machine_text(value: Cell) -> str | list[str]:
    """A value as a form carries it (see above)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return [f"{k}={v}" for k, v in value.items()]
    return list(value)


def _validate(field: FormField, datatype: str | None) -> None:
    if datatype:
        ET.SubElement(field.xml, f"{{{XDATA_VALIDATE_NS}}}validate", {"datatype": datatype})


def add_typed(
    form: Form, var: str, label: str, value: Cell, datatype: str | None = None
) -> FormField:
    """A result field: its machine text, its datatype, one line or several."""
    text = machine_text(value)
    kind = "text-multi" if isinstance(text, list) else "text-single"
    field = add_field(form, var=var, ftype=kind, label=label, value=text)
    _validate(field, datatype)
    return field


Column = tuple[str, str, str | None]
"""(var, label, XEP-0122 datatype or None for text)."""


def table(
    title: str,
    columns: Sequence[tuple[str, str] | Column],
    rows: Iterable[Mapping[str, Cell]],
    name: str | None = None,
) -> Form:
    """A ``result`` form with a ``<reported/>`` header and one ``<item/>`` per row;
    *name* (a hidden field) says what the rows are when a reply holds several."""
    form = new_form(title, kind="result")
    if name:
        add_field(form, var=TABLE_VAR, ftype="hidden", value=name)
    specs = [(c[0], c[1], c[2] if len(c) > 2 else None) for c in columns]
    for var, label, datatype in specs:
        multi = datatype == ATTRIBUTES
        field = form.add_reported(  # type: ignore[no-untyped-call]
            var, ftype="text-multi" if multi else "text-single", label=label
        )
        _validate(field, datatype)
    for row in rows:
        form.add_item({var: machine_text(row.get(var)) for var, _, _ in specs})  # type: ignore[no-untyped-call]
    return form


# --- reading ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Submitted:
    """The fields of a submitted form as raw strings (field var -> values, as sent).

    XEP-0050 §4.4 says a form of type ``cancel`` is to be read as ``submit``, so
    the type is not checked. No form at all reads as an empty one: required
    fields then say they are missing.
    """

    values: Mapping[str, tuple[str, ...]]

    @classmethod
    def empty(cls) -> Submitted:
        return cls({})

    @classmethod
    def from_payload(cls, payload: object) -> Submitted:
        """Read the first data form of what slixmpp hands a command step."""
        candidates = payload if isinstance(payload, list) else [payload]
        form = next((p for p in candidates if isinstance(p, Form)), None)
        if form is None:
            return cls.empty()
        values: dict[str, tuple[str, ...]] = {}
        for field in form.xml.findall(f"{{{DATA_FORMS_NS}}}field"):
            var = field.get("var")
            if var:
                found = field.findall(f"{{{DATA_FORMS_NS}}}value")
                values[var] = tuple((v.text or "") for v in found)
        return cls(values)

    def text(self, var: str, label: str, required: bool = False) -> str | None:
        """One trimmed value; empty or absent is None (or an error when required)."""
        raw = self.values.get(var, ())
        if len(raw) > 1:
            raise BadPayload(f"{label}: expected one value, got {len(raw)}")
        value = raw[0].strip() if raw else ""
        if not value:
            if required:
                raise BadPayload(f"{label} is required")
            return None
        return value

    def choice(self, var: str, label: str) -> str:
        value = self.text(var, label, required=True)
        assert value is not None
        return value

    def flag(self, var: str, label: str, default: bool = False) -> bool:
        raw = self.text(var, label)
        if raw is None:
            return default
        try:
            return parse_bool(raw)
        except ValueError:
            raise BadPayload(
                f"{label}: '{raw}' is not a boolean (use 0, 1, false or true)"
            ) from None

    def jid(self, var: str, label: str, required: bool = False) -> str | None:
        """A JID, normalised as the server would write it (bare or full, as given)."""
        raw = self.text(var, label, required)
        if raw is None:
            return None
        try:
            jid = JID(raw)
        except InvalidJID:
            raise BadPayload(f"{label}: '{raw}' is not a valid JID") from None
        if not jid.domain:
            raise BadPayload(f"{label}: '{raw}' is not a valid JID")
        return jid.full

    def count(self, var: str, label: str, minimum: int = 0) -> int | None:
        """A whole number of at least *minimum*; empty is None."""
        raw = self.text(var, label)
        if raw is None:
            return None
        try:
            value = int(raw)
        except ValueError:
            raise BadPayload(f"{label}: '{raw}' is not a whole number") from None
        if value < minimum:
            if value < 0 <= minimum:
                raise BadPayload(f"{label}: must not be negative (got {value})")
            raise BadPayload(f"{label}: must be at least {minimum} (got {value})")
        return value

    def raw(self, specs: Iterable[ConfigField]) -> dict[str, list[str]]:
        """The submitted values of these configuration fields, for the core to parse."""
        return {s.var: list(self.values[s.var]) for s in specs if s.var in self.values}
