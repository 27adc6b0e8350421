"""History: snapshots, rollback, diff, log, headline history, retention, gc, forgetting, export and import.

HEAD points at the newest snapshot of the line of work; `working` at the tree the Org
files were last ingested into. Each concern lives in its own module; this package names
the public parts of them all.
"""

from .checkout import DirtyWorkingFiles, RollbackReport, RollbackStopped, UnsnapshottableFiles, disk_files, rollback, \
    rollback_state, unsnapshotted_edits
from .copies import (Copy, NotACopy, SyncReport, check_out, conflicts, forget_copy, is_copy, settled, sync,
                     working_copies)
from .diff import Change, LogEntry, Version, change_counts, diff, headline_history, log, patch, patched, tree_of
from .forget import PURGES, Forgotten, Tombstone, forget, newest_purge, purges, rewrite_documents
from .fsck import FsckProblem, fsck, repair
from .gc import apply_retention, gc, reach
from .snapshots import DEFAULT_KEEP, HEAD, SNAPSHOTS, SUMMARIES, head, resolve, snapshot, snapshot_key, \
    snapshots, summary
from .transfer import DamagedExport, export_snapshot, import_snapshot

__all__ = [
    "DEFAULT_KEEP", "HEAD", "SNAPSHOTS", "SUMMARIES", "Change", "DamagedExport", "DirtyWorkingFiles", "Forgotten",
    "LogEntry", "RollbackReport", "RollbackStopped", "UnsnapshottableFiles", "Version", "apply_retention", "diff", "disk_files", "export_snapshot", "forget",
    "gc", "head", "headline_history", "import_snapshot", "log", "reach", "resolve", "rollback", "rollback_state", "snapshot",
    "snapshot_key", "snapshots", "summary", "tree_of", "unsnapshotted_edits",
    "FsckProblem", "fsck", "repair",
    "PURGES", "Tombstone", "newest_purge", "purges", "rewrite_documents",
    "change_counts", "patch", "patched",
    "Copy", "NotACopy", "SyncReport", "check_out", "conflicts", "forget_copy", "is_copy", "settled", "sync",
    "working_copies",
]
