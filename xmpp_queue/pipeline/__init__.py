"""The Spark (PySpark) pipeline: bulk enqueue over XMPP, queue-history reports,
ledger export to Parquet. See docs/pipeline.md.

Nothing is imported here: ``xmpp_queue.cli`` loads ``pipeline.cli`` (which imports
PySpark only when a job runs), so the service works without the ``[spark]`` extra.
"""
