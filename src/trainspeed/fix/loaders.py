"""A DataLoader that takes each batch whole: `DataLoader(data, batch_size=None, sampler=BatchSampler(RandomSampler(
data), B, drop_last=False))` in place of `DataLoader(data, batch_size=B, shuffle=True)`, for a TensorDataset (one
index op per tensor a batch, not one `data[i]` a row). The same batches in the same order: RandomSampler draws the
permutation DataLoader's own sampler would."""

from __future__ import annotations

import libcst as cst

from trainspeed.fix.edits import Planned
from trainspeed.fix.source import Change, NoPatch, Source, code

_NAMES = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler")


def _given(call: cst.Call) -> dict[str, cst.Arg]:
    given: dict[str, cst.Arg] = {}
    for i, arg in enumerate(call.args):
        name = arg.keyword.value if arg.keyword else (_NAMES[i] if i < len(_NAMES) else None)
        if name is None:
            raise NoPatch("the DataLoader's arguments after the fifth are positional: name them first")
        given[name] = arg
    return given


def batched_loader(source: Source, call: cst.Call) -> Planned:
    if any(a.star for a in call.args):
        raise NoPatch(f"the DataLoader at line {source.lines(call)[0]} is made through *args or **kwargs")
    given = _given(call)
    if "batch_sampler" in given or "dataset" not in given or (call.args[0].keyword is not None
                                                               and call.args[0].keyword.value != "dataset"):
        raise NoPatch(f"the DataLoader at line {source.lines(call)[0]} has a batch_sampler, or its dataset is not its "
                      "first argument")
    dataset = given["dataset"].value
    size = code(given["batch_size"].value) if "batch_size" in given else "1"
    drop_last = code(given["drop_last"].value) if "drop_last" in given else "False"  # by keyword: not in _NAMES

    def ref(cls: str) -> str:
        """The sampler class as the script can name it: its own import, else through `torch`."""
        bound = next((b for b, full in source.imports.items() if full == f"torch.utils.data.{cls}"), None)
        if bound is not None:
            return bound
        if source.imports.get("torch") != "torch":
            raise NoPatch(f"the script binds neither {cls} nor `torch` to reach torch.utils.data's samplers by")
        return f"torch.utils.data.{cls}"

    first: cst.BaseExpression
    if isinstance(dataset, cst.Name):
        name, first = dataset.value, dataset
    else:  # the dataset made in the call: named there (`data := TensorDataset(x, y)`), used twice
        name = next(n for n in ("dataset", "data_set", "loader_data") if n not in source.scope_names(call))
        first = cst.NamedExpr(cst.Name(name), dataset, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if "sampler" in given:
        inner = code(given["sampler"].value)
    elif "shuffle" in given and code(given["shuffle"].value) != "False":
        generator = next((a for a in call.args if a.keyword and a.keyword.value == "generator"), None)
        inner = f"{ref('RandomSampler')}({name}" + (f", generator={code(generator.value)})" if generator else ")")
        if code(given["shuffle"].value) != "True":
            raise NoPatch(f"shuffle= at line {source.lines(call)[0]} is an expression: the sampler would depend on it")
    else:
        inner = f"{ref('SequentialSampler')}({name})"
    sampler = cst.parse_expression(f"{ref('BatchSampler')}({inner}, {size}, drop_last={drop_last})")
    dropped = {"batch_size", "shuffle", "sampler", "drop_last"}

    def make(node: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(node, cst.Call)
        args = [node.args[0].with_changes(value=first)]
        for i, arg in enumerate(node.args[1:], start=1):
            keyword = arg.keyword.value if arg.keyword else _NAMES[i]
            if keyword not in dropped:
                args.append(arg if arg.keyword else arg.with_changes(keyword=cst.Name(keyword), equal=_EQ))
        added = [cst.Arg(cst.Name("None"), keyword=cst.Name("batch_size"), equal=_EQ),
                 cst.Arg(sampler, keyword=cst.Name("sampler"), equal=_EQ)]
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        out = [args[0].with_changes(comma=comma), *added, *args[1:]]
        # each but the last keeps its own comma (or gets ", "); the last ends as the call's last argument did
        return node.with_changes(args=[*(a if isinstance(a.comma, cst.Comma) else a.with_changes(comma=comma)
                                         for a in out[:-1]), out[-1].with_changes(comma=node.args[-1].comma)])

    return Planned([Change(call, make)], source.lines(call),
                   f"the DataLoader takes each batch of {size} whole (BatchSampler), one index op a tensor",
                   same_arithmetic=True)


_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
