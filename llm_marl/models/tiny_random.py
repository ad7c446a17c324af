"""`tiny-random`: a tiny Qwen2-architecture model with a locally trained tokenizer, for tests.

Built offline in a few seconds and cached (`llm_marl.models.cache`):

- tokenizer: byte-level BPE (vocab `VOCAB_SIZE`) trained on a seeded corpus of English, grids,
  puzzles, code and tool-call text, with Qwen2's own pipeline (NFC, regex `Split`, `ByteLevel`
  without regex). transformers 5 re-installs that pipeline when `AutoTokenizer` loads a `qwen2`
  folder, so a tokenizer trained with anything else would encode differently after reload. ChatML template, `<|im_end|>` = EOS, `<|endoftext|>` = pad.
- model: `Qwen2ForCausalLM`, 2 layers, hidden 128, head_dim 64 (vLLM's CPU attention rejects
  head_dim 16), tied embeddings, weights drawn from a fixed seed.
"""

from __future__ import annotations

import random
from pathlib import Path

VERSION = 1
"""Bump when the recipe changes: the cache key includes it, so old builds are not reused."""
VOCAB_SIZE = 4096
SEED = 0
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# Qwen2's pre-tokenizer regex (transformers/models/qwen2/tokenization_qwen2.py).
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_WORDS = (
    "the a an agent tool planner worker coder tester reasoner rewriter reranker answerer goal wall box "
    "target grid cell row column move up down left right start end path shortest step turn reward team "
    "local format answer question document search result summary task subtask plan program code output "
    "print return value list number sum solve puzzle sudoku sokoban player push is are was be can will must "
    "should not and or if then else for while with from to of in on at by you your we it this that each every "
    "one two three four five six seven eight nine ten first last next previous valid invalid correct wrong "
    "please write think explain final python function test case input expected actual error passed failed "
    "about above across after again against all almost alone along already also although always among another "
    "any anyone anything around ask away back because become before begin behind being below best better "
    "between both bring build call came carry cause change check child city clear close come common could "
    "country course cover cross current day deal decide deep did different direction distance does done door "
    "during early earth east easy either enough even evening ever example face fact family far fast feel few "
    "field figure find fine fire follow food force form found free friend full game gave general get give "
    "good great ground group grow half hand happen hard have head hear heart help here high hold home hope "
    "horse hour house however idea important include inside interest keep kind king know land language large "
    "later learn leave less letter life light line little live long look made main make man many map mark "
    "matter mean measure might mind minute money more morning most mother mountain much music name near need "
    "never new night north note nothing notice now object often old only open order other over own page paper "
    "part pass past people perhaps picture piece place point position possible power present problem product "
    "pull put quick quite rather reach read ready real reason remember rest river road rock room round rule "
    "run said same saw say school science sea second see seem sentence set several shape short show side "
    "simple since size small something sometimes song soon sound south space special stand star state still "
    "stop story street strong study such sure surface system table take talk teacher tell than their them "
    "there these thing those though thought through time together too toward town travel tree true try under "
    "unit until upon usually very voice walk want watch water way week well went west what when where which "
    "while white whole why wide wind window within without word work world would year yes yet young"
).split()
_SENTENCES = (
    "You are the planner. Read the grid and answer with the next moves after ####.",
    "You are the tool agent. Write one Python program that prints a proposal.",
    "The agent must reach the goal without walking into a wall.",
    "Push every box onto a target; a box cannot be pulled.",
    "Fill the grid so that each row, column and box holds every digit once.",
    "Write a function that returns the sum of the list, then write tests for it.",
    "The capital of France is Paris. The capital of Italy is Rome.",
    "Answer the question with a short phrase and put the final answer in \\boxed{}.",
    "Summarize what the search results say about the subtask.",
    "Conclusion: the answer is supported by two documents.",
)


def corpus(seed: int = SEED, lines: int = 12000) -> list[str]:
    """Deterministic training text: the same seed gives the same lines on any machine."""
    rng = random.Random(seed)
    out: list[str] = list(_SENTENCES)
    for i in range(lines):
        kind = i % 8
        if kind == 0:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 16))]
            out.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ":"]))
        elif kind == 1:
            h, w = rng.randint(3, 10), rng.randint(3, 10)
            grid = ["".join(rng.choice("..#@$*+GA ") for _ in range(w)) for _ in range(h)]
            out.append("\n".join(grid))
        elif kind == 2:
            n = rng.choice((4, 9))
            out.append("\n".join(" ".join(str(rng.randint(0, n)) for _ in range(n)) for _ in range(rng.randint(1, n))))
        elif kind == 3:
            name, arg = rng.choice(("solve", "move", "check", "total", "parse")), rng.choice("xyzn")
            op = rng.choice(("+", "-", "*", "//", "%"))
            out.append(f"def {name}({arg}):\n    return {arg} {op} {rng.randint(0, 99)}\n\nprint({name}({rng.randint(0, 9)}))")
        elif kind == 4:
            moves = [rng.choice("UDLR") for _ in range(rng.randint(1, 8))]
            out.append(f'{{"action": "{rng.choice(moves)}", "moves": {moves}}}'.replace("'", '"'))
        elif kind == 5:
            a, b = rng.randint(0, 999), rng.randint(0, 999)
            out.append(f"{a} + {b} = {a + b}. #### {rng.choice('UDLR') * rng.randint(1, 4)}")
        elif kind == 6:
            out.append(
                "<use_mcp_tool>\n<server_name>search</server_name>\n<tool_name>search_and_browse</tool_name>\n"
                f'<arguments>{{"subtask": "{" ".join(rng.choice(_WORDS) for _ in range(4))}"}}</arguments>\n</use_mcp_tool>'
            )
        else:
            out.append(f"assert {rng.choice(('solve', 'total'))}({rng.randint(0, 9)}) == {rng.randint(0, 99)}  # Document{rng.randint(0, 9)}, \\boxed{{{rng.randint(0, 99)}}}")
    return out


def train_tokenizer(seed: int = SEED, vocab_size: int = VOCAB_SIZE):
    """A `tokenizers.Tokenizer` with Qwen2's normalizer/pre-tokenizer/decoder, trained on `corpus(seed)`."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    return tok


def build(dest: Path, seed: int = SEED) -> None:
    """Write tokenizer + config + random weights of `tiny-random` into `dest`."""
    import torch
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    raw = train_tokenizer(seed)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None,
        additional_special_tokens=["<|im_start|>", "<|im_end|>"], model_max_length=4096,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(dest)
    # Qwen2Tokenizer is what `AutoTokenizer` and vLLM pick for a qwen2 folder; say so explicitly.
    _set_tokenizer_class(dest, "Qwen2Tokenizer")

    im_end, pad = raw.token_to_id("<|im_end|>"), raw.token_to_id("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=raw.get_vocab_size(), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
        rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=None, eos_token_id=im_end, pad_token_id=pad,
        initializer_range=0.02, dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):  # fixed weights without touching the caller's global RNG
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=[im_end, pad], pad_token_id=pad)
    model.save_pretrained(dest)


def _set_tokenizer_class(folder: Path, name: str) -> None:
    import json

    path = Path(folder) / "tokenizer_config.json"
    data = json.loads(path.read_text())
    data["tokenizer_class"] = name
    path.write_text(json.dumps(data, indent=2) + "\n")
