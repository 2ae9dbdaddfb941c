"""The composition root: what a program's rooms share (store, models, workspace), built once, and the blocking
facade for scripts and notebooks. `from orchestrator import Runtime, run` is how a program reaches it.
"""
