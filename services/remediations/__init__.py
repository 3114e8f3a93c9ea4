"""Writes evaldesk can carry out: each is plan → dry-run preview → apply → undo, idempotent."""
