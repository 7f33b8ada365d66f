"""The edits `doctor --fix` makes, one kind of fix each, planned on a script's tree (`fix.source`): keyword
arguments of the call that built an object, work done every step put under `if step % N == 0:`, a setting after
the imports, float64 made float32. Each returns the `Planned` edit, or raises `NoPatch` with the reason where the
edit cannot be made safely (a call built through `**kwargs`, several candidates the run did not tell apart, a
statement whose result the rest of the loop reads)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import libcst as cst

from trainspeed.fix.source import Change, NoPatch, Source, code, counter_of, names_in, walk


@dataclass(frozen=True)
class Planned:
    """A verdict's edit: the changes on the tree, the script's lines they touch, what it does in words, whether the
    script computes the same numbers after it, and what it changes in the training recipe (None: nothing)."""

    changes: list[Change]
    lines: tuple[int, int]
    said: str
    same_arithmetic: bool
    recipe: str | None = None


def _literal(value: Any) -> cst.BaseExpression:
    return cst.parse_expression(repr(value))


def enclosing(spans: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The first and the last line of `spans` (each a first and a last line)."""
    return min(a for a, _ in spans), max(b for _, b in spans)


# -- keyword arguments ------------------------------------------------------------------------------------------

def keywords(source: Source, call: cst.Call, values: dict[str, Any], signature: inspect.Signature | None,
             said: str, same: bool, recipe: str | None = None) -> Planned:
    """`values` as keyword arguments of `call` (an argument given already, by keyword or by position, replaced)."""
    if not _spread_safe(call, values):
        raise NoPatch(f"the call at line {source.lines(call)[0]} passes *args or **kwargs: the values may come from "
                      "there; set them where they are made")
    positional = [p.name for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)] if signature is not None else []
    if positional[:1] == ["self"]:
        positional = positional[1:]

    def make(node: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(node, cst.Call)
        args = list(node.args)
        left = dict(values)
        for i, arg in enumerate(args):
            name = arg.keyword.value if arg.keyword else (positional[i] if i < len(positional) else None)
            if name in left:
                args[i] = arg.with_changes(value=_literal(left.pop(name)))
        if not left:
            return node.with_changes(args=args)
        # the call's own separator (", " or a new line and its indent), the last argument's trailing comma kept last
        sep = next((a.comma for a in args[:-1] if isinstance(a.comma, cst.Comma)),
                   cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        trailing = args[-1].comma if args else cst.MaybeSentinel.DEFAULT
        if args:
            args[-1] = args[-1].with_changes(comma=sep)
        equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        args += [cst.Arg(_literal(value), keyword=cst.Name(name), equal=equal, comma=sep) for name, value in left.items()]
        args[-1] = args[-1].with_changes(comma=trailing)
        return node.with_changes(args=args)

    return Planned([Change(call, make)], source.lines(call), said, same, recipe)


def _spread_safe(call: cst.Call, values: dict[str, Any]) -> bool:
    """Whether the call's own arguments say where every value goes: no `*args` (positions unknown), and no `**`
    but a literal dict that names none of `values` (`**{CHECKPOINTING: flag}`: a key it shared would fail loudly)."""
    for arg in call.args:
        if arg.star == "*":
            return False
        if arg.star == "**":
            if not isinstance(arg.value, cst.Dict):
                return False
            keys = {e.key.evaluated_value for e in arg.value.elements
                    if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)}
            if keys & set(values) or any(isinstance(e, cst.StarredDictElement) for e in arg.value.elements):
                return False
    return True


def only(source: Source, found: list[cst.Call], what: str) -> cst.Call:
    """The one call of `found`, or NoPatch saying there were none or several."""
    if not found:
        raise NoPatch(f"{source.path} makes no {what} itself (a library or another file makes it)")
    if len(found) > 1:
        lines = ", ".join(str(source.lines(c)[0]) for c in found)
        raise NoPatch(f"{source.path} makes {len(found)} of {what} (lines {lines}) and the run did not tell which")
    return found[0]


def call_at(source: Source, calls: list[cst.Call], line: int | None) -> list[cst.Call]:
    """The calls that span `line` (all of them where the run named no line)."""
    if line is None:
        return calls
    at = [c for c in calls if source.lines(c)[0] <= line <= source.lines(c)[1]]
    return at or calls


# -- every N steps -------------------------------------------------------------------------------------------------

def _modulo_test(node: cst.CSTNode) -> tuple[cst.BinaryOperation, str] | None:
    """`if COUNTER % X == 0:`'s modulo and counter name, where `node` is such an if."""
    if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison):
        return None
    left, comps = node.test.left, node.test.comparisons
    if (isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Modulo) and isinstance(left.left, cst.Name)
            and len(comps) == 1 and isinstance(comps[0].operator, cst.Equal)
            and isinstance(comps[0].comparator, cst.Integer) and comps[0].comparator.value == "0"):
        return left, left.left.value
    return None


