"""IT044: one conversation for every client: a web route or a chat bot's message handler that generates keeps the
chat history in a module-level name and rewrites it on each request, so every user continues the same conversation
(doctor-real-5 p19, a FastAPI DialoGPT chat; doctor-real-10 a09, its Flask twin; doctor-real-12 a05, a Telegram
bot: all labelled so)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import IGNORECASE, callee, dotted, lazy_compile, method
from infertune.doctor.rules.handlers import generation_in, helper_generation
from infertune.doctor.rules.serving import routes
from infertune.doctor.script import Script

# what a conversation's state is called: its turns, its token ids, its memory
CONVERSATION = lazy_compile(r"hist|conv|messages|dialog|chat|context|memory|past|turns|tokens", IGNORECASE)
GROWS = {"append", "extend", "insert", "add_message", "add_user_message", "add_ai_message"}


# a chat bot's handlers, which every user's messages reach: Telegram's CommandHandler/MessageHandler(..., fn) and
# add_handler, aiogram's and telebot's message_handler decorators, discord's @bot.event / @bot.command, pyrogram's
# on_message, slack_bolt's @app.message
BOT_DECORATORS = {"event", "command", "message_handler", "message", "on_message", "hybrid_command", "slash_command"}
BOT_REGISTRARS = {"CommandHandler", "MessageHandler", "add_handler", "register_message_handler"}
BOT_LIBRARIES = {
    "telegram",
    "aiogram",
    "telebot",
    "discord",
    "nextcord",
    "disnake",
    "interactions",
    "pyrogram",
    "slack_bolt",
}


def bot_handlers(s: Script) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    if not s.imports(*BOT_LIBRARIES):  # (`@app.command()` is also typer's and click's: a CLI's one user)
        return []
    names = {a.id for c in s.calls if callee(c) in BOT_REGISTRARS for a in c.args if isinstance(a, ast.Name)}
    return [
        fn
        for fns in s.functions.values()
        for fn in fns
        if fn.name in names
        or any(
            dotted(d.func if isinstance(d, ast.Call) else d).rsplit(".", 1)[-1] in BOT_DECORATORS
            for d in fn.decorator_list
        )
    ]


def _module_names(s: Script) -> set[str]:
    """Names the module binds at its own level (outside every function and class)."""
    out: set[str] = set()
    for n in s.tree.body:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def _rewritten(fn: ast.FunctionDef | ast.AsyncFunctionDef, module: set[str]) -> list[tuple[ast.AST, str]]:
    """(where, name) for each module-level conversation this function rebinds (`global h; h = ...`) or grows
    (`h.append(...)`; not a parameter of the same name)."""
    declared = {name for n in ast.walk(fn) if isinstance(n, ast.Global) for name in n.names}
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    out: list[tuple[ast.AST, str]] = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in declared:
            out.append((n, n.id))
        elif (
            isinstance(n, ast.Call)
            and method(n) in GROWS
            and isinstance(f := n.func, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id in module
            and f.value.id not in params
        ):
            out.append((n, f.value.id))
    return [(w, name) for w, name in out if CONVERSATION.search(name) and name in module]


def _from_generation(s: Script, where: ast.AST) -> bool:
    """The rebinding stores what generate returned (`history_ids = model.generate(...)`, `tokens = out`)."""
    stmt = s.statement(where)
    value = getattr(stmt, "value", None)
    return value is not None and any(
        isinstance(o, ast.Call) and o in s.generates for o in [value, *s.origins(value)] if isinstance(o, ast.AST)
    )


def shared_conversation(s: Script):
    module = _module_names(s)
    if not module:
        return
    for fn in dict.fromkeys([*routes(s), *bot_handlers(s)]):
        if not (generation_in(s, fn) or helper_generation(s, fn)):
            continue
        found = _rewritten(fn, module)
        if not found:
            continue
        # one finding per route, at the state generate's output goes to (the conversation's ids) if any
        where, _ = next(((w, n) for w, n in found if _from_generation(s, w)), found[0])
        names = ", ".join(f"`{n}`" for n in dict.fromkeys(n for _, n in found))
        yield (
            where,
            f"{names}: one module-level conversation that every request rewrites: all clients share it, so each "
            "user continues the others' chat; keep the history per client (sent with the request, or stored by a "
            "session id)",
        )
