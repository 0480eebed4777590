"""Click's help conventions for the kit's typer command lines (orchestrate.py, python -m bench).

typer 0.29 prints a parameter's Python type in --help (`<list[str]>`, `<bool>`, `<path>`) and
an argument as `{dirs}...`. Click's conventions, which the kit follows instead:

    option values   TEXT, PATH, INTEGER, FLOAT; a choice as [a|b|c]; a flag shows none
    arguments       in capitals, DIRS... for several, [PLATFORMS]... when optional

`style(app)` gives every command and group of a typer app these classes; they restyle each
parameter once, when its help is first asked for (typer builds the parameters itself, so
the classes are swapped in place: the parameters' behaviour, parsing included, is typer's).

`fail` is the one way either command line stops on an error: one line, then the exit status.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, get_args

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:
    from bench.core.errors import KitError

_NAMES = {str: "TEXT", int: "INTEGER", float: "FLOAT", bool: "BOOLEAN", Path: "PATH"}


def type_name(param: Any) -> str:
    """Click's name for what PARAM takes: TEXT, PATH, INTEGER, FLOAT, or [a | b | c] for a choice
    (click writes [a|b|c]; the spaces let a narrow help column wrap between choices, never inside one)."""
    desc = param.type_descriptor
    if desc.is_choice and desc.choices:
        return "[" + " | ".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    ann = desc.annotation
    if desc.is_list and get_args(ann):
        ann = get_args(ann)[0]
    if desc.is_path:
        return "PATH"
    return _NAMES.get(ann, "TEXT")


class KitOption(TyperOption):
    """An option whose help shows TEXT / PATH / INTEGER / [a|b] (nothing for a flag)."""

    def display_type(self, ctx: Any) -> str:
        return "" if self.is_flag else type_name(self)

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.metavar is not None:
            return self.metavar
        return None if self.is_flag or self.count else type_name(self)


class KitArgument(TyperArgument):
    """An argument named in capitals (DIRS...), its type as click names it."""

    @property
    def display_name_raw(self) -> str:
        return self.metavar if self.metavar is not None else str(self.name).upper()

    def display_type(self, ctx: Any) -> str:
        return type_name(self)

    def display_type_rich(self, ctx: Any) -> str | None:
        return type_name(self)

    def _usage_display_name(self) -> str:
        name = self.display_name_raw + ("..." if self.nargs != 1 else "")
        return name if self.required else f"[{name}]"


def _restyle(params: list[Any]) -> list[Any]:
    for p in params:
        if type(p) is TyperOption:
            p.__class__ = KitOption
        elif type(p) is TyperArgument:
            p.__class__ = KitArgument
    return params


class KitCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _restyle(super().get_params(ctx))


class KitGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _restyle(super().get_params(ctx))


def style(app: typer.Typer) -> typer.Typer:
    """Give every command and group of APP (sub-apps included) click's help conventions."""
    if not app.info.cls or app.info.cls is TyperGroup:
        app.info.cls = KitGroup
    for c in app.registered_commands:
        if not c.cls or c.cls is TyperCommand:  # typer's own class: a command that asked for another keeps it
            c.cls = KitCommand
    for g in app.registered_groups:
        if not g.cls or g.cls is TyperGroup:
            g.cls = KitGroup
        if g.typer_instance is not None:
            style(g.typer_instance)
    return app


__all__ = ["KitArgument", "KitCommand", "KitGroup", "KitOption", "style", "type_name"]


def fail(err: KitError | str, code: int | None = None) -> NoReturn:
    """One `error:` line on stderr, then exit CODE; without one, a KitError's status
    (bench.core.errors.host_exit_code: 2 a usage error, 130 an interrupt, else 1) and 1 for a
    plain message (the work failed). An interrupt's line (130) says so itself: no `error:`. The
    message may quote a result dir, a spec, a job dir or a dataset: control and bidi characters
    show as escapes (bench.core.text.term)."""
    from bench.core.errors import KitError, host_exit_code
    from bench.core.text import term

    status = code if code is not None else host_exit_code(err) if isinstance(err, KitError) else 1
    typer.echo(f"{'error: ' if status != 130 else ''}{term(err)}", err=True)
    raise typer.Exit(status)
