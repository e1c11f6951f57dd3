"""Extract the JSON examples from the ACP protocol documentation into test fixtures.

Reads every ``*.mdx`` file in a docs directory (default: ``../shared/acp-docs/v1``
relative to the repository root), finds every fenced code block whose language
is ``json`` (an info string after the language, e.g. ```` ```json Request ```` or
```` ```json highlight={7-9} ````, is allowed) and parses it.  ``//`` line
comments outside strings are stripped before parsing; anything that still does
not parse is recorded in ``unparseable.json`` together with the reason.

Outputs (in ``tests/fixtures/doc_examples/`` by default):

* ``examples.json``    -- every parsed example, classified as request,
  notification, response or fragment;
* ``unparseable.json`` -- blocks that could not be parsed;
* ``README.md``        -- attribution, how to re-run, counts per kind.

Usage::

    python tools/extract_doc_examples.py [DOCS_DIR] [--out-dir DIR]

Standard library only; output is deterministic.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DOCS_DIR = REPO_ROOT / ".." / "shared" / "acp-docs" / "v1"
DEFAULT_OUT_DIR = REPO_ROOT / "tests" / "fixtures" / "doc_examples"
DEFAULT_SOURCE_PREFIX = "acp-docs/v1"
CONTEXT_CHARS = 300

FENCE_OPEN_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
HEADING_RE = re.compile(r"^#{1,6}[ \t]+(?P<text>.*?)[ \t#]*$")
TAG_RE = re.compile(r"<[^<>]*>")
WS_RE = re.compile(r"\s+")
KINDS = ("request", "notification", "response", "fragment")


@dataclass
class CodeBlock:
    """A JSON fenced code block and the markdown around it."""

    index: int  # 1-based index among the json blocks of its file
    line: int  # 1-based line of the opening fence
    text: str  # block content, de-indented by the fence's indentation
    heading: str | None  # nearest preceding markdown heading
    context: str  # up to CONTEXT_CHARS characters of prose before the block


def _clean_heading(raw: str) -> str:
    """Drop inline JSX/HTML tags (e.g. ``<Icon .../>``) and collapse whitespace."""
    return WS_RE.sub(" ", TAG_RE.sub("", raw)).strip()


def _dedent(line: str, indent: str) -> str:
    return line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t")


def find_json_blocks(text: str) -> list[CodeBlock]:
    """Return every fenced code block whose language is ``json``.

    All fences are tracked (not only json ones) so that ``#`` lines inside code
    blocks are never mistaken for headings and code never counts as prose.
    YAML front matter at the top of the file is skipped.
    """
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                start = i + 1
                break

    blocks: list[CodeBlock] = []
    heading: str | None = None
    prose: list[str] = []  # prose lines seen so far (outside code blocks)
    i = start
    while i < len(lines):
        line = lines[i]
        m = FENCE_OPEN_RE.match(line)
        if m is None:
            h = HEADING_RE.match(line)
            if h is not None:
                heading = _clean_heading(h.group("text"))
            prose.append(line)
            i += 1
            continue

        indent, fence, info = (
            m.group("indent"),
            m.group("fence"),
            m.group("info").strip(),
        )
        open_line = i + 1
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and stripped.strip(fence[0]) == "":
                break
            body.append(_dedent(lines[i], indent))
            i += 1
        i += 1  # skip the closing fence (or run past EOF for an unclosed block)

        lang = info.split(maxsplit=1)[0].lower() if info else ""
        if lang == "json":
            context = WS_RE.sub(" ", "\n".join(prose)).strip()[-CONTEXT_CHARS:].strip()
            blocks.append(
                CodeBlock(
                    index=len(blocks) + 1,
                    line=open_line,
                    text="\n".join(body),
                    heading=heading,
                    context=context,
                )
            )
    return blocks


def strip_line_comments(text: str) -> str:
    """Remove ``//`` comments that are outside JSON string literals."""
    out: list[str] = []
    in_string = False
    escaped = False
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_block(text: str) -> tuple[Any, str | None]:
    """Parse a block; return ``(value, None)`` or ``(None, reason)``."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(strip_line_comments(text)), None
    except json.JSONDecodeError as exc:
        bad_line = strip_line_comments(text).splitlines()[exc.lineno - 1 : exc.lineno]
        snippet = bad_line[0].strip() if bad_line else ""
        return None, f"{exc.msg} at line {exc.lineno} column {exc.colno}: {snippet!r}"


def classify(value: Any) -> str:
    if not isinstance(value, dict) or "jsonrpc" not in value:
        return "fragment"
    if "method" in value:
        return "request" if "id" in value else "notification"
    if "id" in value and ("result" in value or "error" in value):
        return "response"
    return "fragment"


def _same_id(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def extract_file(path: Path, source_prefix: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    examples: list[dict[str, Any]] = []
    unparseable: list[dict[str, Any]] = []
    source = f"{source_prefix}/{path.name}"
    requests: list[dict[str, Any]] = []  # parsed requests of this file, in order
    for block in find_json_blocks(path.read_text(encoding="utf-8")):
        ex_id = f"{path.stem}-{block.index}"
        value, reason = parse_block(block.text)
        if reason is not None:
            unparseable.append(
                {
                    "id": ex_id,
                    "source": source,
                    "line": block.line,
                    "reason": reason,
                    "text": block.text,
                }
            )
            continue
        kind = classify(value)
        method: str | None = None
        if kind in ("request", "notification"):
            method = value["method"]
        elif kind == "response":
            for req in reversed(requests):
                if _same_id(req["id"], value["id"]):
                    method = req["method"]
                    break
        entry: dict[str, Any] = {
            "id": ex_id,
            "source": source,
            "line": block.line,
            "kind": kind,
            "method": method,
            "heading": block.heading,
        }
        if kind == "fragment":
            entry["context"] = block.context
            entry["type"] = None
        entry["json"] = value
        examples.append(entry)
        if kind == "request":
            requests.append(value)
    return examples, unparseable


def write_json(path: Path, data: Any) -> None:
    path.write_text(
        json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )


def render_readme(examples: list[dict[str, Any]], unparseable: list[dict[str, Any]], n_files: int) -> str:
    counts = Counter(e["kind"] for e in examples)
    total = len(examples) + len(unparseable)
    rows = "\n".join(f"| {kind} | {counts.get(kind, 0)} |" for kind in KINDS)
    return f"""# ACP documentation examples

