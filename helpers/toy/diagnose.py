"""Diagnostics for where the toy model gets a panel's place from (used while tuning the curriculum).

    .venv/bin/python -m helpers.toy.diagnose [MODEL_DIR]

- place probe: a linear classifier, fit on the image tokens of fresh strips, that tells each token's
  panel from a layer's hidden state; near 1 when the place is in the tokens' content (from the vision
  tower's position table), near chance (1/6) when it is not;
- prompt shift: exact-match accuracy with words put before the prompt; a collapse means the answer
  depends on the prompt's fixed distance from the image (rotary positions), not on the panel's content.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from helpers.engine.inputs import build_batch
from helpers.stimuli.corpora import SyntheticCorpus
from helpers.storage.paths import TOY_MODEL
from helpers.toy.evaluate import answer_exact_match
from helpers.toy.tasks import build_task_items

PREFIXES = ("", "Look. ", "Look at the image. ", "Look at the image now, please. ")


def image_token_states(model, processor, items) -> list[torch.Tensor]:
    """Per layer (input embeddings first), the hidden states of the items' image tokens: [n, tokens, d]."""
    inputs = build_batch(processor, items).inputs
    with torch.no_grad():
        hidden = model(**inputs, output_hidden_states=True).hidden_states
    image = inputs["input_ids"] == processor.image_token_id  # [n, T]
    return [h[image].reshape(len(items), -1, h.shape[-1]) for h in hidden]


def place_probe_accuracy(train: torch.Tensor, test: torch.Tensor, steps: int = 300) -> float:
    """Held-out accuracy of a softmax regression from a token's state [n, tokens, d] to its token index."""
    n_tokens = train.shape[1]
    x, x_test = train.reshape(-1, train.shape[-1]), test.reshape(-1, test.shape[-1])
    mean, std = x.mean(0), x.std(0) + 1e-6
    x, x_test = (x - mean) / std, (x_test - mean) / std
    y, y_test = torch.arange(n_tokens).repeat(train.shape[0]), torch.arange(n_tokens).repeat(test.shape[0])
    probe = torch.nn.Linear(x.shape[1], n_tokens)
    optimizer = torch.optim.Adam(probe.parameters(), lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(probe(x), y) + 1e-3 * probe.weight.square().sum()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return (probe(x_test).argmax(1) == y_test).float().mean().item()


def strips(seed: int, n: int) -> list:
    return [
        item
        for corpus in ("cm", "co")
        for item in build_task_items("strip_ord", SyntheticCorpus(corpus), n // 2, seed)
    ]


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else TOY_MODEL
    torch.set_num_threads(1)
    torch.manual_seed(0)  # the probes start from a fixed draw
    model = AutoModelForImageTextToText.from_pretrained(source).eval()
    processor = AutoProcessor.from_pretrained(source)
    train, test = (
        image_token_states(model, processor, strips(1, 120)),
        image_token_states(model, processor, strips(2, 120)),
    )
    for layer in range(len(train)):
        print(f"place probe, layer {layer}: {place_probe_accuracy(train[layer], test[layer]):.3f}")
    for kind in ("strip_describe", "strip_ord", "strip_ref"):
        items = build_task_items(kind, SyntheticCorpus("cm"), 60, 4242)
        for prefix in PREFIXES:
            shifted = [
                replace(
                    item,
                    prompt=prefix + item.prompt,
                    query_span=(item.query_span[0] + len(prefix), item.query_span[1] + len(prefix)),
                )
                for item in items
            ]
            with torch.no_grad():
                accuracy = answer_exact_match(model, processor, shifted).float().mean().item()
            print(f"{kind}, prefix {prefix!r}: exact {accuracy:.3f}")


if __name__ == "__main__":
    main()
