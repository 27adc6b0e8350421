"""Claude Code's hook contract: what a hook reads on stdin, the transcript it names, what a SessionStart hook prints,
and the settings block that installs the hooks.

Every hook gets one JSON object on stdin with `session_id`, `transcript_path` (the conversation as JSON lines),
`cwd` and `hook_event_name`; SessionStart adds `source` (startup, resume, clear, compact), PreCompact `trigger`
(manual, auto) and `custom_instructions`, SessionEnd `reason` (clear, logout, prompt_input_exit, other). A
SessionStart hook that exits 0 adds `hookSpecificOutput.additionalContext` of the JSON it prints to the model's
context. Exit 2 blocks (a compaction, for PreCompact): cortex never uses it; a mistake exits 1, which Claude Code
shows and goes on.

A transcript line is an object with `type` ("user", "assistant", "summary", ...), `timestamp`, and for the first
two a `message` whose `content` is text or a list of blocks ("text", "tool_use", "tool_result", "thinking");
`isSidechain` marks a subagent's lines, `isMeta` lines the user never typed. What a person typed is one turn; what
Claude answered to it, across its tool calls, is the next, with the tools it used.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from ..errors import UserError
from ..memory.conversation import Utterance
from ..memory.conversation.orglog import read_session
from ..memory.layout import log_path
from ..reads import read_bounded
from ..words import quoted

RUNTIME = "claude-code"
EVENTS = ("SessionStart", "PreCompact", "SessionEnd")
RECORDED = ("PreCompact", "SessionEnd")  # the events that log the session
USER, ASSISTANT = "User", "Claude"
MAX_INPUT = 1 << 20  # characters of a hook's stdin
MAX_TRANSCRIPT = 256 << 20  # bytes of a transcript
TITLE_LIMIT = 60  # characters of a session's title taken from its first prompt


def event_named(name: str) -> str:
    """The event as Claude Code spells it (`session-start`, `sessionstart` and `SessionStart` alike)."""
    wanted = name.replace("-", "").replace("_", "").casefold()
    found = next((event for event in EVENTS if event.casefold() == wanted), None)
    if found is None:
        raise UserError(f"hook event {quoted(name)}: not one cortex handles; use {', '.join(EVENTS)}")
    return found


def read_payload(text: str, event: str) -> dict:
    """The hook's input, checked: a JSON object of `event` with the fields cortex reads; a one-line UserError
    naming what is wrong."""
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"hook input on stdin, line {exc.lineno} column {exc.colno}: not JSON ({exc.msg}): "
                        f"{quoted(text.strip())}") from None
    if not isinstance(payload, dict):
        raise UserError(f"hook input on stdin: a JSON object is expected, not {type(payload).__name__}")
    named = payload.get("hook_event_name", event)
    if named != event:
        raise UserError(f"hook input on stdin: hook_event_name is {quoted(named)}, but the hook was installed for "
                        f"{event}")
    for key in ("session_id", "transcript_path") if event in RECORDED else ():
        if not isinstance(payload.get(key), str) or not payload[key].strip():
            raise UserError(f"hook input on stdin: no {key}, which Claude Code's {event} input has (as text)")
    if not isinstance(payload.get("cwd", ""), str):
        raise UserError("hook input on stdin: cwd must be text")
    return payload


def session_start_output(briefing: str) -> str:
    """What a SessionStart hook prints so that Claude Code adds `briefing` to the model's context."""
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": briefing}})


def transcript(path: str) -> tuple[str | None, list[Utterance]]:
    """A transcript's title (its summary line, else its first prompt cut short; None without either) and its
    turns: what the user typed and what Claude answered, in order."""
    data = read_bounded(Path(path).expanduser(), MAX_TRANSCRIPT, "a transcript")
    summary, said, answer = None, [], None
    for line in data.decode("utf-8", errors="replace").splitlines():
        entry = _line(line)
        if entry is None or entry.get("isSidechain") or entry.get("isMeta"):
            continue
        kind, at = entry.get("type"), entry.get("timestamp")
        if kind == "summary" and isinstance(entry.get("summary"), str):
            summary = summary or entry["summary"]
        elif kind == "user" and (text := "\n\n".join(_texts(entry))):
            said += _answered(answer)
            said.append(Utterance(USER, text, _moment(at)))
            answer = None
        elif kind == "assistant":
            answer = answer or {"texts": [], "tools": [], "at": _moment(at)}
            answer["texts"] += _texts(entry)
            answer["tools"] += [tool for tool in _tools(entry) if tool not in answer["tools"]]
    said += _answered(answer)
    first = next((u.text for u in said if u.speaker == USER), None)
    title = summary or (first and " ".join(first.split())[:TITLE_LIMIT])
    return title, said