These fixtures are the JSON examples from the
[Agent Client Protocol](https://github.com/agentclientprotocol/agent-client-protocol)
protocol documentation (v1 `.mdx` pages), which is licensed under the
Apache License 2.0; see `schema/LICENSE` in this repository for the license text.
They were extracted mechanically by `tools/extract_doc_examples.py`; do not
edit them by hand.

- `examples.json` -- every example that parses as JSON (after stripping `//`
  line comments), with its source file, line of the opening fence, kind
  (`request`, `notification`, `response`, `fragment`), JSON-RPC method (for
  responses: the method of the nearest preceding request with the same id in
  the same file, or `null`), nearest heading, and the parsed value. Fragments
  also carry `context` (the prose before the block) and `type` (`null`; to be
  mapped to a schema type by hand).
- `unparseable.json` -- blocks that are not valid JSON even after stripping
  comments, with the reason and the raw text.

## Re-running

From the repository root, with the docs checked out next to it:

```sh
python tools/extract_doc_examples.py              # default: ../shared/acp-docs/v1
python tools/extract_doc_examples.py path/to/docs/v1
```

## Counts

{total} json blocks in {n_files} `.mdx` files.

| kind | count |
|------|-------|
{rows}
| unparseable | {len(unparseable)} |
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("docs_dir", nargs="?", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument(
        "--source-prefix",
        default=DEFAULT_SOURCE_PREFIX,
        help=f"prefix for the 'source' field (default: {DEFAULT_SOURCE_PREFIX})",
    )
    args = parser.parse_args(argv)
    docs_dir: Path = args.docs_dir
    out_dir: Path = args.out_dir

    files = sorted(docs_dir.glob("*.mdx"))
    if not files:
        print(f"error: no .mdx files in {docs_dir}", file=sys.stderr)
        return 1

    examples: list[dict[str, Any]] = []
    unparseable: list[dict[str, Any]] = []
    for path in files:
        ex, bad = extract_file(path, args.source_prefix)
        examples.extend(ex)
        unparseable.extend(bad)

    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "examples.json", examples)
    write_json(out_dir / "unparseable.json", unparseable)
    (out_dir / "README.md").write_text(render_readme(examples, unparseable, len(files)), encoding="utf-8")

    counts = Counter(e["kind"] for e in examples)
    summary = ", ".join(f"{k}={counts.get(k, 0)}" for k in KINDS)
    print(
        f"{len(examples) + len(unparseable)} json blocks in {len(files)} files: "
        f"{summary}, unparseable={len(unparseable)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
