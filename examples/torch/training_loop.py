"""The loop the example training scripts share: Adam, fp32, a fixed batch of
random data, one JSON line per iteration ({"iteration", "seconds", "loss"}).

Under `python3 -m umlab_torch` each iteration is marked, so umlab's report
splits faults and traffic by iteration; without umlab the scripts run as
plain PyTorch.
"""
import argparse
import json
import time

import torch

try:
    import umlab_torch
except ImportError:  # plain PyTorch
    umlab_torch = None


def arguments(description, default_batch):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--batch", type=int, default=default_batch, help="samples per batch")
    parser.add_argument("--iterations", type=int, default=5, help="training iterations")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the data")
    return parser.parse_args()


def train(model, loss_of, iterations):
    """loss_of(model) -> the loss of one batch. Prints one line per iteration."""
    model = model.cuda().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for iteration in range(iterations):
        torch.cuda.synchronize()
        if umlab_torch is not None:
            umlab_torch.mark_iteration()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        print(json.dumps({"iteration": iteration, "seconds": time.perf_counter() - start,
                          "loss": loss.item()}), flush=True)


def train_image_classifier(description, constructor, default_batch):
    """A torchvision classifier (random weights) trained on random 224x224
    ImageNet-shaped images: what train_resnet50.py, train_vit.py and
    train_mobilenet.py share. `constructor` names torchvision.models' function."""
    import torchvision
    args = arguments(description, default_batch)
    torch.manual_seed(args.seed)
    model = getattr(torchvision.models, constructor)()
    images = torch.randn(args.batch, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (args.batch,), device="cuda")
    train(model, lambda m: torch.nn.functional.cross_entropy(m(images), labels), args.iterations)
