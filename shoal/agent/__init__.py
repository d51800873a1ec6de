"""shoal/agent"""
