"""torch.compile for the decoder layers of a loaded model's text backbone.

On the CPU most of a head-set copy's time outside the matmuls goes to elementwise passes over its
activations (RMSNorm of queries and keys, rotary embeddings, residual adds, the attention's scale, mask and
softmax), one pass per eager op; inductor fuses them. Each layer is one graph with its attention inside where
the attention is softmax(q k^T s + mask) v in fp32 on the CPU with at most SMALL_KEYS keys and the probe only
hides or steers (attention.in_graph_inputs): the layer's wrapper runs the probe's guards and bookkeeping first
and hands the graph the mask and the intervention as tensors (the set's heads, the bias at the hit keys). Reads
and the other maskings run the head-probe attention's eager path, as a graph break inside the layer.

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
import torch.fx.experimental._config

from helpers.engine import attention

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
    # one symbol per dynamic size, even where two sizes are equal when a graph is first traced: run_head_sets runs
    # 2048 // T copies of T - p0 rows, equal for a 47-token item, and a graph traced with batch == rows indexes its
    # tensors through floor divisions of that one symbol (bench_figures.sizing: such a call 1.05x slower)
    torch.fx.experimental._config.use_duck_shape = False
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "No CUDA runtime is found" on CPU
    adapter = loaded.adapter
    modules = dict(zip(adapter.candidate_layers, adapter.attention_modules(loaded.model)))  # layer -> attention
    for index, layer in enumerate(adapter.language_model(loaded.model).layers):
        compiled = torch.compile(layer.forward, dynamic=True)
        layer.forward = _without_cache(compiled, layer.forward, modules.get(index))
    loaded.compiled = True


def _without_cache(compiled, eager, module):
    """The compiled forward for forwards without a key-value cache, given the in-graph attention's inputs for
    ``module`` (the layer's attention module; None: not a candidate layer) where it takes them; the eager one for a
    continuation of a cache (generate), whose per-layer cache state would make every layer a new graph."""

    def forward(hidden_states, *args, **kwargs):
        if kwargs.get("cache", kwargs.get("past_key_values")) is not None:
            return eager(hidden_states, *args, **kwargs)
        mask = kwargs.get("attention_mask")
        dense = None if module is None else attention.in_graph_inputs(module, hidden_states, mask)
        if dense is not None:
            kwargs[attention.IN_GRAPH] = dense
        return compiled(hidden_states, *args, **kwargs)

    return forward
