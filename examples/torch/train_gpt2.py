#!/usr/bin/env python3
"""GPT-2 small (transformers GPT2LMHeadModel from GPT2Config, random weights),
language-model training on random tokens at 1024 positions."""
import torch
import transformers

from training_loop import arguments, train

args = arguments(__doc__, default_batch=1)
torch.manual_seed(args.seed)
config = transformers.GPT2Config()
model = transformers.GPT2LMHeadModel(config)
tokens = torch.randint(0, config.vocab_size, (args.batch, config.n_positions), device="cuda")
train(model, lambda m: m(input_ids=tokens, labels=tokens).loss, args.iterations)
