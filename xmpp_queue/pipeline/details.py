"""What the items were and why they failed: the ledger's detail columns, per node.

Why a report needs them: counts say a node dead-lettered 40 items; the
reasons say 38 were ``KeyError: 'sku'``, and the attributes say most came from
tenant ``acme``. The service writes the details (docs/queueing.md, "The event
ledger"): a ``published`` row keeps the publisher's attributes as a JSON
object, an ``unlocked``/``expired``/``dead_lettered``/``dropped`` row its
reason. Rows without them (written before revision 0006, a nack that gave no
reason) are left out of these tables; the counts in ``node_totals`` have them.

Pure DataFrame -> DataFrame functions over a frame shaped by
``ledger_frame.conform_ledger``, like ``analytics.py``. Every table keeps the
*top* most common entries per group, ranked by count then by text, so ties
are broken the same way on every run.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType

from xmpp_queue.core.ledger import EventKind
from xmpp_queue.ledger_names import ATTRIBUTES, KIND, NODE, REASON

KEY, VALUE, ITEMS, RANK, CATEGORY, COUNT = "key", "value", "items", "rank", "category", "n"

FAILURE, DEAD_LETTER, DROPPED = "failure", "dead_letter", "dropped"
CATEGORIES = (FAILURE, DEAD_LETTER, DROPPED)
"""Reason groups: a delivery that failed (unlocked or expired: the item is offered
again), an item moved to the dead-letter node, an item dropped (expired, truncated)."""

_CATEGORY_OF = {
    EventKind.UNLOCKED.value: FAILURE,
    EventKind.EXPIRED.value: FAILURE,
    EventKind.DEAD_LETTERED.value: DEAD_LETTER,
    EventKind.DROPPED.value: DROPPED,
}


def _top(frame: DataFrame, group: Sequence[str], order: Sequence[Column], top: int) -> DataFrame:
    """The first *top* rows of each *group* by *order*, numbered from 1 in ``rank``."""
    window = Window.partitionBy(*group).orderBy(*order)
    ranked = frame.withColumn(RANK, F.row_number().over(window))
    return ranked.where(F.col(RANK) <= top)


def attribute_pairs(events: DataFrame) -> DataFrame:
    """(node, key, value): one row per attribute of each published row that has
    some. A value that is not a JSON object of strings yields no pairs."""
    published = events.where(
        (F.col(KIND) == F.lit(EventKind.PUBLISHED.value)) & F.col(ATTRIBUTES).isNotNull()
    )
    parsed = F.from_json(F.col(ATTRIBUTES), MapType(StringType(), StringType()))
    return published.select(NODE, F.explode(parsed).alias(KEY, VALUE))


def attribute_keys(pairs: DataFrame, top: int) -> DataFrame:
    """(node, key, items, rank): per node, the keys most published items carried."""
    counts = pairs.groupBy(NODE, KEY).agg(F.count(F.lit(1)).alias(ITEMS))
    return _top(counts, [NODE], [F.col(ITEMS).desc(), F.col(KEY)], top).select(
        NODE, KEY, ITEMS, RANK
    )


def attribute_values(pairs: DataFrame, top: int) -> DataFrame:
    """(node, key, value, items, rank): per node, the most common key=value pairs."""
    counts = pairs.groupBy(NODE, KEY, VALUE).agg(F.count(F.lit(1)).alias(ITEMS))
    order = [F.col(ITEMS).desc(), F.col(KEY), F.col(VALUE)]
    return _top(counts, [NODE], order, top).select(NODE, KEY, VALUE, ITEMS, RANK)


def reasons(events: DataFrame, top: int) -> DataFrame:
    """(node, category, reason, n, rank): per node and category (:data:`CATEGORIES`),
    the most common reasons."""
    category = F.lit(None).cast(StringType())
    for kind, name in _CATEGORY_OF.items():
        category = F.when(F.col(KIND) == F.lit(kind), F.lit(name)).otherwise(category)
    given = events.where(F.col(KIND).isin(*_CATEGORY_OF) & F.col(REASON).isNotNull())
    counts = (
        given.select(NODE, category.alias(CATEGORY), REASON)
        .groupBy(NODE, CATEGORY, REASON)
        .agg(F.count(F.lit(1)).alias(COUNT))
    )
    order = [F.col(COUNT).desc(), F.col(REASON)]
    return _top(counts, [NODE, CATEGORY], order, top).select(NODE, CATEGORY, REASON, COUNT, RANK)
