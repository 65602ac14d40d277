"""Tests of the framework integrations, one folder per framework (skipped without it)."""
