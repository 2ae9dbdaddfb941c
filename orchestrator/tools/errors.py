"""The one error a tool raises for the model to read (the base of the tools layer: everything imports it)."""


class ToolError(Exception):
    """A tool failed in a way the model should read and can act on."""
