#!/usr/bin/env python3
"""ResNet-50 (torchvision, random weights), ImageNet-shaped classification
training on random 224x224 images."""
from training_loop import train_image_classifier

train_image_classifier(__doc__, "resnet50", default_batch=32)
