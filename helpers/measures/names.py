"""The names the notebooks' parameters and the report card's options may take, in a module that imports nothing, so
that the runner's parameter check (helpers/runner/params.py) needs no torch.

METHOD_NAMES: the published methods of notebook 08 and the report card's --method (helpers/measures/methods scores
them); CONTROL_SCHEMES: the control schemes of notebook 05's last table and the report card's --controls
(helpers/measures/control_schemes.py draws them), ours first, then the field's draws; MASKING_VARIANTS: the maskings
notebook 05's masking table compares (helpers/studies/controls/masking.py runs them), each at the row group of the
code it is credited to.
"""

METHOD_NAMES = ("gaze", "ver", "localization", "sparsemm", "ocr", "retrieval", "qrhead", "ablation", "attribution")
CONTROL_SCHEMES = (
    "layer-matched",
    "any-layer",
    "bottom5",
    "same-band",
    "uniform-excluding",
    "uniform-overlapping",
    "per-layer-uniform",
    "unseeded",
)

# The maskings compared: label -> (engine masking, row group; None: the evaluation's row group), each as the code
# it is credited to applies it.
MASKING_VARIANTS = {
    # this paper: -inf on the image keys' logits (helpers/engine/masking.py, HIDE)
    "hide": ("hide", None),
    # CR400AF-A/SparseMM, sparsemm/qwen_model.py `qwen_flash_attn2_forward_Mask`: the query zeroed in every forward,
    # so at every row
    "query_zero (every row)": ("query_zero", None),
    # nightdessert/Retrieval_Head, needle_in_haystack_with_mask.py: the prompt but its last token is run unmasked
    # (`self.model_to_test(input_ids=input_ids[:,:-1], ...)`) and `decode` passes `block_list`, so the query is
    # zeroed only at the last prompt row and the generated rows (faiss_attn/source/modeling_llama.py,
    # `LlamaFlashAttention2.forward`); the MCQ reads its answer at the last row, so here: the last row
    "query_zero (last row)": ("query_zero", "last"),
    # the head's output zeroed (VERA), at every row
    "output_zero": ("output_zero", None),
    # this project's variant, not its authors' use: TianyunYoung/Hallucination-Attribution scales the image keys'
    # weights UP (1.0-3.5) to reweight attention; factor 0 here drops them without renormalising
    "rescale x0 (ours)": ("rescale", None),
    # jing-bi/visual-head: the logits set to 0 after the causal mask was added (a leak, reproduced on purpose)
    "leaky_uniform": ("leaky_uniform", None),
}
