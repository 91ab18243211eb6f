"""safe_text."""
