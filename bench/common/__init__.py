"""What the benchmarks share; one concept per module, imported explicitly (nothing re-exported)."""
