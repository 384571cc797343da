"""XEP-0004 data forms for pubsub, derived from the core's field tables.

Every form here is built from ``core/node_config.py``'s ``NODE_CONFIG_FIELDS`` and
``SUBSCRIBE_OPTION_FIELDS`` (var, type, label, options, datatype), so a field added
there shows up in the configure form, the defaults, the node meta-data and the
admin commands without being typed twice. Forms are built as plain ElementTree
elements (what slixmpp stanzas hold), which keeps the output exactly as the specs
show it, and submitted forms are read back into raw ``FormValues``; parsing the
values into typed config is the core's job (``apply_config``,
``parse_subscribe_options``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xmpp_queue.core.model import Node, NodeConfig, bare
from xmpp_queue.core.node_config import (
    META_DATA_FORM,
    NODE_CONFIG_FIELDS,
    NODE_CONFIG_FORM,
    ConfigField,
    config_values,
)
from xmpp_queue.core.subscribe_options import (
    SUBSCRIBE_OPTION_FIELDS,
    SUBSCRIBE_OPTIONS_FORM,
    SubscribeOptions,
    subscribe_option_values,
)
from xmpp_queue.xmpp.stanzas import DATA_FORMS, format_instant

XDATA_VALIDATE = "http://jabber.org/protocol/xdata-validate"
SUBSCRIBE_AUTHORIZATION_FORM = "http://jabber.org/protocol/pubsub#subscribe_authorization"

FormValues = dict[str, list[str]]
"""A submitted form: field var -> its values as sent (FORM_TYPE left out)."""

_SUB_FIELDS = {f.var: f for f in SUBSCRIBE_OPTION_FIELDS}


@dataclass(frozen=True, slots=True)
class SubmittedForm:
    """A ``<x xmlns='jabber:x:data'/>`` as received."""

    type: str  # submit, cancel, form, result
    form_type: str | None  # the FORM_TYPE value, if the form named one
    values: FormValues


def _tag(name: str) -> str:
    return f"{{{DATA_FORMS}}}{name}"


def new_form(form_type: str, form_ns: str) -> ET.Element:
    """An empty form of *form_type* with its hidden FORM_TYPE field (XEP-0068 §3.3)."""
    x = ET.Element(_tag("x"), {"type": form_type})
    add_field(x, "FORM_TYPE", "hidden", values=[form_ns])
    return x


def add_field(
    x: ET.Element,
    var: str,
    kind: str | None = None,
    label: str = "",
    values: Iterable[str] = (),
    options: Sequence[str] = (),
    required: bool = False,
    datatype: str = "",
) -> ET.Element:
    attrs = {"var": var}
    if kind:
        attrs["type"] = kind
    if label:
        attrs["label"] = label
    field = ET.SubElement(x, _tag("field"), attrs)
    if required:
        ET.SubElement(field, _tag("required"))
    for value in values:
        ET.SubElement(field, _tag("value")).text = value
    for option in options:
        ET.SubElement(ET.SubElement(field, _tag("option")), _tag("value")).text = option
    if datatype:
        ET.SubElement(field, f"{{{XDATA_VALIDATE}}}validate", {"datatype": datatype})
    return field


def _add_table_field(x: ET.Element, spec: ConfigField, value: str | None, detailed: bool) -> None:
    """One row of a core field table; *detailed* adds type, label, options and datatype
    (forms to fill in and meta-data), a bare result echo carries only var and value."""
    values = [] if value is None else [value]
    if not detailed:
        add_field(x, spec.var, values=values)
        return
    add_field(
        x,
        spec.var,
        spec.kind,
        spec.label,
        values,
        options=spec.options,
        datatype=spec.datatype if x.get("type") == "form" else "",
    )


def node_config_form(config: NodeConfig, form_type: str = "form") -> ET.Element:
    """§8.2.1 configure form / §8.3 default config: every node_config field.

    Queue fields are always offered: an owner turns a node into a queue by
    submitting ``pubsub#queue`` with its ``pubsub#queue_*`` settings at once.
    """
    x = new_form(form_type, NODE_CONFIG_FORM)
    values = config_values(config)
    for spec in NODE_CONFIG_FIELDS:
        _add_table_field(x, spec, values.get(spec.var), detailed=True)
    return x


def subscribe_options_form(
    options: SubscribeOptions, queue: bool, form_type: str = "form"
) -> ET.Element:
    """§6.3.2 options form / §6.4 defaults; ``pubsub#queue_requests`` on queue nodes only."""
    x = new_form(form_type, SUBSCRIBE_OPTIONS_FORM)
    values = subscribe_option_values(options)
    for spec in SUBSCRIBE_OPTION_FIELDS:
        if spec.queue_only and not queue:
            continue
        _add_table_field(x, spec, values.get(spec.var), detailed=True)
    return x


def options_echo_form(options: SubscribeOptions) -> ET.Element:
    """XEP-0254 §2.1's success reply: the options the subscription was made with,
    as a ``result`` form of var/value pairs."""
    x = new_form("result", SUBSCRIBE_OPTIONS_FORM)
    for var, value in subscribe_option_values(options, echo=True).items():
        add_field(x, var, values=[value])
    return x


def required_options_form(fields: Sequence[str]) -> ET.Element:
    """XEP-0254 §2.1's configuration-required payload: the fields the subscriber must
    fill in, each marked ``<required/>``, exactly as the spec's first example."""
    x = new_form("form", SUBSCRIBE_OPTIONS_FORM)
    for var in fields:
        spec = _SUB_FIELDS.get(var)
        add_field(x, var, spec.kind if spec else "text-single", required=True)
    return x


def meta_data_form(node: Node) -> ET.Element:
    """XEP-0060 §5.4 node meta-data (XEP-0128 extended disco#info): the automatic
    facts, then every configured value (queue fields only on queue nodes)."""
    x = new_form("result", META_DATA_FORM)
    add_field(
        x, "pubsub#creation_date", "text-single", "Creation date", [format_instant(node.created_at)]
    )
    if node.creator:
        add_field(x, "pubsub#creator", "jid-single", "Node creator", [bare(node.creator)])
    values = config_values(node.config)
    for spec in NODE_CONFIG_FIELDS:
        if spec.queue_only and not node.config.queue:
            continue
        _add_table_field(x, spec, values.get(spec.var), detailed=True)
    return x


def authorization_form(node: str, jid: str, subid: str) -> ET.Element:
    """XEP-0060 §8.6: the form an owner answers to approve a pending subscription."""
    x = new_form("form", SUBSCRIBE_AUTHORIZATION_FORM)
    add_field(x, "pubsub#subid", "hidden", values=[subid])
    add_field(x, "pubsub#node", "text-single", "Node ID", [node])
    add_field(x, "pubsub#subscriber_jid", "jid-single", "Subscriber Address", [jid])
    add_field(
        x, "pubsub#allow", "boolean", "Allow this JID to subscribe to this pubsub node?", ["0"]
    )
    return x


def read_form(x: ET.Element) -> SubmittedForm:
    """Read a received form into raw values; FORM_TYPE is returned apart."""
    values: FormValues = {}
    form_type: str | None = None
    for field in x.findall(_tag("field")):
        var = field.get("var")
        if not var:
            continue
        texts = [v.text or "" for v in field.findall(_tag("value"))]
        if var == "FORM_TYPE":
            form_type = texts[0] if texts else ""
            continue
        values[var] = texts
    return SubmittedForm(x.get("type", ""), form_type, values)


def find_form(parent: ET.Element | None) -> ET.Element | None:
    return None if parent is None else parent.find(_tag("x"))
