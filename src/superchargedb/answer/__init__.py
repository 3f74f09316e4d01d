"""Cited answers: localize, synthesize, cite and verify (DECISIONS 32-39)."""
