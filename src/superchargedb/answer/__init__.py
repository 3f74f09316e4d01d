"""Cited answers: localize, synthesize, cite and verify (D-32 to D-39)."""
