"""com.microsoft GreedySearch for decoder-only (GPT-2 style, model_type 0) subgraphs, as
onnxruntime's CPU kernel runs it.

The ``decoder`` subgraph takes input_ids, position_ids, attention_mask (int32) and
past_0..past_{L-1} (2, B, N, P, H) and gives logits (B, S, V) and present_0..: the first run
gets the prompt (positions count the non-pad tokens, the mask marks them unless given; the
pasts are empty), each later run the tokens just chosen, positions one further, the mask one
longer, the presents as pasts. ``init_decoder``, when given, makes the first run. The last
logits of each row go through onnxruntime's processors in its order -- repetition penalty,
no-repeat n-grams, vocab_mask, prefix_vocab_mask (first step), min_length (eos forbidden
while shorter) -- and the arg max is the next token. A row that picks eos is finished: it
and every later step get pad_token_id; the loop ends when every row is finished or the
sequences reach max_length. Positions past that end hold pad_token_id.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU

MS = "com.microsoft"
_LOWEST = np.finfo(np.float32).min


def _scalar(v: Any, what: str, default: Any = None) -> Any:
    if v is None:
        return default
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"GreedySearch: {what} must hold one value, got shape {a.shape}")
    return a.reshape(()).item()


def _past_dims(runner: Any) -> tuple[int, int, Any]:
    """(num_heads, head_size, element dtype) from the decoder's declared past_0 type."""
    names = list(runner.input_names)
    if names[:4] != ["input_ids", "position_ids", "attention_mask", "past_0"]:
        raise ValueError(f"GreedySearch: the decoder subgraph's inputs must start with "
                         f"input_ids, position_ids, attention_mask, past_0; got {names[:4]}")
    tp = runner.input_types[3] if runner.input_types else None
    dims = []
    elem = 1
    if tp is not None and tp.HasField("tensor_type"):
        elem = tp.tensor_type.elem_type
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tp.tensor_type.shape.dim]
    if len(dims) != 5 or dims[0] != 2 or dims[2] <= 0 or dims[4] <= 0:
        raise ValueError("GreedySearch: the decoder's past_0 must be declared (2, batch, "
                         "num_heads, past_length, head_size) with num_heads and head_size known")
    return dims[2], dims[4], np.float16 if elem == 10 else np.float32


def process_scores(scores: np.ndarray, seqs: np.ndarray, step: int, *, penalty: float,
                   ngram: int, vocab_mask: np.ndarray | None, prefix_mask: np.ndarray | None,
                   min_length: int, eos: int) -> np.ndarray:
    """onnxruntime's logits processors, in its order, on scores (B, V) given the sequences
    so far (B, cur)."""
    b, v = scores.shape
    cur = seqs.shape[1]
    if penalty != 1.0:
        for i in range(b):
            ids = np.unique(seqs[i])
            ids = ids[(ids >= 0) & (ids < v)]
            sc = scores[i, ids]
            scores[i, ids] = np.where(sc < 0, sc * np.float32(penalty), sc / np.float32(penalty))
    if 0 < ngram <= cur:
        for i in range(b):
            seq = seqs[i]
            prefix = seq[cur - (ngram - 1):] if ngram > 1 else seq[:0]
            for j in range(cur - ngram + 1):
                if ngram == 1 or np.array_equal(seq[j:j + ngram - 1], prefix):
                    tok = int(seq[j + ngram - 1])
                    if 0 <= tok < v:
                        scores[i, tok] = _LOWEST
    if vocab_mask is not None:
        scores[:, vocab_mask == 0] = _LOWEST
    if prefix_mask is not None and step == 1:
        scores[prefix_mask == 0] = _LOWEST
    if min_length > 0 and cur < min_length and 0 <= eos < v:
        scores[:, eos] = _LOWEST
    return scores


@CPU.kernel("GreedySearch", since=1, domain=MS, needs_node=True, context=True,
            host_inputs=(1, 2, 3))
