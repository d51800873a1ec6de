"""shoal/auth"""
