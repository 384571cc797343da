"""What ``xmpp-queue admin`` prints: a command's reply as text for people, or as
typed JSON for scripts.

The service writes every result value in its machine form with its XEP-0122
datatype (``xmpp_queue/admin/forms.py``); here those come back as JSON types:
``xs:integer`` a number, ``xs:decimal`` (seconds, vars ending ``_seconds``) a
number, ``xs:boolean`` true/false, ``xs:dateTime`` an ISO 8601 string, an empty
value null, a multi-line value an array ([] when empty), ``x:attributes`` an
object. A reply is one object::

    {"command": "xmpp-queue#details", "status": "completed",
     "notes": [{"type": "info", "text": "..."}],
     "fields": {"node": "jobs", "backlog": 3, ...},
     "tables": {"subscribers": [{...}], "locks": [], "dead_letters": []}}
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from slixmpp import Iq
from slixmpp.plugins.xep_0004 import Form

from xmpp_queue.admin.humanize import duration

X = "{jabber:x:data}"
VALIDATE = "{http://jabber.org/protocol/xdata-validate}validate"
MULTI = frozenset({"text-multi", "jid-multi", "list-multi"})


def typed(values: list[str], datatype: str | None, multi: bool) -> Any:
    """Form values (as sent) as the JSON value their datatype says."""
    if datatype == "x:attributes":
        pairs = (v.partition("=") for v in values)
        return {name: value for name, _, value in pairs}
    if multi:
        return list(values)
    text = values[0] if values else ""
    if text == "":
        return None
    try:
        if datatype in ("xs:integer", "xs:int", "xs:long", "xs:short", "xs:byte"):
            return int(text)
        if datatype in ("xs:decimal", "xs:double", "xs:float"):
            number = float(text)
            return int(number) if number.is_integer() and "." not in text else number
    except ValueError:
        return text
    if datatype == "xs:boolean":
        return text in ("1", "true")
    return text


def _spec(field: ET.Element) -> tuple[str | None, bool]:
    validate = field.find(VALIDATE)
    datatype = validate.get("datatype") if validate is not None else None
    return datatype, field.get("type") in MULTI


def _values(field: ET.Element) -> list[str]:
    return [v.text or "" for v in field.findall(f"{X}value")]


def form_data(form: Form) -> tuple[dict[str, Any], str | None, list[dict[str, Any]] | None]:
    """(fields by var, the table's name, its rows) of one result form."""
    xml = form.xml
    fields: dict[str, Any] = {}
    name = None
    for field in xml.findall(f"{X}field"):
        var, kind = field.get("var"), field.get("type")
        if not var or kind == "fixed":
            continue
        if var == "table" and kind == "hidden":
            name = (_values(field) or [""])[0]
            continue
        fields[var] = typed(_values(field), *_spec(field))
    reported = xml.find(f"{X}reported")
    if reported is None:
        return fields, None, None
    columns = {var: _spec(f) for f in reported.findall(f"{X}field") if (var := f.get("var"))}
    rows = []
    for item in xml.findall(f"{X}item"):
        cells = {var: _values(f) for f in item.findall(f"{X}field") if (var := f.get("var"))}
        rows.append({var: typed(cells.get(var, []), *spec) for var, spec in columns.items()})
    return fields, name or form["title"] or "rows", rows


def reply_json(node: str, reply: Iq) -> dict[str, Any]:
    command = reply["command"]
    fields: dict[str, Any] = {}
    tables: dict[str, list[dict[str, Any]]] = {}
    for form in command["substanzas"]:
        if isinstance(form, Form):
            found, name, rows = form_data(form)
            fields.update(found)
            if name is not None and rows is not None:
                tables[name] = rows
    return {
        "command": node,
        "status": command["status"],
        "notes": [{"type": level, "text": text} for level, text in command["notes"]],
        "fields": fields,
        "tables": tables,
    }


def status_of(reply: Iq) -> int:
    """Exit status 1 when the service's notes report an error, else 0."""
    return 1 if any(level == "error" for level, _ in reply["command"]["notes"]) else 0


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


# --- for people --------------------------------------------------------------------


def _shown(var: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    if var.endswith("_seconds") and isinstance(value, int | float):
        return duration(value) if value >= 0 else f"-{duration(-value)}"
    return str(value)


def print_reply(reply: Iq) -> None:
    """Print the notes and result forms of a completed command."""
    for level, text in reply["command"]["notes"]:
        print(f"{level}: {text}")
    for item in reply["command"]["substanzas"]:
        if isinstance(item, Form):
            print()
            print_form(item)


def print_form(form: Form) -> None:
    if form["title"]:
        print(form["title"])
        print("=" * len(form["title"]))
    fields, _, rows = form_data(form)
    if rows is not None:
        reported = form.get_reported()
        columns = [(var, f["label"] or var) for var, f in reported.items()]
        cells = [[_shown(var, row.get(var)) for var, _ in columns] for row in rows]
        print_table([label for _, label in columns], cells)
        return
    labels = {var: f["label"] or var for var, f in form.get_fields().items() if var}
    for field in form.xml.findall(f"{X}field"):
        var = field.get("var")
        if field.get("type") == "fixed":
            print(f"\n{''.join(_values(field))}")
        elif var in fields:
            print(f"{labels.get(var, var)}: {_shown(var, fields[var])}")


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    if not rows:
        print("(no rows)")
