"""auto."""
