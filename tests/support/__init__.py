"""Test support code shared by tests and bench scripts (not part of the celkeeper package)."""
