"""What fits, exports and backups read from the store: filters, counts, scans, the ledger, snapshots."""
