"""The back office at /ops/: the operators' pages and the operations behind them (prices, programmes, vouchers,
reviews, the hub's moderation, capacity, invoices, users). The top of the stack: no app imports it; what the apps
share of it (staff roles, the audit log, the page guard) is the console's staff kernel, ``accounts.ops``."""
