#!/usr/bin/env python3
"""ViT-B/16 (torchvision vit_b_16, random weights), ImageNet-shaped
classification training on random 224x224 images."""
from training_loop import train_image_classifier

train_image_classifier(__doc__, "vit_b_16", default_batch=16)
