"""User and admin commands; each imports only what it needs."""
