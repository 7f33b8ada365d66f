"""A script's source as `doctor --fix` reads it: its concrete syntax tree (libcst, which keeps every comment and
space), the calls in it by the name they resolve to through the script's imports, the statement at a line, the
loop around a statement and that loop's step counter.

`Changes` are the edits planned on that tree, keyed by the node they replace: `rewrite` applies some of them in one
pass and returns the new source, so that each verdict's edit can be made alone (a `--try` arm) or with the others
(the patch)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider


class NoPatch(Exception):
    """A verdict's fix that cannot be made safely as an edit of the script: the reason, said as "no patch: ..."."""


@dataclass(frozen=True)
class Change:
    """One planned edit: the node it rewrites (by identity, in the tree read), what it makes of it (given the node
    as the pass has it, with any edit inside it already made), and where several rewrite one block, the highest
    statement index first so that the lower ones stay where they were."""

    node: cst.CSTNode
    make: Callable[[cst.CSTNode], cst.CSTNode]
    index: int = 0


class _Rewriter(cst.CSTTransformer):
    def __init__(self, changes: list[Change]) -> None:
        super().__init__()
        self._by_node: dict[int, list[Change]] = {}
        for c in changes:
            self._by_node.setdefault(id(c.node), []).append(c)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        node = updated_node
        for change in sorted(self._by_node.get(id(original_node), []), key=lambda c: -c.index):
            node = change.make(node)
        return node


