"""Code generation for controls: the table / conditional graph as structured if/else code
(a branch ends at the node's immediate post-dominator), table lookups per match kind,
actions inlined, action profiles and selectors, exit."""

from __future__ import annotations

from switch.p4json import exprs as ex
from switch.p4json import program as pm
from switch.p4json.errors import Unsupported
from switch.p4json.gen_base import NODE_BUDGET, Writer
from switch.p4json.gen_primitives import PrimitiveGen


class ControlGen(PrimitiveGen):
    def control(self, w: Writer, pipeline: pm.Pipeline, stage: str) -> None:
        """The pipeline as structured code inside ``while True: ... break`` (exit = break)."""
        successors: dict[str, list[str | None]] = {}
        for t in pipeline.tables.values():
            successors[t.name] = self._table_successors(t)
        for c in pipeline.conditionals.values():
            successors[c.name] = [c.true_next, c.false_next]
        ipdom = _post_dominators(pipeline.init, successors)
        budget = [NODE_BUDGET * max(1, len(successors))]
        w("while True:")
        w.indent()
        self._region(w, pipeline, pipeline.init, None, ipdom, successors, budget, stage)
        w("break")
        w.dedent()

    def _table_successors(self, t: pm.Table) -> list[str | None]:
        if t.hit_miss:
            return [t.next_tables.get("__HIT__"), t.next_tables.get("__MISS__")]
        out: list[str | None] = []
        for aid in t.action_ids:
            out.append(t.next_tables.get(self.prog.actions[aid].name))
        if t.default_action is None or t.kind != "simple":
            out.append(t.base_default_next)
        return out

    def _region(self, w: Writer, pipeline: pm.Pipeline, node: str | None, stop: str | None,
                ipdom: dict[str, str | None], succ: dict[str, list[str | None]],
                budget: list[int], stage: str) -> None:
        while node is not None and node != stop:
            budget[0] -= 1
            if budget[0] < 0:
                raise Unsupported("a control flow graph that is not structured", pipeline.name)
            join = ipdom[node]
            if node in pipeline.conditionals:
                c = pipeline.conditionals[node]
                cx = ex.ExprCompiler(self.names, where=f"condition {c.name}")
                cond = cx.boolean(c.expression)
                branches = [(cond, c.true_next), ("", c.false_next)]
            else:
                t = pipeline.tables[node]
                branches = self.table(w, t, stage)
            targets = {b for _, b in branches}
            if len(targets) == 1:
                node = next(iter(targets))
                if node is None:
                    return
                continue
            first = True
            for cond, target in branches:
                header = "else:" if cond == "" else f"{'if' if first else 'elif'} {cond}:"

                def branch(target: str | None = target, join: str | None = join) -> None:
                    self._region(w, pipeline, target, join, ipdom, succ, budget, stage)

                w.block(header, branch)
                first = False
            node = join

    def table(self, w: Writer, t: pm.Table, stage: str) -> list[tuple[str, str | None]]:
        """Apply table ``t``; returns the branches (condition, next node) that follow it."""
        g = f"T{t.id}_{t.pipeline[0]}"
        self.g.tables[g] = t.name
        w(f"# table {t.name}")
        exits = any(aid in self.exit_actions for aid in t.action_ids)
        const_default = (
            not t.keys and t.kind == "simple" and t.default_action is not None
            and t.default_const and t.default_entry_const
        )
        if const_default:
            assert t.default_action is not None
            action = self.prog.actions[t.default_action]
            for i, v in enumerate(t.default_args):
                w(f"p{i} = {v}")
            self.action_body(w, action, stage)
            if exits:
                w("if ex: break")
            if t.hit_miss:
                return [("", t.next_tables.get("__MISS__"))]
            return [("", t.next_tables.get(action.name))]
        keys = []
        cx = ex.ExprCompiler(self.names, where=f"table {t.name}")
        for k in t.keys:
            h, f = k.target
            if f == "$valid$":
                code = self.names.valid(h)
            else:
                code = cx.field_value(h, f)
                if self.prog.field_spec(h, f).signed:
                    code = f"({code} & {(1 << k.width) - 1})"
            if k.mask is not None:
                code = f"({code} & {k.mask})"
            keys.append(code)
        mode = ("ternary" if any(k.match_type in ("ternary", "range") for k in t.keys)
                else "lpm" if any(k.match_type == "lpm" for k in t.keys) else "exact")
        if not keys:
            w("e = None")
        elif mode == "exact":
            key = keys[0] if len(keys) == 1 else f"({', '.join(keys)},)"
            w(f"e = {g}X.get({key})")
        elif mode == "lpm" and len(keys) == 1:  # TableState.lookup_lpm, inlined
            width = t.keys[0].width
            self.g.lpm_widths.add(width)
            kv = self.fresh("k")
            w(f"{kv} = {keys[0]}")
            w("e = None")
            w(f"for _pl in {g}L:")
            w(f"    e = {g}B[_pl].get({kv} & _PM{width}[_pl])")
            w("    if e is not None: break")
        elif mode == "lpm":
            key = f"({', '.join(keys)},)"
            w(f"e = {g}.lookup_lpm({key})")
        else:
            w(f"e = {g}.lookup_ternary(({', '.join(keys)},))")
        w("if e is None:")
        w("    hit = 0")
        w(f"    a, pa = {g}.default or _NOACT")
        w("else:")
        w.indent()
        w("hit = 1")
        if t.with_counters:
            w("ec = e.counter; ec[0] += 1; ec[1] += ilen")
        if t.kind == "simple":
            w("a = e.action; pa = e.args")
        else:
            self.indirect_resolve(w, t, g)
        if t.direct_meter is not None:
            spec = self.prog.meters[t.direct_meter]
            if spec.result is not None:
                tmp = self.fresh("m")
                w(f"{tmp} = e.meter.execute(now_us * 1e-6, 1 if {spec.kind == 'packets'} else ilen) if e.meter is not None else 0")
                self.assign(w, {"type": "field", "value": list(spec.result)}, tmp, cx, None)
        w.dedent()
        first = True
        for aid in t.action_ids:
            action = self.prog.actions[aid]

            def body(action: pm.Action = action) -> None:
                if action.params:
                    names = ", ".join(f"p{i}" for i in range(len(action.params)))
                    w(f"{names}, = pa")
                self.action_body(w, action, stage)

            w.block(f"{'if' if first else 'elif'} a == {aid}:", body)
            first = False
        if exits:
            w("if ex: break")
        if t.hit_miss:
            return [("hit", t.next_tables.get("__HIT__")), ("", t.next_tables.get("__MISS__"))]
        by_next: dict[str | None, list[int]] = {}
        for aid in t.action_ids:
            by_next.setdefault(t.next_tables.get(self.prog.actions[aid].name), []).append(aid)
        always_acts = t.kind == "simple" and t.default_action is not None
        groups = list(by_next.items())
        if not always_acts:
            groups.append((t.base_default_next, []))
        if len({target for target, _ in groups}) == 1:
            return [("", groups[0][0])]
        branches: list[tuple[str, str | None]] = []
        for target, aids in groups[:-1]:
            branches.append((" or ".join(f"a == {aid}" for aid in aids), target))
        branches.append(("", groups[-1][0]))
        return branches

    def indirect_resolve(self, w: Writer, t: pm.Table, g: str) -> None:
        """Member -> its action; group -> the selector hash picks among the live members."""
        assert t.profile is not None
        profile = self.prog.profile(t.profile)
        pg = f"P{profile.id}_{t.pipeline[0]}"
        self.g.profiles[pg] = profile.name
        w("if e.member is not None:")
        w(f"    a, pa = {pg}.members.get(e.member) or _NOACT")
        w("else:")
        w.indent()
        w(f"ch = {pg}.choices.get(e.group)")
        w("if ch:")
        w.indent()
        if profile.selector is None:
            w("a, pa = ch[0]")
        else:
            inputs = [{"type": "field", "value": list(v)} for v in profile.selector.inputs]
            buf = self.calc_bytes(w, inputs, f"selector {profile.name}")
            w(f"a, pa = ch[{self.hash_call(profile.selector.algo, buf, True)} % len(ch)]")
        w.dedent()
        w("else:")
        w("    a, pa = _NOACT")
        w.dedent()


