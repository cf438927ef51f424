#!/usr/bin/env python3
"""BERT base (transformers BertForMaskedLM from BertConfig, random weights),
masked-LM training on random tokens at 512 positions."""
import torch
import transformers

from training_loop import arguments, train

args = arguments(__doc__, default_batch=8)
torch.manual_seed(args.seed)
config = transformers.BertConfig()
model = transformers.BertForMaskedLM(config)
tokens = torch.randint(0, config.vocab_size, (args.batch, config.max_position_embeddings),
                       device="cuda")
train(model, lambda m: m(input_ids=tokens, labels=tokens).loss, args.iterations)
