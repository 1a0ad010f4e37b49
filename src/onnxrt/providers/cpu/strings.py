"""String ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch, TfIdfVectorizer.

Strings are object arrays of Python ``str``; per-element work goes through ``frompyfunc``
(one C loop calling a small Python function), which is as fast as NumPy gets for ``str``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU


def _obj(shape: tuple[int, ...], values: Any = None) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    if values is not None:
        out[...] = values
    return out


# -- StringConcat -----------------------------------------------------------------------
@CPU.kernel("StringConcat", since=20)
def string_concat(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.add(np.asarray(x, dtype=object), np.asarray(y, dtype=object))
    if not isinstance(out, np.ndarray):  # two 0-d inputs give a bare str
        out = _obj((), out)
    return out


# -- StringNormalizer -------------------------------------------------------------------
@CPU.kernel("StringNormalizer", since=10)
class StringNormalizer:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.action = (a.get("case_change_action") or "NONE").upper()
        if self.action not in ("NONE", "LOWER", "UPPER"):
            raise ValueError(f"case_change_action must be NONE, LOWER or UPPER, "
                             f"got {self.action!r}")
        self.case_sensitive = bool(a.get("is_case_sensitive", 0))
        words = a.get("stopwords") or []
        self.stop = frozenset(words if self.case_sensitive else (w.lower() for w in words))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
            raise ValueError(f"StringNormalizer accepts [C] or [1, C] input, got {x.shape}")
        flat = x.reshape(-1).tolist()
        if self.stop:
            if self.case_sensitive:
                flat = [s for s in flat if s not in self.stop]
            else:
                flat = [s for s in flat if s.lower() not in self.stop]
        if self.action == "LOWER":
            flat = [s.lower() for s in flat]
        elif self.action == "UPPER":
            flat = [s.upper() for s in flat]
        if not flat:
            flat = [""]  # all dropped: one empty string, as the spec says
        out = _obj((len(flat),), flat)
        return out.reshape(1, -1) if x.ndim == 2 else out


# -- StringSplit ------------------------------------------------------------------------
@CPU.kernel("StringSplit", since=20)
class StringSplit:
    def __init__(self, node: NodeInfo) -> None:
        d = node.attrs.get("delimiter")
        # unspecified or empty delimiter: runs of whitespace separate, ends are stripped
        self.delim = d if d else None
        m = node.attrs.get("maxsplit")
        self.maxsplit = -1 if m is None else int(m)
        if self.maxsplit < -1:
            raise ValueError(f"maxsplit must be non-negative, got {m}")

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        flat = x.reshape(-1).tolist()
        # an empty string has no substrings (onnxruntime), where Python gives [""]
        parts = [s.split(self.delim, self.maxsplit) if s else [] for s in flat]
        if self.delim is None and self.maxsplit >= 0:
            # whitespace mode strips the unsplit remainder too (Python keeps its tail)
            for p in parts:
                if p:
                    p[-1] = p[-1].rstrip()
        counts = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
        width = int(counts.max()) if counts.size else 0
        y = _obj((len(parts), width), "")
        for i, p in enumerate(parts):
            y[i, :len(p)] = p
        return y.reshape(x.shape + (width,)), counts.reshape(x.shape)


# -- RegexFullMatch ---------------------------------------------------------------------
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z",
    "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
# RE2's Perl classes are ASCII-only (Python's are Unicode); its case folding stays Unicode,
# so the classes are made ASCII one by one instead of compiling with re.ASCII
_PERL_OUT = {"d": "[0-9]", "D": "[^0-9]", "w": "[0-9A-Za-z_]", "W": "[^0-9A-Za-z_]",
             "s": "[\\t\\n\\f\\r ]", "S": "[^\\t\\n\\f\\r ]", "b": "(?a:\\b)",
             "B": "(?a:\\B)", "z": "\\Z"}
_PERL_IN = {"d": "0-9", "w": "0-9A-Za-z_", "s": "\\t\\n\\f\\r "}
# the Unicode classes Python can spell: letters are word characters that are not digits
# or underscore; numbers are Unicode decimal digits
_UNICODE_OUT = {"L": "[^\\W\\d_]", "N": "\\d", "Nd": "\\d"}
_UNICODE_NEG = {"L": "[\\W\\d_]", "N": "\\D", "Nd": "\\D"}


def re2_to_python(pattern: str) -> str:
    """Translate an RE2 pattern to Python ``re`` syntax where the two differ.

    Handled: ASCII-only ``\\d \\w \\s \\b`` (and negations), ``\\z``, ``\\Q...\\E``,
    POSIX classes ``[[:alpha:]]`` (and a whole negated ``[[:^alpha:]]``), ``\\pL``,
    ``\\p{N}``. Other Unicode classes, ``\\C`` and negated Perl classes inside brackets
    raise ValueError; Python-only syntax (backreferences, lookaround) is not rejected.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if not in_class and pattern.startswith("[[:^", i):
            j = pattern.find(":]]", i)
            name = pattern[i + 4:j] if j > 0 else ""
            if name not in _POSIX:
                raise ValueError(f"unsupported POSIX class in {pattern!r}")
            out.append(f"[^{_POSIX[name]}]")
            i = j + 3
            continue
        if in_class and pattern.startswith("[:", i):
            j = pattern.find(":]", i + 2)
            name = pattern[i + 2:j] if j > 0 else ""
            if name not in _POSIX:
                raise ValueError(f"unsupported POSIX class [:{name}:] in {pattern!r}")
            out.append(_POSIX[name])
            i = j + 2
            continue
        if ch == "\\" and i + 1 < n:
            c = pattern[i + 1]
            if c == "Q":
                if in_class:
                    raise ValueError(f"\\Q inside brackets is invalid in RE2: {pattern!r}")
                j = pattern.find("\\E", i + 2)
                j = n if j < 0 else j
                out.append(re.escape(pattern[i + 2:j]))
                i = j + 2
                continue
            if c in "pP":
                if i + 2 < n and pattern[i + 2] == "{":
                    j = pattern.find("}", i + 3)
                    name, i2 = pattern[i + 3:j], j + 1
                else:
                    name, i2 = pattern[i + 2:i + 3], i + 3
                table = _UNICODE_OUT if c == "p" else _UNICODE_NEG
                if in_class or name not in table:
                    raise ValueError(f"RE2 class \\{c}{name} is not supported here "
                                     f"(pattern {pattern!r})")
                out.append(table[name])
                i = i2
                continue
            if c == "C":
                raise ValueError("RE2's \\C (any byte) is not supported")
            if in_class:
                if c in _PERL_IN:
                    out.append(_PERL_IN[c])
                elif c in "DWS":
                    raise ValueError(f"negated class \\{c} inside brackets is not supported")
                else:
                    out.append(pattern[i:i + 2])
            else:
                out.append(_PERL_OUT.get(c, pattern[i:i + 2]))
            i += 2
            continue
        if not in_class and ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            # a leading ^ and a leading ] are literal parts of the class syntax
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        if in_class and ch == "]":
            in_class = False
        elif in_class and ch == "[":
            ch = "\\["  # RE2 reads a nested [ literally; Python warns about it
        out.append(ch)
        i += 1
    return "".join(out)


