"""The operations listener: Prometheus metrics, health checks and the dashboard.

An aiohttp application on the component's own event loop (``server.py``), fed
by the service's read methods and by the store's commit observer
(``metrics.py``). It reaches the service only through its public methods, never
storage or SQL (an import-linter contract), and changes state only through the
same admin calls the XEP-0050 commands make (``actions.py``).
"""
