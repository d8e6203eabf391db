"""Helpers and job scripts for the runtime's end-to-end tests (tests/python/test_run*.py)."""
