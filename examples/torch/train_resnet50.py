#!/usr/bin/env python3
"""ResNet-50 (torchvision, random weights), ImageNet-shaped classification
training on random 224x224 images."""
import torch
import torchvision

from training_loop import arguments, train

args = arguments(__doc__, default_batch=32)
torch.manual_seed(args.seed)
model = torchvision.models.resnet50()
images = torch.randn(args.batch, 3, 224, 224, device="cuda")
labels = torch.randint(0, 1000, (args.batch,), device="cuda")
train(model, lambda m: torch.nn.functional.cross_entropy(m(images), labels), args.iterations)
