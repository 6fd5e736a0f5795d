"""torch.compile for the decoder layers of a loaded model's text backbone.

On the CPU most of a head-set copy's time outside the matmuls goes to elementwise passes over its
activations (RMSNorm of queries and keys, rotary embeddings, residual adds, the attention's scale, mask and
softmax), one pass per eager op; inductor fuses them. Each layer is one graph with its attention inside where
the attention is softmax(q k^T s + mask) v in fp32 on the CPU with at most SMALL_KEYS keys and the probe only
hides or steers (attention.in_graph_inputs): the layer's wrapper runs the probe's guards and bookkeeping first
and hands the graph the mask and the intervention as tensors (the set's heads, the bias at the hit keys). Reads
and the other maskings run the head-probe attention's eager path, as a graph break inside the layer. The few
(rows, keys) shapes a run repeats get graphs of their own, with static rows and keys (_LayerForward).

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

STATIC_SHAPES = 8  # (rows, keys) pairs per layer given graphs with static rows and keys; later pairs run symbolic
RECOMPILE_LIMIT = 96  # graphs per layer: kinds of forward x (STATIC_SHAPES + the symbolic one)


def compile_decoder_layers(loaded) -> None:
    """Compile every decoder layer of ``loaded``'s text backbone in place (see _LayerForward). Calling it again
    changes nothing."""
    if getattr(loaded, "compiled", False):
        return
    torch._inductor.config.compile_threads = 1
    # each kind of forward (one item, copies of it, continued rows, the batch-1 layers below the first intervened
    # one) at each static shape is a graph for the layer and one for its attention module's forward, both behind
    # transformers' deprecation wrapper, one code object shared by every layer: dynamo's default limits (8 graphs
    # per layer, 256 in all) sent later kinds back to eager (with a warning in the notebook)
    layers = loaded.adapter.language_model(loaded.model).layers
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    torch._dynamo.config.accumulated_recompile_limit = max(
        torch._dynamo.config.accumulated_recompile_limit, 2 * RECOMPILE_LIMIT * len(layers)
    )
    # one symbol per dynamic size, even where two sizes are equal when a graph is first traced: run_head_sets runs
    # 2048 // T copies of T - p0 rows, equal for a 47-token item, and a graph traced with batch == rows indexes its
    # tensors through floor divisions of that one symbol (bench_figures.sizing: such a call 1.05x slower)
    torch.fx.experimental._config.use_duck_shape = False
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "No CUDA runtime is found" on CPU
    adapter = loaded.adapter
    modules = dict(zip(adapter.candidate_layers, adapter.attention_modules(loaded.model)))  # layer -> attention
    for index, layer in enumerate(layers):
        layer.forward = _LayerForward(layer.forward, modules.get(index))
    loaded.compiled = True


class _LayerForward:
    """A decoder layer's forward through one of two compiled graphs, or eager.

    - Static: the attention inside the graph (attention.in_graph_inputs) at one of the layer's first STATIC_SHAPES
      (rows, keys) pairs. Rows and keys are constants of the graph and the batch a symbol (every tensor argument's
      first dimension where it equals the batch, the rotary tables included: one left unmarked pins the batch of
      the rest). There the causal rows run in blocks (attention.causal_blocks), which a symbolic row count would make
      several times slower (inductor bounds them by floor divisions of the symbol).
    - Symbolic (every size a symbol): every other forward without a key-value cache, the attention inside the graph
      with its rows whole where it takes the in-graph inputs, else the eager attention as a graph break.
    - Eager: a continuation of a key-value cache (generate), whose per-layer state would make every call a graph.
    """

    def __init__(self, eager, module):
        self.eager = eager
        self.module = module  # the layer's attention module; None: not a candidate layer
        self.symbolic = torch.compile(eager, dynamic=True)
        self.static = torch.compile(eager, dynamic=False)  # the batch marked symbolic at each call
        self.static_shapes: set[tuple[int, int]] = set()

    def __call__(self, hidden_states, *args, **kwargs):
        if kwargs.get("cache", kwargs.get("past_key_values")) is not None:
            return self.eager(hidden_states, *args, **kwargs)
        mask = kwargs.get("attention_mask")
        dense = None if self.module is None else attention.in_graph_inputs(self.module, hidden_states, mask)
        if dense is None:
            return self.symbolic(hidden_states, *args, **kwargs)
        shape = tuple(dense[0].shape[-2:])  # (rows, keys)
        if shape not in self.static_shapes and len(self.static_shapes) >= STATIC_SHAPES:
            return self.symbolic(hidden_states, *args, **kwargs, **{attention.IN_GRAPH: (*dense, False)})
        self.static_shapes.add(shape)
        kwargs[attention.IN_GRAPH] = (*dense, attention.causal_rows(dense[0]))
        _mark_batch(hidden_states.shape[0], (hidden_states, args, kwargs))
        return self.static(hidden_states, *args, **kwargs)


def _mark_batch(batch: int, values) -> None:
    """Mark the first dimension of every tensor in ``values`` (nested tuples, lists, dicts) that is ``batch`` long
    as a symbol of the static graph (a batch of 1 stays a constant, as dynamo specialises it anyway)."""
    if isinstance(values, torch.Tensor):
        if batch > 1 and values.dim() and values.shape[0] == batch:
            torch._dynamo.maybe_mark_dynamic(values, 0)
    elif isinstance(values, (tuple, list)):
        for value in values:
            _mark_batch(batch, value)
    elif isinstance(values, dict):
        for value in values.values():
            _mark_batch(batch, value)
