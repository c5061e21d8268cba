"""Writes a small random-weight llama-architecture GGUF model, deterministically.

    python make_model.py OUT_DIR

OUT_DIR gets `model.gguf` (F16, ~17 M parameters) and `tokenizer.json` (the same
byte-level BPE, for the runner's `--tokenizer`). Nothing is downloaded: the tokenizer is
trained on text generated here from a fixed seed, and the weights are seeded noise.

The output is steered so that every request produces exactly `max_tokens` tokens, one per
SSE chunk: embedding dimension 0 carries a large constant, so after the final RMS norm it
is a large positive number for every position, and the output weights give the tokens
that must never be sampled (EOS and the other control tokens, and any token whose bytes
are not whole UTF-8 characters, which llama-server would hold back) a large negative
weight on that dimension.
"""

import json
import random
import sys
from pathlib import Path

import numpy as np
import gguf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SEED = 20261121
VOCAB = 4096
EMBED = 512
LAYERS = 4
HEADS = 8
FFN = 1536
CONTEXT = 8192
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def training_text(rng: random.Random) -> list[str]:
    """ASCII sentences of pseudo-words: the BPE learns word tokens, and, since nothing
    outside ASCII is seen and no byte alphabet is forced, every token is whole UTF-8."""
    consonants = "bcdfghjklmnprstvwz"
    vowels = "aeiou"
    words = []
    for _ in range(3000):
        syllables = rng.randint(1, 3)
        words.append(
            "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables))
        )
    lines = []
    for _ in range(20000):
        n = rng.randint(4, 16)
        sentence = " ".join(rng.choice(words) for _ in range(n))
        lines.append(sentence.capitalize() + rng.choice(".,;:!?") + " " + str(rng.randint(0, 999)))
    return lines


def train_tokenizer(rng: random.Random) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=SPECIALS, show_progress=False
    )
    tok.train_from_iterator(training_text(rng), trainer=trainer)
    return tok


def token_bytes(token: str) -> bytes:
    """The bytes of a byte-level BPE token (GPT-2's byte-to-unicode map, inverted)."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    # GPT-2 maps printable bytes to themselves and the rest to U+0100 onwards.
    table = {}
    n = 0
    for b in range(256):
        if (33 <= b <= 126) or (161 <= b <= 172) or (174 <= b <= 255):
            table[chr(b)] = b
        else:
            table[chr(256 + n)] = b
            n += 1
    assert set(table) == set(alphabet)
    return bytes(table[c] for c in token)


def write_gguf(tok: Tokenizer, path: Path, rng: np.random.Generator) -> None:
    vocab = tok.get_vocab(with_added_tokens=True)
    n_vocab = max(vocab.values()) + 1
    tokens = [""] * n_vocab
    for t, i in vocab.items():
        tokens[i] = t
    special_ids = {vocab[s] for s in SPECIALS}
    types = []
    banned = []
    for i, t in enumerate(tokens):
        if i in special_ids:
            types.append(gguf.TokenType.CONTROL)
            banned.append(i)
            continue
        types.append(gguf.TokenType.NORMAL)
        try:
            token_bytes(t).decode("utf-8")
        except UnicodeDecodeError:
            banned.append(i)
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("runner-test-random-llama")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(EMBED)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(EMBED // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|endoftext|>"])
    w.add_eos_token_id(vocab["<|endoftext|>"])
    w.add_eot_token_id(vocab["<|im_end|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)

    def noise(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float16)

    embd = noise(n_vocab, EMBED)
    embd[:, 0] = 1.0  # the constant dimension that the output steering reads
    w.add_tensor("token_embd.weight", embd)
    for b in range(LAYERS):
        ones = np.ones(EMBED, dtype=np.float32)
        w.add_tensor(f"blk.{b}.attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{b}.{name}.weight", noise(EMBED, EMBED))
        w.add_tensor(f"blk.{b}.ffn_norm.weight", ones.copy())
        w.add_tensor(f"blk.{b}.ffn_gate.weight", noise(FFN, EMBED))
        w.add_tensor(f"blk.{b}.ffn_up.weight", noise(FFN, EMBED))
        w.add_tensor(f"blk.{b}.ffn_down.weight", noise(EMBED, FFN))
    w.add_tensor("output_norm.weight", np.ones(EMBED, dtype=np.float32))
    output = noise(n_vocab, EMBED, std=0.1)
    output[:, 0] = 0.0
    output[banned, 0] = -10.0
    w.add_tensor("output.weight", output)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{path}: {n_vocab} tokens, {len(banned)} never sampled", file=sys.stderr)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(random.Random(SEED))
    tok.save(str(out / "tokenizer.json"))
    write_gguf(tok, out / "model.gguf", np.random.default_rng(SEED))


if __name__ == "__main__":
    main()