@CPU.kernel("RegexFullMatch", since=20)
class RegexFullMatch:
    def __init__(self, node: NodeInfo) -> None:
        pattern = node.attrs.get("pattern")
        if pattern is None:
            raise ValueError("RegexFullMatch needs the 'pattern' attribute")
        try:
            rx = re.compile(re2_to_python(pattern))
        except re.error as e:
            raise ValueError(f"invalid regex {pattern!r}: {e}") from None
        self._match = np.frompyfunc(lambda s: rx.fullmatch(s) is not None, 1, 1)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            return np.zeros(x.shape, dtype=bool)
        return np.asarray(self._match(x), dtype=bool)


# -- TfIdfVectorizer --------------------------------------------------------------------
@CPU.kernel("TfIdfVectorizer", since=9)
class TfIdfVectorizer:
    """N-grams are encoded as integers (tokens -> pool vocabulary ids 1..V, an n-gram ->
    its base-(V+1) number) so matching against the pool is one ``searchsorted`` per
    (n, skip) for the whole batch; tokens outside the pool get id 0, which no pool n-gram
    contains."""

    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.mode = a.get("mode")
        if self.mode not in ("TF", "IDF", "TFIDF"):
            raise ValueError(f"mode must be TF, IDF or TFIDF, got {self.mode!r}")
        self.min_n = int(a["min_gram_length"])
        self.max_n = int(a["max_gram_length"])
        self.max_skip = int(a["max_skip_count"])
        if not 1 <= self.min_n <= self.max_n:
            raise ValueError(f"need 1 <= min_gram_length <= max_gram_length, got "
                             f"{self.min_n}, {self.max_n}")
        ints, strs = a.get("pool_int64s"), a.get("pool_strings")
        if (ints is None) == (strs is None):
            raise ValueError("exactly one of pool_int64s and pool_strings must be set")
        self.strings = strs is not None
        pool = list(strs) if self.strings else [int(v) for v in ints]
        counts = list(a["ngram_counts"])
        indexes = np.asarray(a["ngram_indexes"], dtype=np.int64)
        self.width = int(indexes.max()) + 1 if indexes.size else 0
        weights = a.get("weights")
        w = (np.ones(len(indexes), np.float32) if weights is None
             else np.asarray(weights, np.float32))
        if len(w) != len(indexes):
            raise ValueError("weights must be as long as ngram_indexes")

        # vocabulary ids, 1-based in sorted order so integer lookups can use searchsorted
        vocab = sorted(set(pool))
        self.V = len(vocab)
        if self.strings:
            self.vocab = {s: i + 1 for i, s in enumerate(vocab)}
        else:
            self.vocab_arr = np.asarray(vocab, dtype=np.int64)
        ids = {v: i + 1 for i, v in enumerate(vocab)}
        base = self.V + 1
        self.use_codes = base ** self.max_n < 2 ** 62
        # per n: sorted codes, their output columns and weights
        self.table: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray] | dict] = {}
        k = 0  # running n-gram number: the index into ngram_indexes / weights
        for n in range(1, len(counts) + 1):
            start = counts[n - 1]
            end = counts[n] if n < len(counts) else len(pool)
            if (end - start) % n:
                raise ValueError(f"pool entries {start}..{end} do not split into {n}-grams")
            grams = [tuple(ids[t] for t in pool[j:j + n]) for j in range(start, end, n)]
            cols = indexes[k:k + len(grams)]
            ws = w[k:k + len(grams)]
            k += len(grams)
            if not (self.min_n <= n <= self.max_n):
                continue
            if self.use_codes:
                codes = np.array([self._code(g, base) for g in grams], dtype=np.int64)
                order = np.argsort(codes, kind="stable")
                self.table[n] = (codes[order], cols[order], ws[order])
            else:
                self.table[n] = {g: (int(c), float(x)) for g, c, x in zip(grams, cols, ws)}
        self.weights_by_col = np.zeros(self.width, np.float32)
        self.weights_by_col[indexes] = w

    @staticmethod
    def _code(g: tuple[int, ...], base: int) -> int:
        c = 0
        for t in g:
            c = c * base + t
        return c

    def _ids(self, x: np.ndarray) -> np.ndarray:
        if self.strings:
            if x.dtype != object:
                raise TypeError("this TfIdfVectorizer has pool_strings: input must be strings")
            get = self.vocab.get
            return np.fromiter((get(s, 0) for s in x.reshape(-1).tolist()), dtype=np.int64,
                               count=x.size).reshape(x.shape)
        if x.dtype.kind not in "iu":
            raise TypeError(f"this TfIdfVectorizer has pool_int64s: input must be integers, "
                            f"got {x.dtype}")
        xv = x.astype(np.int64, copy=False)
        if self.V == 0:
            return np.zeros(x.shape, np.int64)
        pos = np.searchsorted(self.vocab_arr, xv)
        pos_c = np.minimum(pos, self.V - 1)
        return np.where(self.vocab_arr[pos_c] == xv, pos_c + 1, 0)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.ndim not in (1, 2):
            raise ValueError(f"input must be [C] or [N, C], got shape {x.shape}")
        ids = self._ids(x)
        ids2 = ids.reshape(1, -1) if x.ndim == 1 else ids
        N, C = ids2.shape
        counts = np.zeros((N, self.width), np.float32)
        base = self.V + 1
        rows = np.arange(N)[:, None]
        for n, tab in self.table.items():
            # a 1-gram is the same whatever the skip: count it once
            for skip in range(self.max_skip + 1 if n > 1 else 1):
                step = skip + 1
                span = (n - 1) * step
                m = C - span
                if m <= 0:
                    break
                if isinstance(tab, dict):
                    self._count_dict(ids2, n, step, m, tab, counts)
                    continue
                code = ids2[:, :m].copy()
                valid = code > 0
                for j in range(1, n):
                    tok = ids2[:, j * step:j * step + m]
                    code *= base
                    code += tok
                    valid &= tok > 0
                codes, cols, _ = tab
                if codes.size == 0:
                    continue
                pos = np.minimum(np.searchsorted(codes, code), codes.size - 1)
                hit = valid & (codes[pos] == code)
                flat = np.broadcast_to(rows, hit.shape)[hit] * self.width + cols[pos[hit]]
                counts += np.bincount(flat, minlength=N * self.width).reshape(N, -1)
        if self.mode == "IDF":
            np.minimum(counts, 1, out=counts)
            counts *= self.weights_by_col
        elif self.mode == "TFIDF":
            counts *= self.weights_by_col
        return counts[0] if x.ndim == 1 else counts

    @staticmethod
    def _count_dict(ids2: np.ndarray, n: int, step: int, m: int, tab: dict,
                    counts: np.ndarray) -> None:
        # fallback for pools too large to number n-grams in int64
        for r in range(ids2.shape[0]):
            row = ids2[r].tolist()
            for i in range(m):
                hit = tab.get(tuple(row[i:i + (n - 1) * step + 1:step]))
                if hit is not None:
                    counts[r, hit[0]] += 1
