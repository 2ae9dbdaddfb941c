"""External agents as room members: the Agent Client Protocol's client side, spoken to an agent over its stdio,
and the reverse bridge through which such an agent reaches the room's skills, connectors and knowledge base.
"""
