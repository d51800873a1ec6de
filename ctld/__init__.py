"""shoal-ctld: the controller."""