class GreedySearch:
    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.node = node
        if int(a.get("model_type", 0)) != 0:
            raise ValueError("GreedySearch: only decoder-only models (model_type 0) are "
                             "supported; encoder-decoder (T5/Bart) generation is not")
        if a.get("encoder") is not None:
            raise ValueError("GreedySearch: an encoder subgraph is not supported")
        self.decoder = a["decoder"]
        self.init_decoder = a.get("init_decoder")
        self.eos = int(a["eos_token_id"])
        self.pad = int(a["pad_token_id"])
        self.ngram = int(a.get("no_repeat_ngram_size", 0))
        self.heads, self.head_size, self.past_dt = _past_dims(self.decoder)
        n_in, n_out = len(self.decoder.input_names), len(self.decoder.output_names)
        if n_in != n_out + 2 or n_out < 2:
            raise ValueError(f"GreedySearch: the decoder has {n_in} inputs and {n_out} "
                             f"outputs; (logits + one present per layer) and 2 more inputs "
                             f"are supported (past and present sharing one buffer is not)")
        self.layers = n_out - 1
        self.vocab = int(a.get("vocab_size", -1))

    def _run(self, runner, feeds, outer, ctx):
        return runner.run(feeds, outer, ctx)

    def __call__(self, *args: Any, ctx: Any) -> np.ndarray:
        n_own = self.node.num_inputs
        own = list(args[:n_own]) + [None] * (7 - n_own)
        outer = dict(zip(self.node.implicit_inputs, args[n_own:])) if args[n_own:] else None
        input_ids, max_length, min_length, penalty, vocab_mask, prefix_mask, attn = own[:7]
        ids = np.asarray(input_ids).astype(np.int32)
        if ids.ndim != 2:
            raise ValueError(f"GreedySearch: input_ids must be (batch, sequence), got "
                             f"{ids.shape}")
        b, s = ids.shape
        max_len = int(_scalar(max_length, "max_length"))
        min_len = int(_scalar(min_length, "min_length", 0))
        pen = float(_scalar(penalty, "repetition_penalty", 1.0))
        if max_len < s:
            raise ValueError(f"GreedySearch: max_length {max_len} is shorter than the prompt "
                             f"({s})")
        vm = None if vocab_mask is None else np.asarray(vocab_mask).reshape(-1)
        pm = None if prefix_mask is None else np.asarray(prefix_mask).reshape(b, -1)
        nonpad = ids != self.pad
        mask = nonpad.astype(np.int32) if attn is None else np.asarray(attn).astype(np.int32)
        pos = np.where(nonpad, np.cumsum(nonpad, axis=1) - 1, 0).astype(np.int32)
        next_pos = nonpad.sum(axis=1).astype(np.int32)
        past = [np.zeros((2, b, self.heads, 0, self.head_size), self.past_dt)
                for _ in range(self.layers)]
        seqs = ids.copy()
        done = np.zeros(b, bool)
        feeds_ids, feeds_pos = ids, pos
        step = 0
        while seqs.shape[1] < max_len:
            step += 1
            runner = self.init_decoder if step == 1 and self.init_decoder is not None \
                else self.decoder
            out = self._run(runner, [feeds_ids, feeds_pos, mask] + past, outer, ctx)
            logits = np.asarray(out[0])
            if self.vocab > 0 and logits.shape[-1] != self.vocab:
                raise ValueError(f"GreedySearch: the decoder's logits have {logits.shape[-1]} "
                                 f"entries, vocab_size is {self.vocab}")
            scores = logits[:, -1, :].astype(np.float32).copy()
            scores = process_scores(scores, seqs, step, penalty=pen, ngram=self.ngram,
                                    vocab_mask=vm, prefix_mask=pm, min_length=min_len,
                                    eos=self.eos)
            nxt = scores.argmax(axis=1).astype(np.int32)
            done |= nxt == self.eos
            nxt = np.where(done, self.pad, nxt).astype(np.int32)
            seqs = np.concatenate([seqs, nxt[:, None]], axis=1)
            if done.all() or seqs.shape[1] >= max_len:
                break
            past = [np.asarray(p) for p in out[1:1 + self.layers]]
            feeds_ids = nxt[:, None]
            if step > 1:
                next_pos = next_pos + 1
            feeds_pos = next_pos[:, None].astype(np.int32)
            mask = np.concatenate([mask, np.ones((b, 1), np.int32)], axis=1)
        result = np.full((b, max_len), self.pad, np.int32)
        result[:, :seqs.shape[1]] = seqs
        return result
