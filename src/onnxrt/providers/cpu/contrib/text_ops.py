"""com.microsoft text and decoding helpers: Tokenizer (skl2onnx's text pipelines),
NGramRepeatBlock and BifurcationDetector (generation loops), WordConvEmbedding.

Tokenizer's expressions are RE2 ones with leftmost-longest matching in onnxruntime; here they
run on Python's ``re`` (the same syntax for the character classes, repetitions and
alternations converters write) with RE2's ASCII meaning of \\w, \\d, \\s and \\b, and the
longest match at the leftmost position is taken explicitly, so alternations such as ``a|ab``
match as RE2 matches them. Python-only syntax that RE2 (and so onnxruntime) refuses --
lookarounds, backreferences, atomic groups, the (?u)/(?a)/(?L)/(?x) flags -- is refused
with the pattern named.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU

MS = "com.microsoft"
_START, _END = "\x02", "\x03"


_NOT_RE2 = re.compile(r"\(\?(?:[=!>]|<[=!]|P=|[uaLx])|\\[1-9]")


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    bad = _NOT_RE2.search(pattern)
    if bad:
        raise ValueError(f"Tokenizer: {what} {pattern!r} uses {bad.group(0)!r}, which RE2 "
                         f"(onnxruntime's regular expressions) does not support")
    try:
        return re.compile(pattern, re.ASCII)
    except re.error as e:
        raise ValueError(f"Tokenizer: cannot compile {what} {pattern!r}: {e}") from e


def longest_match(rx: re.Pattern[str], text: str, pos: int) -> tuple[int, int] | None:
    """(start, end) of the leftmost-longest match of ``rx`` in text[pos:], or None."""
    m = rx.search(text, pos)
    if m is None:
        return None
    start, end = m.start(), m.end()
    # a longer match starting at the same place (RE2's longest_match option)
    for e in range(len(text), end, -1):
        if rx.fullmatch(text, start, e) is not None:
            return start, e
    return start, end


@CPU.kernel("Tokenizer", since=1, domain=MS, needs_node=True)
class Tokenizer:
    """Strings [C] or [N, C] to tokens [..., max_tokens], padded with ``pad_value``;
    ``mark`` adds \\x02 / \\x03 around each row's tokens. ``separators`` (applied one after
    another, each splitting the previous pieces) or ``tokenexp`` (the tokens themselves);
    separators [""] or tokenexp "." split into characters. Tokens shorter than ``mincharnum``
    characters are dropped."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        for req in ("mark", "pad_value", "mincharnum"):
            if req not in a:
                raise ValueError(f"Tokenizer: attribute {req!r} is required")
        self.mark = int(a["mark"]) != 0
        self.pad = str(a["pad_value"])
        self.minchar = int(a["mincharnum"])
        if self.minchar <= 0:
            raise ValueError("Tokenizer: mincharnum must be positive")
        seps = a.get("separators")
        tokexp = a.get("tokenexp")
        self.chars = False
        self.seps: list[re.Pattern[str]] = []
        self.tokexp: re.Pattern[str] | None = None
        if seps is not None:
            if not seps:
                raise ValueError("Tokenizer: separators must not be empty")
            if len(seps) == 1 and seps[0] == "":
                self.chars = True
            else:
                self.seps = [_compile(s, "separator") for s in seps]
        else:
            if not tokexp:
                raise ValueError("Tokenizer: one of separators or a non-empty tokenexp is "
                                 "required")
            if tokexp == ".":
                self.chars = True
            else:
                self.tokexp = _compile(tokexp, "tokenexp")
        if self.chars and self.minchar >= 2:
            raise ValueError("Tokenizer: mincharnum is too big for character tokenization")

    def _split(self, s: str) -> list[str]:
        row = [s]
        for sep in self.seps:
            tokens: list[str] = []
            for text in row:
                pos = 0
                while True:
                    m = longest_match(sep, text, pos)
                    if m is None:
                        if len(text) - pos >= self.minchar:
                            tokens.append(text[pos:])
                        break
                    start, end = m
                    if start - pos >= self.minchar:
                        tokens.append(text[pos:start])
                    pos = end if end > start else start + 1
                    if pos > len(text):
                        break
            if not tokens:
                return []
            row = tokens
        return row

    def _tokens(self, s: str) -> list[str]:
        rx = self.tokexp
        out: list[str] = []
        if len(s) < self.minchar:
            return out
        pos = 0
        while pos <= len(s):
            m = longest_match(rx, s, pos)
            if m is None:
                break
            start, end = m
            if end - start >= self.minchar:
                out.append(s[start:end])
                pos = end
            else:
                pos = start + 1
        return out

    def __call__(self, x):
        x = np.asarray(x)
        if x.ndim not in (1, 2):
            raise ValueError(f"Tokenizer: input must be [C] or [N, C], got shape {x.shape}")
        flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in x.reshape(-1)]
        if not flat:
            shape = ((x.shape[0],) if x.ndim == 2 else ()) + (0,)
            return np.empty(shape, dtype=object)
        if self.chars:
            rows = [list(s) for s in flat]
        elif self.seps:
            rows = [self._split(s) for s in flat]
        else:
            rows = [self._tokens(s) for s in flat]
        width = max(len(r) for r in rows)
        if width == 0:
            return np.empty(x.shape + (0,), dtype=object)
        extra = 2 if self.mark else 0
        out = np.empty((len(rows), width + extra), dtype=object)
        for i, r in enumerate(rows):
            full = ([_START] if self.mark else []) + r + ([_END] if self.mark else [])
            full += [self.pad] * (width + extra - len(full))
            out[i] = full
        return out.reshape(x.shape + (width + extra,))