def _post_dominators(init: str | None, succ: dict[str, list[str | None]]) -> dict[str, str | None]:
    """Immediate post-dominator of every node of a DAG (None = the pipeline's end)."""
    order: list[str] = []
    seen: set[str] = set()
    onpath: set[str] = set()

    def visit(n: str) -> None:
        stack: list[tuple[str, int]] = [(n, 0)]
        onpath.add(n)
        seen.add(n)
        while stack:
            node, i = stack[-1]
            nexts = [s for s in succ.get(node, []) if s is not None]
            if i < len(nexts):
                stack[-1] = (node, i + 1)
                s = nexts[i]
                if s in onpath:
                    raise Unsupported("a control flow graph with a loop", node)
                if s not in seen:
                    seen.add(s)
                    onpath.add(s)
                    stack.append((s, 0))
            else:
                stack.pop()
                onpath.discard(node)
                order.append(node)

    for n in ([init] if init else []) + sorted(succ):
        if n is not None and n not in seen:
            visit(n)
    pdom: dict[str | None, frozenset[str | None]] = {None: frozenset([None])}
    for n in order:  # successors come first in this order
        sets = [pdom[s] for s in succ.get(n, [])]
        common = frozenset.intersection(*sets) if sets else frozenset([None])
        pdom[n] = common | {n}
    ipdom: dict[str, str | None] = {}
    for n in order:
        others = pdom[n] - {n}
        best: str | None = None
        size = -1
        for m in others:
            if len(pdom[m]) > size:
                best, size = m, len(pdom[m])
        ipdom[n] = best
    return ipdom
