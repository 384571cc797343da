"""Rows -> item payloads: the enqueue transform, and why a row is refused.

Why separate: turning a row into an item is the part of bulk enqueue worth
testing on its own (no network): ``prepare_items`` is a pure DataFrame ->
DataFrame function built from Spark expressions, and ``xml_problem`` is the one
check Spark cannot express (well-formed XML), run on the executors just before
publishing.

A row becomes one of:
- an item: ``item_id`` (from ``--id-column``, else None so the service picks
  one) and ``payload`` (one XML element as text);
- a rejected row: ``reject`` holds ``<category>: <detail>``, where the
  category is one of REJECT_CATEGORIES.
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from xmpp_queue.client.payload import JSON_NS
from xmpp_queue.pipeline.item_columns import ITEM_HEADERS, ItemColumns, headers_column

PayloadMode = Literal["json", "xml"]
CORRUPT = "_corrupt_record"
SOURCE = "_source"
"""Input file of a row (added by ``enqueue.read_input``), kept for reject reports."""

BAD_ROW = "bad row"
TOO_LARGE = "payload too large"
REFUSED = "refused by the service"
NOT_SENT = "not sent"
REJECT_CATEGORIES = (BAD_ROW, TOO_LARGE, REFUSED)

ITEM_ID, PAYLOAD, PAYLOAD_BYTES, REJECT, RECORD = (
    "item_id",
    "payload",
    "payload_bytes",
    "reject",
    "record",
)
PREPARED_COLUMNS = (ITEM_ID, PAYLOAD, PAYLOAD_BYTES, REJECT, RECORD, SOURCE, ITEM_HEADERS)


def data_columns(frame: DataFrame) -> list[str]:
    """The user's columns (not Spark's corrupt-record or our source column)."""
    return [c for c in frame.columns if c not in (CORRUPT, SOURCE)]


def _xml_text(column: Column) -> Column:
    """Escape character data for XML (``&`` first, then ``<`` and ``>``)."""
    escaped = F.regexp_replace(column, "&", "&amp;")
    escaped = F.regexp_replace(escaped, "<", "&lt;")
    return F.regexp_replace(escaped, ">", "&gt;")


def json_container(frame: DataFrame) -> Column:
    """XEP-0335: the row's columns as a JSON object inside ``<json xmlns=.../>``."""
    obj = F.to_json(F.struct(*[F.col(f"`{c}`") for c in data_columns(frame)]))
    return F.concat(F.lit(f"<json xmlns='{JSON_NS}'>"), _xml_text(obj), F.lit("</json>"))


def prepare_items(
    frame: DataFrame,
    mode: PayloadMode,
    max_payload_bytes: int,
    id_column: str | None = None,
    xml_column: str | None = None,
    item_columns: ItemColumns | None = None,
) -> DataFrame:
    """(item_id, payload, payload_bytes, reject, record, _source, item_headers) for
    each input row (``item_headers``: the cells *item_columns* chose, as JSON).

    Rows Spark could not parse, rows with an empty id (when ids come from a
    column), empty XML cells, and payloads above *max_payload_bytes* get a
    ``reject`` reason instead of being sent. ``record`` is the row as JSON (or
    the raw text of a malformed line): for rows rejected here, and in XML mode
    for every row (the service may still refuse one, and its rejects line must
    be replayable). In JSON mode the payload itself carries the row's JSON, so
    :func:`record_of_payload` gives it back without a second copy per row.
    """
    columns = set(frame.columns)
    for name, role in ((id_column, "--id-column"), (xml_column, "--xml-column")):
        if name is not None and name not in columns:
            raise ValueError(f"{role} {name!r} is not a column of the input ({sorted(columns)})")
    if mode == "xml" and xml_column is None:
        raise ValueError("payload mode xml needs --xml-column")

    corrupt = F.col(CORRUPT) if CORRUPT in columns else F.lit(None).cast("string")
    if id_column is None:
        item_id = F.lit(None).cast("string")
    else:
        trimmed = F.trim(F.col(f"`{id_column}`").cast("string"))
        item_id = F.when(trimmed != "", trimmed)
    if mode == "json":
        payload = json_container(frame)
    else:
        payload = F.trim(F.col(f"`{xml_column}`").cast("string"))
    size = F.octet_length(payload)

    reject = (
        F.when(corrupt.isNotNull(), F.lit(f"{BAD_ROW}: malformed record"))
        .when(
            F.lit(id_column is not None) & item_id.isNull(),
            F.lit(f"{BAD_ROW}: empty item id in column {id_column}"),
        )
        .when(
            payload.isNull() | (payload == ""),
            F.lit(f"{BAD_ROW}: empty XML in column {xml_column}"),
        )
        .when(
            size > max_payload_bytes,
            F.concat(
                F.lit(f"{TOO_LARGE}: "),
                size.cast("string"),
                F.lit(f" bytes > {max_payload_bytes}"),
            ),
        )
    )
    record_json = F.to_json(F.struct(*[F.col(f"`{c}`") for c in data_columns(frame)]))
    record = (
        F.coalesce(corrupt, record_json)
        if mode == "xml"
        else F.when(reject.isNotNull(), F.coalesce(corrupt, record_json))
    )
    source = F.col(SOURCE) if SOURCE in columns else F.lit(None).cast("string")
    prepared = frame.select(
        item_id.alias(ITEM_ID),
        payload.alias(PAYLOAD),
        size.alias(PAYLOAD_BYTES),
        reject.alias(REJECT),
        record.alias(RECORD),
        source.alias(SOURCE),
        headers_column(frame, item_columns or ItemColumns()).alias(ITEM_HEADERS),
    )
    # A rejected row carries no payload to the executors' publishers.
    return prepared.withColumn(PAYLOAD, F.when(F.col(REJECT).isNull(), F.col(PAYLOAD)))


def record_of_payload(payload: str | None) -> str | None:
    """The row's JSON back from a XEP-0335 ``<json/>`` payload (None otherwise)."""
    if not payload:
        return None
    from xml.etree import ElementTree as ET

    try:
        element = ET.fromstring(payload)
    except ET.ParseError:
        return None
    return element.text if element.tag == f"{{{JSON_NS}}}json" else None


def xml_problem(payload: str) -> str | None:
    """Why *payload* cannot be an item payload, or None when it can: it must be
    exactly one well-formed XML element. Entities are not expanded and nothing
    is fetched (the input is untrusted)."""
    from lxml import etree

    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
    )
    try:
        root = etree.fromstring(payload.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        return f"{BAD_ROW}: not well-formed XML ({exc.msg})"
    if root is None:
        return f"{BAD_ROW}: no XML element"
    if root.getroottree().docinfo.doctype:
        return f"{BAD_ROW}: XML with a DOCTYPE"
    return None


def category_of(reason: str) -> str:
    """The category part of a ``category: detail`` reason."""
    return reason.split(":", 1)[0]
