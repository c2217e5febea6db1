"""Code generation for header instances: wire images, extraction, validity (unions), whole
header assignment and swaps (stacks), setValid/setInvalid with the packet length."""

from __future__ import annotations

from collections.abc import Callable

from switch.p4json import exprs as ex
from switch.p4json import program as pm
from switch.p4json.errors import ConfigError
from switch.p4json.gen_base import GenBase, Writer, bind


class HeaderGen(GenBase):
    def image(self, h: str) -> str:
        """Expression of the current wire bytes of header ``h``."""
        header = self.prog.header(h)
        t = header.type
        n = self.names
        if t.vl_index is not None:
            acc = "0"
            for i, f in enumerate(t.fields):
                var = n.field_at(h, i)
                if f.vl:
                    w = n.vlw(h)
                    acc = f"(({acc}) << {w} | ({var} & ((1 << {w}) - 1)))"
                else:
                    acc = f"(({acc}) << {f.width} | ({var} & {(1 << f.width) - 1}))"
            return f"({acc}).to_bytes({self.header_bytes(h)}, 'big')"
        nbytes = t.fixed_bits // 8
        touched = n.fields_of(h)
        if not touched:
            return n.base(h)
        offsets = t.bit_offsets()
        total = t.fixed_bits
        keep = (1 << total) - 1
        parts = []
        for i in touched:
            f = t.fields[i]
            shift = total - offsets[i] - f.width
            keep &= ~(((1 << f.width) - 1) << shift)
            parts.append(f"({n.field_at(h, i)} & {(1 << f.width) - 1}) << {shift}")
        if keep:
            parts.insert(0, f"(int.from_bytes({n.base(h)}, 'big') & {keep})")
        rebuilt = f"({' | '.join(parts)}).to_bytes({nbytes}, 'big')"
        return f"({rebuilt} if {n.dirty(h)} else {n.base(h)})"

    def load_fields(self, w: Writer, h: str, src: str) -> None:
        """Set the touched field variables of fixed-size header ``h`` from bytes ``src``."""
        t = self.prog.header(h).type
        offsets = t.bit_offsets()
        for i in self.names.fields_of(h):
            f = t.fields[i]
            w(f"{self.names.field_at(h, i)} = {self._field_from(src, offsets[i], f)}")

    def _field_from(self, src: str, offset: int, f: pm.FieldSpec) -> str:
        width = f.width
        first, last = offset // 8, (offset + width + 7) // 8
        shift = last * 8 - (offset + width)
        if last - first == 1:
            raw = f"{src}[{first}]"
        elif last - first == 2:
            raw = f"({src}[{first}] << 8 | {src}[{first + 1}])"
        else:
            raw = f"int.from_bytes({src}[{first}:{last}], 'big')"
        if shift:
            raw = f"({raw} >> {shift})"
        if shift or offset % 8:
            raw = f"({raw} & {(1 << width) - 1})"
        if f.signed:
            half = 1 << (width - 1)
            raw = f"(({raw} ^ {half}) - {half})"
        return raw

    def set_valid_flag(self, w: Writer, h: str, value: int) -> None:
        """Validity of ``h``; a member of a union made valid invalidates the others."""
        header = self.prog.header(h)
        w(f"{self.names.valid(h)} = {value}")
        if value and header.union is not None:
            for _, other in self.prog.unions[header.union].members:
                if other != h:
                    w(f"{self.names.valid(other)} = 0")

    def reset_fields(self, w: Writer, h: str) -> None:
        header = self.prog.header(h)
        for i in self.names.fields_of(h):
            w(f"{self.names.field_at(h, i)} = 0")
        if not header.metadata:
            if header.type.vl_index is None:
                w(f"{self.names.base(h)} = {self.zero_name(h)}")
            w(f"{self.names.dirty(h)} = 0")

    def zero_name(self, h: str) -> str:
        t = self.prog.header(h).type
        name = f"_Z{t.fixed_bits // 8}"
        self.g.consts[name] = bytes(t.fixed_bits // 8)
        return name

    def header_state(self, h: str) -> list[str]:
        """Every variable holding header ``h``'s state (for swaps and PHV transfer)."""
        header = self.prog.header(h)
        n = self.names
        out = [n.valid(h)] if not header.metadata else []
        if not header.metadata:
            if header.type.vl_index is None:
                out.append(n.base(h))
            else:
                out.append(n.vlw(h))
            out.append(n.dirty(h))
        out += [n.field_at(h, i) for i in n.fields_of(h)]
        return out

    def assign_header(self, w: Writer, dst: str, src: str) -> None:
        """BMv2 core assign_header: src invalid -> dst invalid; else copy every field."""
        pd, ps = self.prog.header(dst), self.prog.header(src)
        if pd.type.name != ps.type.name:
            raise ConfigError(f"assign_header {dst} <- {src}: different types")
        n = self.names

        def copy() -> None:
            if pd.metadata or ps.metadata:
                for i in n.fields_of(dst):
                    w(f"{n.field_at(dst, i)} = {self._field_or_image(src, i)}")
                if not pd.metadata:
                    w(f"{n.dirty(dst)} = 1")
                self.set_valid_flag(w, dst, 1)
                return
            if pd.type.vl_index is not None:
                for i in range(len(pd.type.fields)):
                    w(f"{n.field_at(dst, i)} = {n.field_at(src, i)}")
                w(f"{n.vlw(dst)} = {n.vlw(src)}")
                w(f"{n.dirty(dst)} = 1")
            else:
                img = self.fresh("img")
                w(f"{img} = {self.image(src)}")
                w(f"{n.base(dst)} = {img}")
                w(f"{n.dirty(dst)} = 0")
                for i in n.fields_of(dst):
                    if n.is_touched(src, i):
                        w(f"{n.field_at(dst, i)} = {n.field_at(src, i)}")
                    else:
                        f = pd.type.fields[i]
                        w(f"{n.field_at(dst, i)} = {self._field_from(img, pd.type.bit_offsets()[i], f)}")
            self.set_valid_flag(w, dst, 1)

        if ps.metadata:
            copy()
            return
        w.block(f"if {n.valid(src)}:", copy)
        w.block("else:", lambda: self.set_valid_flag(w, dst, 0))

    def _field_or_image(self, h: str, i: int) -> str:
        if self.names.is_touched(h, i):
            return self.names.field_at(h, i)
        header = self.prog.header(h)
        if header.metadata:
            return "0"
        return self._field_from(self.image(h), header.type.bit_offsets()[i], header.type.fields[i])

    def swap_headers(self, w: Writer, a: str, b: str) -> None:
        sa, sb = self.header_state(a), self.header_state(b)
        if len(sa) != len(sb):
            raise ConfigError(f"cannot swap {a} and {b}: different layouts")
        if sa:
            w(f"{', '.join(sa)} = {', '.join(sb)}")

    def on_header(self, w: Writer, ref: ex.HeaderRef, fn: Callable[[str], None]) -> None:
        if ref.cond is not None:
            assert ref.then is not None and ref.other is not None
            then, other = ref.then, ref.other
            w.block(f"if {ref.cond}:", lambda: self.on_header(w, then, fn))
            w.block("else:", lambda: self.on_header(w, other, fn))
            return
        if ref.static is not None:
            fn(ref.static)
            return
        assert ref.index is not None
        idx = self.fresh("i")
        w(f"{idx} = {ref.index}")
        first = True
        for i, h in ref.elements(self.prog):
            w.block(f"{'if' if first else 'elif'} {idx} == {i}:", bind(fn, h))
            first = False

    def add_header(self, w: Writer, h: str, fast: bool) -> None:
        """add_header: make valid, zero every field, count its bytes in the packet length."""
        header = self.prog.header(h)
        if header.metadata:
            return
        if fast:
            self.set_valid_flag(w, h, 1)
            return

        def body() -> None:
            self.reset_fields(w, h)
            self.set_valid_flag(w, h, 1)
            w(f"plen += {self.header_bytes(h)}")

        w.block(f"if not {self.names.valid(h)}:", body)

    def remove_header(self, w: Writer, h: str) -> None:
        header = self.prog.header(h)
        if header.metadata:
            return

        def body() -> None:
            w(f"plen -= {self.header_bytes(h)}")
            self.set_valid_flag(w, h, 0)

        w.block(f"if {self.names.valid(h)}:", body)

    def extract(self, w: Writer, h: str, vl_bits: str | None, too_short: int,
                cx: ex.ExprCompiler) -> None:
        header = self.prog.header(h)
        t = header.type
        n = self.names
        if header.metadata:
            raise ConfigError(f"{cx.where}: extract into metadata {h}")
        if t.vl_index is None:
            if vl_bits is not None:
                raise ConfigError(f"{cx.where}: extract_VL into fixed-size header {h}")
            size = t.fixed_bits // 8
            w(f"if flen - pos < {size}: perr = {too_short}; break")
            base = n.base(h)
            w(f"{base} = frame[pos:pos + {size}]")
            self.load_fields(w, h, base)
            w(f"{n.dirty(h)} = 0")
            self.set_valid_flag(w, h, 1)
            w(f"pos += {size}")
            return
        if vl_bits is None:
            raise ConfigError(f"{cx.where}: extract of variable-length header {h} without a length")
        invalid = self.err("ParserInvalidArgument")
        w(f"if {vl_bits} % 8 or {vl_bits} < 0: perr = {invalid}; break")
        nbytes = self.fresh("sz")
        w(f"{nbytes} = {t.fixed_bits // 8} + {vl_bits} // 8")
        w(f"if flen - pos < {nbytes}: perr = {too_short}; break")
        w(f"if {nbytes} > {t.max_bytes}: perr = {self.err('HeaderTooShort')}; break")
        x = self.fresh("x")
        w(f"{x} = int.from_bytes(frame[pos:pos + {nbytes}], 'big')")
        w(f"{n.vlw(h)} = {vl_bits}")
        total = self.fresh("tb")
        w(f"{total} = {nbytes} * 8")
        at = "0"
        for i, f in enumerate(t.fields):
            width = n.vlw(h) if f.vl else str(f.width)
            shift = f"({total} - {at} - {width})"
            mask = f"((1 << {width}) - 1)" if f.vl else str((1 << f.width) - 1)
            value = f"(({x} >> {shift}) & {mask})"
            if f.signed and not f.vl:
                half = 1 << (f.width - 1)
                value = f"(({value} ^ {half}) - {half})"
            w(f"{n.field_at(h, i)} = {value}")
            at = f"({at} + {width})"
        w(f"{n.dirty(h)} = 1")
        self.set_valid_flag(w, h, 1)
        w(f"pos += {nbytes}")

    def union_stack_next(self, name: str) -> str:
        idx = list(self.prog.union_stacks).index(name)
        return f"un{idx}"
