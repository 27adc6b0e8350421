"""The public surface of `cortex.api`, pinned: what users' code, notebooks, the CLI and the REPL call. A change to
it is deliberate, and shows in this file's diff (a parameter renamed breaks every caller that names it)."""

import inspect

import cortex.api as cx

MODULE = {
    "CONFIG", "Change", "Cortex", "DEFINITIONS_FILE", "DirtyWorkingFiles", "Headline", "IngestReport", "LITERATE",
    "LogEntry", "Node", "NotFound", "Oid", "RollbackReport", "Snapshot", "Tree", "UserError", "Version",
    "convert_brace_file", "default_store_path", "open", "store_name",
    # the features' names, loaded on first use
    "Definitions", "DslError", "DurationError", "Encoding", "HmacAlgorithm", "JwtSettings", "MemoryDefinition",
    "Provider", "ROW_HEADERS", "Registry", "SignatureScheme", "WebhookDefinition", "WebhookFilter", "definition_rows",
    "load_definitions", "parse_duration", "ExtractiveSummarizer", "Identity", "TrajectoryDigest", "Turn", "Utterance",
    "memory_path", "RetentionPolicy", "resolve_secret",
}

# a session's operations: name -> its parameters after self (None: a property)
SESSION = {
    "accept_proposal": ("name", "only"),
    "add_webhook": ("definition",),
    "agenda": ("span", "start", "as_of", "today"),
    "backlinks": ("node", "as_of"),
    "broken_links": ("as_of",),
    "brief": ("agent", "budget", "now"),
    "chain": ("target", "as_of"),
    "build_search": ("progress", "budget"),
    "build_search_in_background": ("notify",),
    "checkout": ("folder",),
    "close": (),
    "conflicts": ("folder",),
    "conversations": ("strategy", "driver", "summarizer", "bus", "**limits"),
    "copies": (),
    "definitions": (),
    "definitions_path": None,
    "diff": ("a", "b", "within"),
    "erase": ("rewrite", "what"),
    "export": ("ref", "path"),
    "file_ids": ("ref",),
    "files": (),
    "find": ("todo", "tag", "prop", "text", "ref", "valid_at", "all"),
    "forget_copy": ("copy_id",),
    "fsck": ("repair",),
    "gc": ("keep_last", "max_age", "compact"),
    "head_oid": None,
    "headlines": ("ref",),
    "history": ("org_id",),
    "import_": ("path",),
    "ingest": ("path", "progress", "written", "digests", "then"),
    "inspect_memory": ("agent", "valid_at", "all"),
    "links": ("node", "as_of"),
    "load_dsl": ("path",),
    "log": ("limit",),
    "lookup": ("org_id", "ref"),
    "memory": None,
    "object_count": None,
    "org_files": (),
    "outline": ("path",),
    "patch": ("items",),
    "proposal": ("name",),
    "proposal_changes": ("name",),
    "proposal_patch": ("name",),
    "proposals": ("status", "agent"),
    "prune_webhook_logs": ("older_than",),
    "purges": (),
    "query": ("q", "as_of", "match", "within", "valid_at", "all"),
    "registry": None,
    "reject_proposal": ("name", "reason"),
    "remove_webhook": ("name",),
    "resolve": ("ref",),
    "read_state": (),
    "rollback": ("ref", "keep", "force"),
    "root": None,
    "search": ("query", "limit", "agent", "type", "source", "path", "tag", "todo", "speaker", "since", "until",
               "context", "as_of", "fusion", "vector_weight", "keyword_weight", "budget", "progress", "today",
               "within", "valid_at", "all"),
    "search_status": (),
    "show": ("target", "as_of"),
    "snapshot": ("message", "empty"),
    "snapshot_count": None,
    "spare": ("open_files",),
    "snapshots": (),
    "state": ("ref", "within"),
    "stats": (),
    "store_folder": (),
    "sync": ("folder",),
    "table_entry_count": None,
    "todo_keywords": ("path",),
    "unsaved": (),
    "webhook": ("name",),
    "webhook_logs": ("name", "tail"),
    "webhook_redeliver": ("delivery_id",),
    "webhook_server": ("host", "port", "max_body", "keep_logs"),
    "webhook_service": ("webhooks", "**options"),
    "webhook_test": ("name", "payload", "event", "url", "tamper", "stale", "private_key"),
    "webhooks": (),
    "working": (),
    "working_oid": None,
}
SESSION_ATTRIBUTES = {"location", "review", "store", "workspace"}


def parameters(function) -> tuple[str, ...]:
    marks = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return tuple(marks.get(p.kind, "") + p.name for p in list(inspect.signature(function).parameters.values())[1:])


def test_the_module_exports_its_public_names_and_each_one_loads():
    assert set(cx.__all__) == MODULE and len(cx.__all__) == len(MODULE)
    for name in MODULE:
        assert getattr(cx, name) is not None
    assert set(cx.__dir__()) >= MODULE


def test_a_session_offers_these_operations_with_these_parameters():
    found = {}
    for name, value in vars(cx.Cortex).items():
        if not name.startswith("_"):
            found[name] = None if isinstance(value, property) or hasattr(value, "attrname") else parameters(value)
    assert found == SESSION


def test_a_session_holds_its_store_and_its_workspace():
    with cx.open(in_memory=True, folder=False) as c:
        assert {name for name in vars(c) if not name.startswith("_")} == SESSION_ATTRIBUTES
        assert c.workspace.store is c.store and c.root is None
