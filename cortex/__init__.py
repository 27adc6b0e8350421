"""cortex: a content-addressed, versioned memory store for AI agents, over Org-mode files."""

__version__ = "0.1.0"
