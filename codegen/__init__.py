"""acp-codegen: generate typed Python bindings for the Agent Client Protocol."""

__version__ = "0.1.0"
