"""Coding-agent hooks: the contracts of the runtimes that run cortex at their sessions' start and end."""
