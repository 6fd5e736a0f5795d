"""torch.compile for the decoder layers of a loaded model's text backbone.

On the CPU most of a head-set copy's time outside the matmuls goes to elementwise passes over its
activations (RMSNorm of queries and keys, rotary embeddings, residual adds), one pass per eager op; inductor
fuses them. The head-probe attention stays eager (it is registered with ``torch.compiler.disable``), so reads
and interventions run unchanged inside the compiled layers.

Results equal the eager layers' to float32 rounding (tests/test_compiled.py: every engine path, 1e-5 on
logits; 1.2e-7 measured on letter probabilities), as results of a different number of copies per forward
do, so the result cache does not tell the two apart. A forward that continues a key-value cache (generate)
stays eager: the cache's per-layer state would make each layer its own graph. run_head_sets' continuation of
an item's first rows passes no cache (the attention function adds those rows' keys), so it runs compiled.
Each new kind of forward (one item, copies of one) compiles on its first call, a few seconds each; forked
workers inherit what their parent compiled, and inductor keeps compiled kernels on disk for later processes.
Compilation runs in the calling process (inductor's ``compile_threads`` = 1): a worker forked from a process
that had started inductor's pool of compile workers would wait forever on that pool.
"""

import logging

import torch
import torch._dynamo.config
import torch._inductor.config

RECOMPILE_LIMIT = 64


def compile_decoder_layers(loaded) -> None:
    """Compile every decoder layer of ``loaded``'s text backbone in place (dynamic shapes: one graph serves
    any number of copies and positions). Calling it again changes nothing."""
    if getattr(loaded, "compiled", False):
        return
    torch._inductor.config.compile_threads = 1
    # each kind of forward (one item, copies of it, continued rows, the batch-1 layers below the first intervened
    # one) is a graph for the layer and one for its attention module's forward, both behind transformers'
    # deprecation wrapper, one code object: dynamo's default limit of 8 graphs per code object sent later kinds
    # back to eager (with a warning in the notebook)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "No CUDA runtime is found" on CPU
    for layer in loaded.adapter.language_model(loaded.model).layers:
        layer.forward = _without_cache(torch.compile(layer.forward, dynamic=True), layer.forward)
    loaded.compiled = True


def _without_cache(compiled, eager):
    """The compiled forward for forwards without a key-value cache; the eager one for a continuation of a cache
    (generate), whose per-layer cache state would make every layer a new graph."""

    def forward(*args, **kwargs):
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        return (eager if cache is not None else compiled)(*args, **kwargs)

    return forward