@CPU.kernel("NGramRepeatBlock", since=1, domain=MS)
def ngram_repeat_block(input_ids, scores, *, ngram_size):
    """scores with -inf at each token that would repeat an n-gram already in input_ids
    (batch, cur_len): the token after every earlier occurrence of the last n-1 tokens."""
    ids = np.asarray(input_ids).astype(np.int64)
    out = np.array(scores, dtype=np.float32, copy=True)
    n = int(ngram_size)
    if ids.ndim != 2 or out.ndim != 2 or ids.shape[0] != out.shape[0]:
        raise ValueError(f"NGramRepeatBlock: input_ids (batch, len) and scores (batch, vocab) "
                         f"expected, got {ids.shape} and {out.shape}")
    b, cur = ids.shape
    if n <= 0 or cur + 1 < n:
        return out
    vocab = out.shape[1]
    for r in range(b):
        tail = ids[r, cur + 1 - n:]
        for i in range(cur - n + 1):
            if np.array_equal(ids[r, i:i + n - 1], tail):
                tok = int(ids[r, i + n - 1])
                if not 0 <= tok < vocab:
                    raise IndexError(f"NGramRepeatBlock: token {tok} outside the vocabulary "
                                     f"({vocab})")
                out[r, tok] = -np.inf
    return out


def _find(hay: np.ndarray, needle: np.ndarray, start: int = 0) -> int:
    """Index of the first occurrence of ``needle`` in hay[start:], or -1."""
    n = len(needle)
    for i in range(start, len(hay) - n + 1):
        if np.array_equal(hay[i:i + n], needle):
            return i
    return -1


@CPU.kernel("BifurcationDetector", since=1, domain=MS)
def bifurcation_detector(src_tokens, cur_tokens, prev_suffix_match_idx, pred_tokens=None, *,
                         min_ngram_size=1, max_ngram_size=3):
    """Speculative decoding step: the predicted tokens up to where they leave the source
    (from the previous suffix match) join the current tokens; then the start of the one
    source n-gram (min..max size) equal to the tokens' tail, or -1 when none or several."""
    src = np.asarray(src_tokens).astype(np.int64).reshape(-1)
    cur = np.asarray(cur_tokens).astype(np.int64).reshape(-1)
    prev = np.asarray(prev_suffix_match_idx).astype(np.int64)
    if pred_tokens is None:
        tokens = cur.copy()
    else:
        pred = np.asarray(pred_tokens).astype(np.int64).reshape(-1)
        p = int(prev.reshape(-1)[0])
        if not 0 <= p <= len(src) or len(pred) != len(src) + 1 - p:
            raise ValueError(f"BifurcationDetector: pred_tokens must hold len(src) + 1 - "
                             f"prev_suffix_match_idx = {len(src) + 1 - p} tokens, got "
                             f"{len(pred)}")
        k = 0
        while k < len(src) - p and pred[k] == src[k + p]:
            k += 1
        tokens = np.concatenate([cur, pred[:k + 1]])
    suffix = -1
    for size in range(int(min_ngram_size), int(max_ngram_size) + 1):
        if size > len(tokens):
            break
        tail = tokens[len(tokens) - size:]
        at = _find(src, tail)
        if at < 0:
            break
        suffix = at + size
        if suffix >= len(src):
            break
        if _find(src, tail, suffix - size + 1) >= 0:
            suffix = -1
    return tokens, np.full(prev.shape, suffix, np.int64)


@CPU.kernel("WordConvEmbedding", since=1, domain=MS)
def word_conv_embedding(sequence, w, b, c, *, embedding_size=-1, conv_window_size=-1,
                        char_embedding_size=-1):
    """Word embeddings from characters: each word (a row of char ids, 0 = padding) looks up
    char embeddings C, a 1-D convolution W (M, 1, width, E) + B runs over them, tanh, and the
    max over positions. A word's length counts its non-zero chars (0 when it starts with
    0); words shorter than the window use the first ``width`` positions."""
    op = "WordConvEmbedding"
    seq = np.asarray(sequence).astype(np.int64)
    w, b, c = (np.asarray(v, np.float32) for v in (w, b, c))
    if w.ndim != 4 or c.ndim != 2 or w.shape[3] != c.shape[1]:
        raise ValueError(f"{op}: W (M, 1, width, E) and C (chars, E) expected, got {w.shape} "
                         f"and {c.shape}")
    for attr, got, what in ((embedding_size, w.shape[0], "embedding_size"),
                            (conv_window_size, w.shape[2], "conv_window_size"),
                            (char_embedding_size, c.shape[1], "char_embedding_size")):
        if int(attr) != -1 and int(attr) != got:
            raise ValueError(f"{op}: {what}={attr} does not match the weights ({got})")
    nwords, wlen = seq.shape
    m, width, e = w.shape[0], w.shape[2], w.shape[3]
    wf = w.reshape(m, width * e)
    y = np.zeros((nwords, m), np.float32)
    lens = np.where(seq[:, 0] > 0, (seq > 0).sum(axis=1), 0)
    for i in range(nwords):
        if lens[i] <= 0:
            continue
        span = max(int(lens[i]), width)
        ids = seq[i, :span]
        if ids.size and (ids.min() < 0 or ids.max() >= c.shape[0]):
            raise IndexError(f"{op}: char ids must be in [0, {c.shape[0]})")
        emb = c[ids]                                          # (span, E)
        wins = np.lib.stride_tricks.sliding_window_view(emb, width, axis=0)  # (n, E, width)
        wins = wins.transpose(0, 2, 1).reshape(-1, width * e)
        act = np.tanh(wins @ wf.T + b)
        y[i] = act.max(axis=0)
    return y