def record(cx, agent: str, payload: dict, *, now: datetime | None = None) -> tuple[int, str | None]:
    """Log the turns of the payload's transcript that the agent's daily logs do not hold yet, as its session
    (`record_session`, the conversation layout): a transcript only grows, so the first turns of the session the logs
    hold are the transcript's first. How many were logged, and where the first went (None: nothing new)."""
    session = payload["session_id"]
    title, said = transcript(payload["transcript_path"])
    logged = _logged(cx, agent, session, said)
    new = said[logged:]
    if not new:
        return 0, None
    return len(new), cx.memory.record_session(agent, new, title, session=session, now=now)


def installed_hooks(settings: dict, commands: dict[str, str], where: str) -> dict:
    """`settings` (a Claude Code settings.json, read) with a command hook per event of `commands`: the cortex hook
    an earlier install left is updated in place, the user's other hooks kept; UserError when the file's `hooks` is
    not as Claude Code reads it."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UserError(f"{where}: \"hooks\" is not an object; nothing written")
    for event, command in commands.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise UserError(f"{where}: \"hooks\".{event} is not a list; nothing written")
        ours = [hook for group in groups if isinstance(group, dict) and isinstance(group.get("hooks"), list)
                for hook in group["hooks"] if isinstance(hook, dict) and _is_ours(hook.get("command"), event)]
        for hook in ours:
            hook.update(type="command", command=command)
        if not ours:
            groups.append({"hooks": [{"type": "command", "command": command}]})
    return settings


def installed_server(config: dict, servers: dict, where: str) -> dict:
    """A project's `.mcp.json` (read) with `servers` under `mcpServers`, replacing those of the same name."""
    existing = config.setdefault("mcpServers", {})
    if not isinstance(existing, dict):
        raise UserError(f"{where}: \"mcpServers\" is not an object; nothing written")
    existing.update(servers)
    return config


def read_json_object(path: Path) -> dict:
    """A JSON file holding an object, or {} when there is none; UserError (nothing written) when it is another
    thing."""
    if not path.exists():
        return {}
    text = read_bounded(path, MAX_INPUT, "a settings file").decode("utf-8", errors="replace")
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg}); nothing written") from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: holds a JSON {type(value).__name__}, not an object; nothing written")
    return value


def _is_ours(command, event: str) -> bool:
    """Whether a hook's command runs `cortex hook claude-code EVENT`."""
    try:
        words = shlex.split(command) if isinstance(command, str) else []
    except ValueError:
        return False
    return any(words[i:i + 3] == ["hook", RUNTIME, event] for i in range(len(words)))


def _logged(cx, agent: str, session: str, said: list[Utterance]) -> int:
    """How many turns of `session` the agent's daily logs hold, from the day of its first turn on."""
    first = min((u.at.date() for u in said if u.at is not None), default=None)
    days = [day for day in cx.memory.daily_logs(agent) if first is None or day >= first]
    return sum(len(read_session(cx.show(log_path(agent, day)), session, day)) for day in days)


def _line(line: str) -> dict | None:
    """One transcript line as an object; None for a blank line or one Claude Code was still writing (the last)."""
    if not line.strip():
        return None
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        return None
    return entry if isinstance(entry, dict) else None


def _blocks(entry: dict) -> list:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def _texts(entry: dict) -> list[str]:
    return [block["text"] for block in _blocks(entry)
            if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip()]


def _tools(entry: dict) -> Iterator[str]:
    for block in _blocks(entry):
        if block.get("type") == "tool_use" and isinstance(block.get("name"), str) and block["name"].strip():
            yield block["name"].strip()


def _answered(answer: dict | None) -> list[Utterance]:
    """Claude's answer as one turn: its texts, or the tools it used when it said nothing."""
    if answer is None or not (answer["texts"] or answer["tools"]):
        return []
    text = "\n\n".join(answer["texts"]) or f"(used {', '.join(answer['tools'])})"
    return [Utterance(ASSISTANT, text, answer["at"], tuple(answer["tools"]))]


def _moment(timestamp) -> datetime | None:
    """A transcript timestamp ("2026-11-27T14:05:12.345Z") as an aware datetime; None when it is not one."""
    try:
        return datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else None
    except ValueError:
        return None
