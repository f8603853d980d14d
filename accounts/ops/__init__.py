"""The back office for operator staff (``/ops/``): capacity, revenue, subsidy reconciliation, reviews, users'
balances and instances, price lists, subsidy programmes and the audit log.

Not an app of its own: its models belong to ``console`` (imported by ``accounts/models.py``). Every staff action is
a function in :mod:`backoffice.services` that checks the actor's role and writes one audit row through
:func:`accounts.ops.audit.record` in the same database transaction as the change.
"""
