"""Money: prices, plans and subsidies, the one quote function, the ledger and its one posting function, wallets,
metering, arrears, top-ups, vouchers, statements and fapiao."""
