"""shoal/conf"""
