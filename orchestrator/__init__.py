"""orchestrator: a multi-agent group-chat orchestrator for LLM agents.

A room hosted by a commander, workers assigned through tool calls, one bus, one stop path.
"""

__version__ = "0.1.0"
