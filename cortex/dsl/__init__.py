"""The definitions DSL: defmemory and defwebhook forms, read as data, checked, written back.

Hy files are read with Hy's reader and interpreted form by form; nothing in them is executed.
The same forms are Hy macros (`cortex/dsl/macros.hy`) that register into a session `Registry`.
"""

from cortex.dsl.convert import convert_brace_syntax
from cortex.dsl.definitions import (
    Definition,
    Definitions,
    Encoding,
    Fusion,
    HmacAlgorithm,
    JwtSettings,
    MemoryDefinition,
    MemorySearchConfig,
    Provider,
    SignatureScheme,
    SourceLocation,
    StoreKind,
    WebhookDefinition,
    WebhookFilter,
)
from cortex.dsl.diagnostics import Diagnostic, DslError, format_diagnostics
from cortex.dsl.duration import DurationError, format_duration, parse_duration
from cortex.dsl.edit import add_definition, remove_definition, replace_definition
from cortex.dsl.literate import MARKER
from cortex.dsl.loader import (
    extract_from_org,
    extract_memory_definitions,
    extract_webhook_definitions,
    load_definitions,
    parse_definitions,
)
from cortex.dsl.registry import Registry, current_registry
from cortex.dsl.render import ROW_HEADERS, definition_rows, render_definition

__all__ = [
    "MARKER", "ROW_HEADERS", "Definition", "Definitions", "Diagnostic", "DslError", "DurationError",
    "Encoding", "Fusion", "HmacAlgorithm", "JwtSettings", "MemoryDefinition", "MemorySearchConfig", "Provider",
    "Registry", "SignatureScheme", "SourceLocation", "StoreKind", "WebhookDefinition", "WebhookFilter",
    "add_definition", "convert_brace_syntax", "current_registry", "definition_rows", "extract_from_org",
    "extract_memory_definitions", "extract_webhook_definitions", "format_diagnostics", "format_duration",
    "load_definitions", "parse_definitions", "parse_duration", "remove_definition", "render_definition",
    "replace_definition",
]
