"""The definitions DSL: defmemory and defwebhook forms, read as data, checked, written back.

Hy files are read with Hy's reader and interpreted form by form; nothing in them is executed.
The same forms are Hy macros (`cortex/dsl/macros.hy`) that register into a session `Registry`.

Names load from their modules on first use: `interpret` pulls in jwt and jsonpath for the webhook
schemes.
"""

from cortex.lazy import lazy_names

_NAMES = {
    ".convert": ("convert_brace_syntax",),
    ".definitions": ("OPERATIONS", "ROW_HEADERS", "SECTIONS", "Definition", "Definitions", "Encoding", "Fusion",
                     "HmacAlgorithm", "JwtSettings", "MemoryDefinition", "MemorySearchConfig", "Provider",
                     "ReviewPolicy", "SignatureScheme", "SourceLocation", "StoreKind", "WebhookDefinition",
                     "WebhookFilter", "definition_rows"),
    ".diagnostics": ("Diagnostic", "DslError", "format_diagnostics"),
    ".duration": ("DurationError", "format_duration", "parse_duration"),
    ".edit": ("add_definition", "remove_definition", "replace_definition"),
    ".literate": ("cortex_blocks",),
    ".loader": ("extract_from_org", "extract_memory_definitions", "extract_webhook_definitions",
                "load_definitions", "parse_definitions"),
    ".options": ("OptionError", "webhook_from_options"),
    ".registry": ("Registry", "current_registry"),
    ".render": ("render_definition",),
}

__all__, __getattr__, __dir__ = lazy_names(__name__, _NAMES)
