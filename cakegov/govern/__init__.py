"""Governance: proposals of rulebook changes, their reports, and the audit ledger."""
