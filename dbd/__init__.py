"""shoal-dbd: accounting (issue 5)."""
