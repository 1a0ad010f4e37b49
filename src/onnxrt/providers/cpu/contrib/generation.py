"""com.microsoft GreedySearch and BeamSearch for decoder-only (GPT-2 style, model_type 0)
subgraphs, as onnxruntime's CPU kernels run them.

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
        op = node.op_type
        if int(a.get("model_type", 0)) != 0:
            raise ValueError(f"{op}: only decoder-only models (model_type 0) are supported; "
                             f"encoder-decoder (T5/Bart) generation is not")
        if a.get("encoder") is not None:
            raise ValueError(f"{op}: an encoder subgraph is not supported")
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


# -- beam search ---------------------------------------------------------------------------

class _Hypotheses:
    """The best finished sequences of one batch entry, by sum_logprobs / len^penalty,
    highest first, at most ``n`` (onnxruntime's BeamHypotheses: a newcomer equal to a kept
    score goes after it; one no better than the worst of a full list is dropped)."""

    def __init__(self, n: int, length_penalty: float) -> None:
        self.n = n
        self.penalty = length_penalty
        self.items: list[tuple[float, np.ndarray]] = []
        self.done = False

    def add(self, seq: np.ndarray, sum_logprobs: float) -> None:
        score = float(np.float32(sum_logprobs) /
                      np.float32(np.power(np.float32(len(seq)), np.float32(self.penalty))))
        if len(self.items) == self.n and score <= self.items[-1][0]:
            return
        k = len(self.items)
        while k > 0 and score > self.items[k - 1][0]:
            k -= 1
        self.items.insert(k, (score, seq.copy()))
        del self.items[self.n:]

    def can_improve(self, best_sum_logprobs: float, cur_len: int) -> bool:
        cur = np.float32(best_sum_logprobs) / np.float32(np.power(np.float32(cur_len),
                                                                  np.float32(self.penalty)))
        return self.items[-1][0] < float(cur)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=1, keepdims=True)
    z = x - m
    return (z - np.log(np.exp(z).sum(axis=1, keepdims=True))).astype(np.float32)


@CPU.kernel("BeamSearch", since=1, domain=MS, needs_node=True, context=True,
            host_inputs=(1, 2, 3, 4, 5, 6))
class BeamSearch(GreedySearch):
    """Beam search over a decoder-only (GPT-2 style) subgraph, as onnxruntime's CPU kernel
    runs it: log-softmax scores through the logits processors, plus each beam's running
    score; the 2 * num_beams best (beam, token) pairs of each batch entry go to the beam
    scorer (eos closes a hypothesis when among the first num_beams, its length the tokens
    before eos; a batch entry is done when num_beams hypotheses exist and, without
    early_stopping, no running beam can beat the worst); the pasts follow the chosen beams.
    Outputs: sequences (B, num_return_sequences, max_length, pad after each), their scores,
    and the per-step scores (max_length - S, B, num_beams, V)."""

    def __init__(self, node: Any) -> None:
        super().__init__(node)
        self.early_stopping = bool(int(node.attrs.get("early_stopping", 0)))
        self.n_out = node.num_outputs
        self.want_scores = node.output_present(2)
        if node.input_present(10) or node.input_present(11):
            raise ValueError("BeamSearch: decoder_input_ids and logits_processor are not "
                             "supported for decoder-only models")

    def __call__(self, *args: Any, ctx: Any) -> Any:
        n_own = self.node.num_inputs
        own = list(args[:n_own]) + [None] * (12 - n_own)
        outer = dict(zip(self.node.implicit_inputs, args[n_own:])) if args[n_own:] else None
        (input_ids, max_length, min_length, num_beams, num_return, length_penalty, penalty,
         vocab_mask, prefix_mask, attn) = own[:10]
        ids0 = np.asarray(input_ids).astype(np.int32)
        b, s = ids0.shape
        max_len = int(_scalar(max_length, "max_length"))
        min_len = int(_scalar(min_length, "min_length", 0))
        nb = int(_scalar(num_beams, "num_beams"))
        nrs = int(_scalar(num_return, "num_return_sequences"))
        lp = float(_scalar(length_penalty, "length_penalty", 1.0))
        pen = float(_scalar(penalty, "repetition_penalty", 1.0))
        if nb < 1 or not 1 <= nrs <= nb or max_len < s:
            raise ValueError(f"BeamSearch: num_beams {nb}, num_return_sequences {nrs} (1 .. "
                             f"num_beams), max_length {max_len} (at least the prompt {s})")
        vm = None if vocab_mask is None else np.asarray(vocab_mask).reshape(-1)
        pm = None if prefix_mask is None else np.repeat(np.asarray(prefix_mask).reshape(b, -1),
                                                        nb, axis=0)
        nonpad = ids0 != self.pad
        mask0 = nonpad.astype(np.int32) if attn is None else np.asarray(attn).astype(np.int32)
        pos0 = np.where(nonpad, np.cumsum(nonpad, axis=1) - 1, 0).astype(np.int32)
        rep = lambda a: np.repeat(a, nb, axis=0)  # noqa: E731
        ids, mask, feeds_pos = rep(ids0), rep(mask0), rep(pos0)
        next_pos = rep(nonpad.sum(axis=1).astype(np.int32))
        bb = b * nb
        past = [np.zeros((2, bb, self.heads, 0, self.head_size), self.past_dt)
                for _ in range(self.layers)]
        seqs = ids.copy()
        beam_scores = np.zeros((b, nb), np.float32)
        beam_scores[:, 1:] = -1e9
        beam_scores = beam_scores.reshape(-1)
        hyps = [_Hypotheses(nb, lp) for _ in range(b)]
        step_scores: list[np.ndarray] = []
        feeds_ids = ids
        step = 0
        vocab = None
        while seqs.shape[1] < max_len:
            step += 1
            runner = self.init_decoder if step == 1 and self.init_decoder is not None \
                else self.decoder
            out = self._run(runner, [feeds_ids, feeds_pos, mask] + past, outer, ctx)
            logits = np.asarray(out[0])
            vocab = logits.shape[-1]
            scores = _log_softmax(logits[:, -1, :].astype(np.float32))
            scores = process_scores(scores, seqs, step, penalty=pen, ngram=self.ngram,
                                    vocab_mask=vm, prefix_mask=pm, min_length=min_len,
                                    eos=self.eos)
            scores = scores + beam_scores[:, None]
            step_scores.append(scores.reshape(b, nb, vocab).copy())
            flat = scores.reshape(b, nb * vocab)
            top = np.argsort(-flat, axis=1, kind="stable")[:, :2 * nb]
            next_scores = np.take_along_axis(flat, top, axis=1)
            next_tokens, next_idx = top % vocab, top // vocab
            cur = seqs.shape[1]
            new_scores = np.zeros(bb, np.float32)
            new_tokens = np.full(bb, self.pad, np.int32)
            new_src = np.zeros(bb, np.int64)
            flat_scores = next_scores.reshape(-1)
            for i in range(b):
                hyp = hyps[i]
                if hyp.done:
                    new_src[i * nb:(i + 1) * nb] = 0   # onnxruntime's index (batch_beam 0)
                    continue
                k = 0
                for j in range(2 * nb):
                    tok, sc = int(next_tokens[i, j]), float(next_scores[i, j])
                    src = i * nb + int(next_idx[i, j])
                    if self.eos >= 0 and tok == self.eos:
                        if j >= nb:
                            continue
                        hyp.add(seqs[src], sc)
                    else:
                        new_scores[i * nb + k] = sc
                        new_tokens[i * nb + k] = tok
                        new_src[i * nb + k] = src
                        k += 1
                    if k == nb:
                        break
                if len(hyp.items) < nb:
                    continue
                if not self.early_stopping:
                    # onnxruntime reads these 2 * num_beams scores from offset batch * num_beams
                    window = flat_scores[i * nb:i * nb + 2 * nb]
                    if hyp.can_improve(float(window.max()), cur):
                        continue
                hyp.done = True
            beam_scores = new_scores
            seqs = np.concatenate([seqs[new_src], new_tokens[:, None]], axis=1)
            if all(h.done for h in hyps):
                break
            if seqs.shape[1] >= max_len:
                break
            past = [np.asarray(p)[:, new_src] for p in out[1:1 + self.layers]]
            feeds_ids = new_tokens[:, None]
            if step > 1:
                next_pos = next_pos + 1
            feeds_pos = next_pos[:, None].astype(np.int32)
            mask = np.concatenate([mask, np.ones((bb, 1), np.int32)], axis=1)
        for i in range(b):
            if not hyps[i].done:
                for j in range(nb):
                    hyps[i].add(seqs[i * nb + j], float(beam_scores[i * nb + j]))
        sequences = np.full((b, nrs, max_len), self.pad, np.int32)
        seq_scores = np.zeros((b, nrs), np.float32)
        for i in range(b):
            for r, (sc, sq) in enumerate(hyps[i].items[:nrs]):
                sequences[i, r, :len(sq)] = sq
                seq_scores[i, r] = sc
        res: list[Any] = [sequences, seq_scores]
        if self.want_scores:
            full = np.zeros((max_len - s, b, nb, vocab or 0), np.float32)
            for k, sc in enumerate(step_scores):
                full[k] = sc
            res.append(full)
        else:
            res.append(None)
        return tuple(res[:self.n_out]) if self.n_out > 1 else res[0]
