"""shoal/rpc"""