def _names(node: cst.CSTNode, stores: bool) -> set[str]:
    """The names a statement assigns anywhere in it (`stores`: assignments, loop targets, `with ... as`, `:=`;
    not an attribute's or an item's), or every name it holds."""
    if not stores:
        return names_in(node)
    targets: list[cst.CSTNode] = []
    for n in walk(node):
        if isinstance(n, cst.Assign):
            targets += [t.target for t in n.targets]
        elif isinstance(n, cst.AnnAssign | cst.AugAssign | cst.For | cst.NamedExpr):
            targets.append(n.target)
        elif isinstance(n, cst.AsName):
            targets.append(n.name)
    # `self.x = ...`, `d[k] = ...` bind no name
    return set().union(*(names_in(t) for t in targets
                         if not any(isinstance(part, cst.Attribute | cst.Subscript) for part in walk(t))))


def _block(source: Source, stmt: cst.BaseStatement) -> tuple[cst.IndentedBlock | cst.Module, int]:
    parent = source.parent(stmt)
    assert isinstance(parent, cst.IndentedBlock | cst.Module)
    return parent, next(i for i, s in enumerate(parent.body) if s is stmt)


def _uses_outside(source: Source, names: set[str], group: list[cst.BaseStatement]) -> set[str]:
    """Of `names`, those the function around the group reads outside it."""
    if not names:
        return set()
    inside = {id(n) for s in group for n in walk(s)}
    return {n.value for n in walk(source.scope(group[0]))
            if isinstance(n, cst.Name) and n.value in names and id(n) not in inside}


def _grown(source: Source, block: cst.IndentedBlock | cst.Module, first: int, last: int) -> tuple[int, int]:
    """The statements first..last with those before them that only feed them (an assignment whose names nothing
    else reads: the record a log line writes) and those after that only read what they made."""
    body = list(block.body)
    while first > 0:
        before = body[first - 1]
        made = _names(before, stores=True)
        if not isinstance(before, cst.SimpleStatementLine) or not made or "next" in _names(before, stores=False):
            break
        read = set().union(*(_names(s, stores=False) for s in body[first:last + 1]))
        if not made <= read or _uses_outside(source, made, body[first - 1:last + 1]):
            break
        first -= 1
    while last + 1 < len(body):
        made = set().union(*(_names(s, stores=True) for s in body[first:last + 1]))
        after = body[last + 1]
        if not made or not (_names(after, stores=False) & made) or _names(after, stores=True):
            break
        last += 1
    return first, last


