"""`python -m codegen`: the `acp-codegen` command."""

from .cli import entry

entry()
