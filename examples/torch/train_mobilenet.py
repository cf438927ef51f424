#!/usr/bin/env python3
"""MobileNetV2 (torchvision mobilenet_v2, random weights), ImageNet-shaped
classification training on random 224x224 images."""
from training_loop import train_image_classifier

train_image_classifier(__doc__, "mobilenet_v2", default_batch=64)
