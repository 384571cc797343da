"""HTTP push delivery: a sink of the outbox that POSTs queue items to an endpoint.

A first slice of issue 22's push subscriptions: the delivery rules, not yet the
commands, configuration, storage of endpoints or the push-back window.
"""
