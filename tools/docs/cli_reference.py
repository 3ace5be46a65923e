"""The command-line reference of the site (docs/cli/index.md), generated from the click commands at every build.

click describes each command itself (``Command.to_info_dict``: its help, arguments, options, types and defaults), so
the page is rebuilt from the parser whenever the site is, and cannot fall behind it. mkdocs_hooks.py puts the text
where docs/cli/index.md has the marker ``<!-- cli-reference -->``.
"""

from __future__ import annotations

import html
import inspect
from collections.abc import Iterator

import click

MARKER = "<!-- cli-reference -->"


def _text(value: str) -> str:
    """Help text as Markdown: HTML-escaped (``<name>`` is text), click's ``\\b`` no-rewrap markers dropped."""
    lines = [line for line in inspect.cleandoc(value).splitlines() if line.strip() != "\b"]
    return html.escape("\n".join(lines), quote=False)


def _cell(value: str) -> str:
    """Text for one cell of a Markdown table."""
    return _text(" ".join(value.split())).replace("|", "\\|")


def _type(info: dict) -> str:
    kind = info["type"]
    if kind["param_type"] == "Choice":
        return " \\| ".join(f"`{choice}`" for choice in kind["choices"])
    return kind["name"]


def _default(info: dict) -> str:
    default = info.get("default")
    if info.get("is_flag"):
        return "off" if not default else "on"
    if default is None or default == () or info.get("required"):
        return "required" if info.get("required") else "—"
    return f"`{default}`"


def _commands(group: click.Command, ctx: click.Context) -> Iterator[tuple[click.Command, click.Context]]:
    """The command and every sub-command below it, depth first, in alphabetical order."""
    yield group, ctx
    if isinstance(group, click.Group):
        for name in sorted(group.list_commands(ctx)):
            command = group.get_command(ctx, name)
            if command is not None and not command.hidden:
                yield from _commands(command, click.Context(command, info_name=name, parent=ctx))


def command_markdown(command: click.Command, ctx: click.Context, level: int) -> str:
    """One command's section: heading, help, usage, arguments, options (name, type, default, meaning)."""
    info = command.to_info_dict(ctx)
    path = ctx.command_path
    parts = [f"{'#' * level} {path}", ""]
    if info.get("help"):
        parts += [_text(info["help"]), ""]
    pieces = " ".join(command.collect_usage_pieces(ctx))
    parts += ["```", f"{path} {pieces}".rstrip(), "```", ""]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if arguments:
        parts += ["| argument | type | required |", "|---|---|---|"]
        for param in arguments:
            p = param.to_info_dict()
            parts.append(f"| `{param.human_readable_name}` | {_type(p)} | {'yes' if p['required'] else 'no'} |")
        parts.append("")
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    options += [p for p in [command.get_help_option(ctx)] if p is not None and p not in options]
    if options:
        parts += ["| option | type | default | meaning |", "|---|---|---|---|"]
        for param in options:
            p = param.to_info_dict()
            record = param.get_help_record(ctx)
            names = record[0] if record else ", ".join(param.opts)
            help_text = param.help or ""
            if p.get("multiple"):
                help_text += " (repeatable)" if "repeatable" not in help_text else ""
            parts.append(f"| `{_cell(names)}` | {_type(p)} | {_default(p)} | {_cell(help_text)} |".replace("`` ", "` "))
        parts.append("")
    if isinstance(command, click.Group):
        subcommands = sorted(command.list_commands(ctx))
        parts += ["Commands: " + ", ".join(f"`{name}`" for name in subcommands) + ".", ""]
    return "\n".join(parts)


def cli_reference(level: int = 3) -> str:
    """The reference of the ``attnlab`` command and every sub-command, as Markdown (headings from ``level``)."""
    from attnlab.cli import main

    root = click.Context(main, info_name="attnlab")
    sections = []
    for command, ctx in _commands(main, root):
        depth = len(ctx.command_path.split()) - 1
        sections.append(command_markdown(command, ctx, level + max(depth - 1, 0)))  # a group's commands below it
    return "\n".join(sections)