class Source:
    """A script read for editing: its path, text and tree, with each node's lines and parent."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text
        try:
            self.wrapper = MetadataWrapper(cst.parse_module(text))
        except cst.ParserSyntaxError as e:
            raise NoPatch(f"{path} does not parse ({e.message})") from None
        self.module = self.wrapper.module
        self._positions = self.wrapper.resolve(PositionProvider)
        self._parents = self.wrapper.resolve(ParentNodeProvider)
        self.imports = _imported_names(self.module)

    def lines(self, node: cst.CSTNode) -> tuple[int, int]:
        """The first and the last line of `node` (1-based)."""
        where = self._positions[node]
        return where.start.line, where.end.line

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def qualified(self, node: cst.BaseExpression) -> str | None:
        """The dotted name an expression resolves to through the script's imports (`DataLoader` imported from
        torch.utils.data: "torch.utils.data.DataLoader"; `nn.LSTM` with `from torch import nn`: "torch.nn.LSTM")."""
        name = get_full_name_for_node(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.imports.get(head, head)
        return f"{full}.{rest}" if rest else full

    def calls(self) -> Iterator[tuple[cst.Call, str]]:
        """Every call in the script with the name it resolves to, in source order."""
        for node in walk(self.module):
            if isinstance(node, cst.Call):
                name = self.qualified(node.func)
                if name is not None:
                    yield node, name

    def statement(self, node: cst.CSTNode) -> cst.BaseStatement:
        """The statement (a line, or a compound statement) directly in a block that holds `node`."""
        while not isinstance(self.parent(node), cst.IndentedBlock | cst.Module):
            parent = self.parent(node)
            if parent is None:
                raise NoPatch("the call is not inside a statement of the script")
            node = parent
        assert isinstance(node, cst.BaseStatement)
        return node

    def statement_at(self, line: int) -> cst.BaseStatement:
        """The innermost statement at `line`: a simple line that spans it, else the compound statement it begins."""
        best: cst.BaseStatement | None = None
        for node in walk(self.module):
            if isinstance(node, cst.BaseStatement) and isinstance(self.parent(node), cst.IndentedBlock | cst.Module):
                first, last = self.lines(node)
                simple = isinstance(node, cst.SimpleStatementLine)
                if first <= line <= last and (simple or first == line):
                    best = node  # the walk goes outside in: the last found is the innermost
        if best is None:
            raise NoPatch(f"line {line} of {self.path} holds no statement")
        return best

    def loop_of(self, node: cst.CSTNode) -> cst.For | cst.While | None:
        """The innermost loop around `node` inside its function (None: not in a loop)."""
        parent = self.parent(node)
        while parent is not None and not isinstance(parent, cst.FunctionDef | cst.Lambda | cst.ClassDef):
            if isinstance(parent, cst.For | cst.While) and node is not parent.orelse:
                return parent
            node, parent = parent, self.parent(parent)
        return None

    def scope(self, node: cst.CSTNode) -> cst.CSTNode:
        """The function (or the module) around `node`."""
        while not isinstance(node, cst.FunctionDef | cst.Module):
            parent = self.parent(node)
            if parent is None:
                break
            node = parent
        return node

    def scope_names(self, node: cst.CSTNode) -> set[str]:
        """Every name used in the function (or the module) around `node`."""
        return names_in(self.scope(node))

    def rewrite(self, changes: list[Change]) -> str:
        """The source with `changes` made, in one pass over the tree."""
        return self.module.visit(_Rewriter(changes)).code


def code(node: cst.CSTNode) -> str:
    """The source text of a node."""
    return cst.Module([]).code_for_node(node)


def names_in(node: cst.CSTNode) -> set[str]:
    """Every name `node` holds."""
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node under it, outside in, in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _imported_names(module: cst.Module) -> dict[str, str]:
    """The names the script's imports bind, to the dotted names they stand for (`import torch.nn as nn`: nn ->
    torch.nn; `from torch.utils.data import DataLoader`: DataLoader -> torch.utils.data.DataLoader)."""
    names: dict[str, str] = {}
    for node in walk(module):
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = get_full_name_for_node(alias.name) or ""
                bound = get_full_name_for_node(alias.asname.name) if alias.asname else full.split(".")[0]
                if bound:
                    names[bound] = full if alias.asname else bound
        elif isinstance(node, cst.ImportFrom) and not node.relative and not isinstance(node.names, cst.ImportStar):
            base = get_full_name_for_node(node.module) if node.module else None
            for alias in node.names:
                member = get_full_name_for_node(alias.name)
                bound = get_full_name_for_node(alias.asname.name) if alias.asname else member
                if base and member and bound:
                    names[bound] = f"{base}.{member}"
    return names


def counter_of(source: Source, loop: cst.For | cst.While, near: cst.CSTNode) -> tuple[str, list[Change], str]:
    """The step counter of `loop` for `if COUNTER % N == 0:`: its own variable (`for step in range(...)`, `for i,
    batch in enumerate(...)`), else `enumerate` added around what it iterates; the changes that adds, and the words
    that say which."""
    if isinstance(loop, cst.While):
        raise NoPatch(f"the loop at line {source.lines(loop)[0]} is a while loop with no counter of its own")
    target, it = loop.target, loop.iter
    called = source.qualified(it.func) if isinstance(it, cst.Call) else None
    if isinstance(target, cst.Name) and called == "range":
        return target.value, [], f"the loop's own counter `{target.value}`"
    if (called == "enumerate" and isinstance(target, cst.Tuple) and target.elements
            and isinstance(target.elements[0].value, cst.Name)):
        name = target.elements[0].value.value
        return name, [], f"the loop's own counter `{name}`"
    used = source.scope_names(near)
    name = next(n for n in ("step", "batch_index", "step_index", "step_") if n not in used)

    def enumerated(node: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(node, cst.For)
        inner = node.target.with_changes(lpar=[], rpar=[]) if isinstance(node.target, cst.Tuple) else node.target
        pair = cst.Tuple([cst.Element(cst.Name(name)),
                          cst.Element(cst.Tuple(list(inner.elements), lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                                      if isinstance(inner, cst.Tuple) else inner)], lpar=[], rpar=[])
        return node.with_changes(target=pair, iter=cst.Call(cst.Name("enumerate"), [cst.Arg(node.iter)]))

    return name, [Change(loop, enumerated)], f"a counter `{name}` from enumerate() added to the loop"