def every_n_steps(source: Source, stmts: list[cst.BaseStatement], every: int, what: str,
                  recipe: str) -> Planned:
    """The statements (consecutive, in one block) run only when the loop's step counter is a multiple of `every`:
    an `if COUNTER % X == 0:` around them already gets X = every; otherwise one is added, with the statements that
    only feed them or only read them."""
    block, first = _block(source, stmts[0])
    _, last = _block(source, stmts[-1])
    owner = source.parent(block) if isinstance(block, cst.IndentedBlock) else None
    existing = _modulo_test(owner) if owner is not None else None
    if existing is not None and isinstance(owner, cst.If):
        modulo, counter = existing

        def interval(node: cst.CSTNode) -> cst.CSTNode:
            assert isinstance(node, cst.BinaryOperation)
            return node.with_changes(right=cst.Integer(str(every)))

        old = code(modulo.right)
        was = old if isinstance(modulo.right, cst.Integer) else f"`{old}`"
        return Planned([Change(modulo, interval)], source.lines(owner.test),
                       f"{what} every {every} steps instead of every {was} (`{counter} % {every} == 0`)",
                       same_arithmetic=True, recipe=recipe)
    loop = source.loop_of(stmts[0])
    if loop is None:
        raise NoPatch(f"line {source.lines(stmts[0])[0]} is not inside a loop of {source.path}")
    first, last = _grown(source, block, first, last)
    group = list(block.body[first:last + 1])
    made = set().union(*(_names(s, stores=True) for s in group))
    read_later = _uses_outside(source, made, group)
    if read_later:
        raise NoPatch(f"line {source.lines(group[0])[0]} sets {', '.join(sorted(read_later))}, which the script reads "
                      f"after it: run every {every} steps, it would change what the rest of the loop sees")
    counter, counted, how = counter_of(source, loop, stmts[0])

    def wrap(node: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(node, cst.IndentedBlock | cst.Module)
        body = list(node.body)
        inner = body[first:last + 1]
        head = inner[0]
        assert isinstance(head, cst.SimpleStatementLine | cst.BaseCompoundStatement)
        test = cst.parse_expression(f"{counter} % {every} == 0")
        guarded = cst.If(test, cst.IndentedBlock([head.with_changes(leading_lines=()), *inner[1:]]),
                         leading_lines=head.leading_lines)
        return node.with_changes(body=[*body[:first], guarded, *body[last + 1:]])

    again = "; it counts from 0 again on each pass of the loop around it" if source.loop_of(loop) is not None else ""
    said = f"{what} only when `{counter} % {every} == 0` ({how}{again})"
    return Planned([Change(block, wrap, index=first), *counted], enclosing([source.lines(s) for s in group]), said,
                   same_arithmetic=True, recipe=recipe)


def loop_statements(source: Source, calls: list[cst.Call]) -> list[list[cst.BaseStatement]]:
    """The statements in a loop that hold `calls`, consecutive ones together, each run a separate group."""
    stmts: list[cst.BaseStatement] = []
    for call in calls:
        stmt = source.statement(call)
        if source.loop_of(stmt) is not None and all(s is not stmt for s in stmts):
            stmts.append(stmt)
    groups: list[list[cst.BaseStatement]] = []
    for stmt in stmts:
        block, i = _block(source, stmt)
        if groups:
            prev_block, j = _block(source, groups[-1][-1])
            if prev_block is block and j == i - 1:
                groups[-1].append(stmt)
                continue
        groups.append([stmt])
    return groups


def called_in_loops(source: Source, matches: Callable[[cst.Call, str], bool]) -> list[cst.Call]:
    """The calls that `matches`, or (for those in a function of the script not called in a loop) the calls of that
    function made in a loop: `save_checkpoint(...)` called every step, with torch.save inside it."""
    direct = [c for c, name in source.calls() if matches(c, name)]
    found: list[cst.Call] = []
    for call in direct:
        if source.loop_of(source.statement(call)) is not None:
            found.append(call)
            continue
        fn = _function_of(source, call)
        if fn is not None:
            found += [c for c, name in source.calls() if name.rsplit(".", 1)[-1] == fn.name.value
                      and source.loop_of(source.statement(c)) is not None]
    return found


def _function_of(source: Source, node: cst.CSTNode) -> cst.FunctionDef | None:
    parent = source.parent(node)
    while parent is not None and not isinstance(parent, cst.FunctionDef):
        parent = source.parent(parent)
    return parent


# -- settings after the imports ------------------------------------------------------------------------------------

def after_imports(source: Source, lines: list[str], replaces: dict[str, str], said: str,
                  same: bool) -> Planned:
    """Each of `lines` (`torch.set_num_threads(1)`) put after the script's imports, or, where the script calls that
    function already (`replaces`: its name to the line), that call replaced by it."""
    changes: list[Change] = []
    touched: list[cst.CSTNode] = []
    missing = list(lines)
    for call, name in source.calls():
        line = replaces.get(name)
        if line is None or code(call) == line:
            continue  # a call that sets it as the fix would already is kept, and may be conditional: the line is added
        stmt = source.statement(call)
        new = cst.parse_expression(line)

        def swap(node: cst.CSTNode, new: cst.BaseExpression = new) -> cst.CSTNode:
            assert isinstance(node, cst.Call) and isinstance(new, cst.Call)
            return node.with_changes(args=new.args)

        changes.append(Change(call, swap))
        touched.append(stmt)
        if line in missing:
            missing.remove(line)
    body = list(source.module.body)
    at = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
                isinstance(s, cst.Import | cst.ImportFrom) or (isinstance(s, cst.Expr) and isinstance(
                    s.value, cst.SimpleString | cst.ConcatenatedString)) for s in stmt.body):
            at = i + 1
        elif not isinstance(stmt, cst.SimpleStatementLine) or at:
            break
    needs_torch = "torch" not in source.imports and any(line.startswith("torch.") for line in missing)
    added = (["import torch"] if needs_torch else []) + missing
    if added:
        def insert(node: cst.CSTNode) -> cst.CSTNode:
            assert isinstance(node, cst.Module)
            new_body = list(node.body)
            made = [cst.parse_statement(line + "\n") for line in added]
            first = 1 if needs_torch else 0  # `import torch` with the imports, the settings after a blank line
            if at and first < len(made):
                made[first] = made[first].with_changes(leading_lines=[cst.EmptyLine()])
            return node.with_changes(body=[*new_body[:at], *made, *new_body[at:]])

        changes.append(Change(source.module, insert, index=at))
        where = (source.lines(body[at - 1])[1] if at else 0) + 1  # the line after the imports
        span = [(where, where)]
    else:
        span = []
    return Planned(changes, enclosing(span + [source.lines(s) for s in touched]), said, same)
