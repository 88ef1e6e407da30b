# The streamspark package's types. Generated from the CLI's option tables by
# `python -m streamspark._stubgen`; do not edit (tests/python/test_stubs.py checks it).
import os
from typing import Any, Dict, Iterator, KeysView, List, Mapping, Optional, Sequence, Tuple, Union

# A model or hardware: a catalog name, a YAML path, or a dict in the YAML's shape.
Spec = Union[str, "os.PathLike[str]", Mapping[str, Any]]
# An option's value: text as the CLI reads it ("2 ms", "uniform:128:1024"), a number, or a list
# for comma-separated values ([1, 8, 64] for "1,8,64").
Value = Union[str, int, float, "os.PathLike[str]", Mapping[str, Any],
              Sequence[Union[str, int, float, "os.PathLike[str]", Mapping[str, Any]]]]

__version__: str

class Error(Exception):
    exit_code: int
    lines: List[str]
    command: str

class Diagnostic:
    file: str
    line: int
    column: int
    key: str
    message: str

class InputError(Error, ValueError):
    diagnostics: List[Diagnostic]
class RuntimeFailure(Error, RuntimeError): ...
class ToleranceExceeded(Error):
    result: Result
class NoPlanFound(Error):
    result: Result
class InternalError(Error): ...
class StreamSparkWarning(UserWarning): ...

class Record:
    def __getattr__(self, name: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...
    def __contains__(self, key: object) -> bool: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def keys(self) -> KeysView[str]: ...
    def to_dict(self) -> Dict[str, Any]: ...

class Result(Record):
    messages: List[str]
    warnings: List[str]
    command_line: List[str]

class AnalyzeResult(Result): ...
class CompareResult(Result): ...
class PlanResult(Result): ...
class ServeSimResult(Result): ...
class ValidationResult(Result): ...
class FitResult(Result): ...

class SweepResult:
    columns: Dict[str, Any]
    messages: List[str]
    warnings: List[str]
    command_line: List[str]
    def __len__(self) -> int: ...
    def to_dict(self) -> Dict[str, List[Any]]: ...
    def rows(self) -> List[Dict[str, Any]]: ...
    def to_pandas(self) -> Any: ...

def analyze(
    model: Spec,
    hardware: Spec,
    *,
    batch: Optional[Value] = None,
    prompt: Optional[Value] = None,
    generate: Optional[Value] = None,
    prefill_batch: Optional[Value] = None,
    cached_prompt: Optional[Value] = None,
    dtype: Optional[Value] = None,
    weights: Optional[Value] = None,
    attention_weights: Optional[Value] = None,
    activations: Optional[Value] = None,
    activation_storage: Optional[Value] = None,
    embedding_dtype: Optional[Value] = None,
    kv_dtype: Optional[Value] = None,
    weight_scheme: Optional[Value] = None,
    group_size: Optional[Value] = None,
    zero_points: bool = False,
    salient_fraction: Optional[Value] = None,
    outlier_fraction: Optional[Value] = None,
    mla_form: Optional[Value] = None,
    diffusion_steps: Optional[Value] = None,
    block_length: Optional[Value] = None,
    cache_prefix: bool = False,
    tp: Optional[Value] = None,
    pp: Optional[Value] = None,
    ep: Optional[Value] = None,
    replicas: Optional[Value] = None,
    microbatches: Optional[Value] = None,
    overlap_communication: bool = False,
    two_batch_overlap: bool = False,
    attention_dp: bool = False,
    redundant_experts: Optional[Value] = None,
    expert_imbalance: Optional[Value] = None,
    all_to_all: Optional[Value] = None,
    method: Optional[Value] = None,
    stack: Optional[Value] = None,
    bands_from: Optional[Value] = None,
    no_bands: bool = False,
    per_op: bool = False,
    no_naive: bool = False,
    allow_beyond_context: bool = False,
    speculative: Optional[Value] = None,
    plot: Optional[Value] = None,
) -> AnalyzeResult:
    """Per-phase FLOPs, bytes, time, memory and throughput of one model on one device, for each workload asked.

    Runs ``streamspark analyze`` in-process. Returns AnalyzeResult.

    Parameters (the CLI's options; lists for comma-separated values):
        model: --model: model name in model_zoo/ or a YAML path
        hardware: --hardware: hardware name in hardware/ or a YAML path
        batch: --batch: batch sizes: list or range, e.g. 1,64,256 or 1..512:x2 (default: 1)
        prompt: --prompt: prompt lengths (tokens), e.g. 128..4096:+128 (default: 1024)
        generate: --generate: tokens generated per sequence (>= 1) (default: 256)
        prefill_batch: --prefill-batch: sequences per prefill pass (0: the whole batch in one pass); bounds prefill activation memory (default: 0)
        cached_prompt: --cached-prompt: prompt tokens per sequence already in the KV cache (a prefix-cache hit): the prefill computes the rest, attending to them (fewer than every --prompt) (default: 0)
        dtype: --dtype: weights, activations, embedding and KV cache: fp32, bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, int8, int4 (default: bf16)
        weights: --weights: layer weight matrices only (e.g. int4, int3 for weight-only quantization)
        attention_weights: --attention-weights: attention projections (q, k, v, o) in this format instead of --weights (Llama 3.1's FP8 checkpoints: --dtype fp8 --attention-weights bf16)
        activations: --activations: activations; matrix multiplies run at this format's peak
        activation_storage: --activation-storage: the format activations are kept in between kernels, when not --activations (W8A8 FP8 stacks: --dtype fp8 --activation-storage bf16)
        embedding_dtype: --embedding-dtype: embedding table and lm head (default: the activations' stored format)
        kv_dtype: --kv-dtype: KV cache and recurrent state (default: the activations' stored format)
        weight_scheme: --weight-scheme: block-scaled layer weights: mxfp4 (FP4 in blocks of 32, E8M0 scales), nvfp4 (FP4 in blocks of 16, FP8 scales) or fp8-block (FP8, one FP32 scale per 128 x 128 block, as DeepSeek-V3's weights)
        group_size: --group-size: weight quantization group: one scale per this many input channels (0: none) (default: 0)
        zero_points: --zero-points [flag]: asymmetric groups: a zero point per group too
        salient_fraction: --salient-fraction: AWQ-style: fraction of input channels kept in fp16 (e.g. 0.01) (default: 0)
        outlier_fraction: --outlier-fraction: LLM.int8(): fraction of input features multiplied in fp16 (needs int8 activations) (default: 0)
        mla_form: --mla-form: MLA models: auto (naive prefill, absorbed decode), naive or absorbed (default: auto)
        diffusion_steps: --diffusion-steps: diffusion models: denoising steps per block (default: the model file's)
        block_length: --block-length: diffusion models: tokens per block (default: the model file's)
        cache_prefix: --cache-prefix [flag]: diffusion models: block diffusion with a KV cache of the prefix
        tp: --tp: tensor-parallel GPUs per pipeline stage (Megatron-LM splits; KV heads fewer than tp are replicated) (default: 1)
        pp: --pp: pipeline stages (each layer kind's count must divide) (default: 1)
        ep: --ep: expert-parallel GPUs of MoE layers: 1 (experts split like dense layers), the --tp value (whole experts spread over the stage's GPUs, all-to-all), or with --attention-dp any count (the replica's GPUs, across nodes) (default: 1)
        replicas: --replicas: data-parallel copies of the tp x pp replica, each serving its share (default: 1)
        microbatches: --microbatches: pipeline micro-batches per prefill pass (0: one per sequence) (default: 0)
        overlap_communication: --overlap-communication [flag]: count collectives as hidden behind computation (default: they add to the step)
        two_batch_overlap: --two-batch-overlap [flag]: run each pass as two micro-batches of half the sequences, one's communication beside the other's computation on two streams (DeepSeek-V3's dual micro-batch overlap; needs --pp 1)
        attention_dp: --attention-dp [flag]: attention data parallel with wide expert parallel: the replica is --ep GPUs, each running whole attention, dense layers and shared experts for its share of the sequences and (experts + redundant) / ep routed experts (needs --tp 1, --pp 1)
        redundant_experts: --redundant-experts: with --attention-dp: extra routed-expert copies a load balancer places (DeepSeek's EPLB: 32) (default: 0)
        expert_imbalance: --expert-imbalance: with --attention-dp: routed tokens of the busiest GPU over the mean (1: balanced) (default: 1)
        all_to_all: --all-to-all: with --attention-dp: throughput (a token crosses the network once per remote node, NVLink forwards it) or low-latency (every copy straight over the network) (default: throughput)
        method: --method: roofline (per-op max of compute and memory time), bandwidth (the lecture's first-order model) or calibrated (the roofline with measured efficiencies: a probed hardware file, or its achievable fractions); default: calibrated where the hardware file has calibration or achievable data, else roofline
        stack: --stack: serving-stack preset (stacks/NAME.yaml, or a path): its scheduler limits, KV memory accounting, host costs and (in serving simulations) CUDA-graph sizes, unless set here
        bands_from: --bands-from: measurement files (CSV or JSON lines, as validate --measured reads) whose rows' errors give the p10-p90 band beside each prediction (default: every CSV of the catalog's measurements/ folder)
        no_bands: --no-bands [flag]: print no prediction band (the validation rows are not predicted)
        per_op: --per-op [flag]: also list every operator of each phase
        no_naive: --no-naive [flag]: skip the cost of sampling without a KV cache (it steps through every token)
        allow_beyond_context: --allow-beyond-context [flag]: analyze prompt + generate beyond the model's max_context
        speculative: --speculative: also cost speculative decoding: draft=MODEL|self:layers=N,k=K,acceptance=A (or A1:A2:... per depth), or heads=medusa|eagle,k=K,acceptance=...
        plot: --plot: also write the roofline chart (ceilings, ridge, every operator of each phase) as SVG

    Raises InputError (the CLI's exit 2) with the CLI's message on bad input.
    """
    ...

def sweep(
    model: Spec,
    hardware: Spec,
    *,
    batch: Optional[Value] = None,
    prompt: Optional[Value] = None,
    generate: Optional[Value] = None,
    prefill_batch: Optional[Value] = None,
    dtype: Optional[Value] = None,
    weights: Optional[Value] = None,
    attention_weights: Optional[Value] = None,
    activations: Optional[Value] = None,
    activation_storage: Optional[Value] = None,
    embedding_dtype: Optional[Value] = None,
    kv_dtype: Optional[Value] = None,
    weight_scheme: Optional[Value] = None,
    group_size: Optional[Value] = None,
    zero_points: bool = False,
    salient_fraction: Optional[Value] = None,
    outlier_fraction: Optional[Value] = None,
    tp: Optional[Value] = None,
    pp: Optional[Value] = None,
    ep: Optional[Value] = None,
    replicas: Optional[Value] = None,
    microbatches: Optional[Value] = None,
    overlap_communication: bool = False,
    two_batch_overlap: bool = False,
    attention_dp: bool = False,
    redundant_experts: Optional[Value] = None,
    expert_imbalance: Optional[Value] = None,
    all_to_all: Optional[Value] = None,
    method: Optional[Value] = None,
    format: Optional[Value] = None,
    threads: Optional[Value] = None,
    allow_beyond_context: bool = False,
    strict: bool = False,
    quiet: bool = False,
    speculative: Optional[Value] = None,
) -> SweepResult:
    """A grid of configurations; one row per configuration, as columns.

    Runs ``streamspark sweep`` in-process. Returns SweepResult.

    Parameters (the CLI's options; lists for comma-separated values):
        model: --model: model names or paths, comma-separated
        hardware: --hardware: hardware names or paths, comma-separated
        batch: --batch: batch sizes: list or range, e.g. 1,64,256 or 1..512:x2 (default: 1)
        prompt: --prompt: prompt lengths (tokens), e.g. 128..4096:+128 (default: 1024)
        generate: --generate: tokens generated per sequence (>= 1) (default: 256)
        prefill_batch: --prefill-batch: sequences per prefill pass (0: the whole batch in one pass); bounds prefill activation memory (default: 0)
        dtype: --dtype: formats, comma-separated; each sets weights, activations, embedding and KV cache: fp32, bf16, fp16, fp8, int8, int4 (default: bf16)
        weights: --weights: layer weight matrices only (e.g. int4, int3 for weight-only quantization)
        attention_weights: --attention-weights: attention projections (q, k, v, o) in this format instead of --weights (Llama 3.1's FP8 checkpoints: --dtype fp8 --attention-weights bf16)
        activations: --activations: activations; matrix multiplies run at this format's peak
        activation_storage: --activation-storage: the format activations are kept in between kernels, when not --activations (W8A8 FP8 stacks: --dtype fp8 --activation-storage bf16)
        embedding_dtype: --embedding-dtype: embedding table and lm head (default: the activations' stored format)
        kv_dtype: --kv-dtype: KV cache and recurrent state (default: the activations' stored format)
        weight_scheme: --weight-scheme: block-scaled layer weights: mxfp4 (FP4 in blocks of 32, E8M0 scales), nvfp4 (FP4 in blocks of 16, FP8 scales) or fp8-block (FP8, one FP32 scale per 128 x 128 block, as DeepSeek-V3's weights)
        group_size: --group-size: weight quantization group: one scale per this many input channels (0: none) (default: 0)
        zero_points: --zero-points [flag]: asymmetric groups: a zero point per group too
        salient_fraction: --salient-fraction: AWQ-style: fraction of input channels kept in fp16 (e.g. 0.01) (default: 0)
        outlier_fraction: --outlier-fraction: LLM.int8(): fraction of input features multiplied in fp16 (needs int8 activations) (default: 0)
        tp: --tp: tensor-parallel GPUs per pipeline stage (Megatron-LM splits; KV heads fewer than tp are replicated) (default: 1)
        pp: --pp: pipeline stages (each layer kind's count must divide) (default: 1)
        ep: --ep: expert-parallel GPUs of MoE layers: 1 (experts split like dense layers), the --tp value (whole experts spread over the stage's GPUs, all-to-all), or with --attention-dp any count (the replica's GPUs, across nodes) (default: 1)
        replicas: --replicas: data-parallel copies of the tp x pp replica, each serving its share (default: 1)
        microbatches: --microbatches: pipeline micro-batches per prefill pass (0: one per sequence) (default: 0)
        overlap_communication: --overlap-communication [flag]: count collectives as hidden behind computation (default: they add to the step)
        two_batch_overlap: --two-batch-overlap [flag]: run each pass as two micro-batches of half the sequences, one's communication beside the other's computation on two streams (DeepSeek-V3's dual micro-batch overlap; needs --pp 1)
        attention_dp: --attention-dp [flag]: attention data parallel with wide expert parallel: the replica is --ep GPUs, each running whole attention, dense layers and shared experts for its share of the sequences and (experts + redundant) / ep routed experts (needs --tp 1, --pp 1)
        redundant_experts: --redundant-experts: with --attention-dp: extra routed-expert copies a load balancer places (DeepSeek's EPLB: 32) (default: 0)
        expert_imbalance: --expert-imbalance: with --attention-dp: routed tokens of the busiest GPU over the mean (1: balanced) (default: 1)
        all_to_all: --all-to-all: with --attention-dp: throughput (a token crosses the network once per remote node, NVLink forwards it) or low-latency (every copy straight over the network) (default: throughput)
        method: --method: roofline, bandwidth, or calibrated (a probed hardware file, or its achievable fractions); default: calibrated where the hardware file has calibration or achievable data, else roofline
        format: --format: csv or json (JSON lines) (default: csv)
        threads: --threads: worker threads (0: all cores) (default: 0)
        allow_beyond_context: --allow-beyond-context [flag]: include points where prompt + generate exceeds a model's max_context
        strict: --strict [flag]: fail (exit 2) on the first impossible point instead of skipping it
        quiet: --quiet [flag]: no progress on stderr
        speculative: --speculative: also cost speculative decoding at every point (spec_* columns): draft=MODEL|self:layers=N,k=K,acceptance=A, or heads=medusa|eagle,...

    Raises InputError (the CLI's exit 2) with the CLI's message on bad input.
    """
    ...

def compare(
    models: Spec,
    hardware: Spec,
    *,
    batch: Optional[Value] = None,
    prompt: Optional[Value] = None,
    generate: Optional[Value] = None,
    prefill_batch: Optional[Value] = None,
    dtype: Optional[Value] = None,
    weights: Optional[Value] = None,
    attention_weights: Optional[Value] = None,
    activations: Optional[Value] = None,
    activation_storage: Optional[Value] = None,
    embedding_dtype: Optional[Value] = None,
    kv_dtype: Optional[Value] = None,
    weight_scheme: Optional[Value] = None,
    group_size: Optional[Value] = None,
    zero_points: bool = False,
    salient_fraction: Optional[Value] = None,
    outlier_fraction: Optional[Value] = None,
    mla_form: Optional[Value] = None,
    diffusion_steps: Optional[Value] = None,
    block_length: Optional[Value] = None,
    cache_prefix: bool = False,
    tp: Optional[Value] = None,
    pp: Optional[Value] = None,
    ep: Optional[Value] = None,
    replicas: Optional[Value] = None,
    microbatches: Optional[Value] = None,
    overlap_communication: bool = False,
    two_batch_overlap: bool = False,
    attention_dp: bool = False,
    redundant_experts: Optional[Value] = None,
    expert_imbalance: Optional[Value] = None,
    all_to_all: Optional[Value] = None,
    method: Optional[Value] = None,
    allow_beyond_context: bool = False,
) -> CompareResult:
    """Several models side by side on one device.

    Runs ``streamspark compare`` in-process. Returns CompareResult.

    Parameters (the CLI's options; lists for comma-separated values):
        models: --models: model names or paths, comma-separated
        hardware: --hardware: hardware name in hardware/ or a YAML path
        batch: --batch: batch sizes: list or range, e.g. 1,64,256 or 1..512:x2 (default: 1)
        prompt: --prompt: prompt lengths (tokens), e.g. 128..4096:+128 (default: 1024)
        generate: --generate: tokens generated per sequence (>= 1) (default: 256)
        prefill_batch: --prefill-batch: sequences per prefill pass (0: the whole batch in one pass); bounds prefill activation memory (default: 0)
        dtype: --dtype: weights, activations, embedding and KV cache: fp32, bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, int8, int4 (default: bf16)
        weights: --weights: layer weight matrices only (e.g. int4, int3 for weight-only quantization)
        attention_weights: --attention-weights: attention projections (q, k, v, o) in this format instead of --weights (Llama 3.1's FP8 checkpoints: --dtype fp8 --attention-weights bf16)
        activations: --activations: activations; matrix multiplies run at this format's peak
        activation_storage: --activation-storage: the format activations are kept in between kernels, when not --activations (W8A8 FP8 stacks: --dtype fp8 --activation-storage bf16)
        embedding_dtype: --embedding-dtype: embedding table and lm head (default: the activations' stored format)
        kv_dtype: --kv-dtype: KV cache and recurrent state (default: the activations' stored format)
        weight_scheme: --weight-scheme: block-scaled layer weights: mxfp4 (FP4 in blocks of 32, E8M0 scales), nvfp4 (FP4 in blocks of 16, FP8 scales) or fp8-block (FP8, one FP32 scale per 128 x 128 block, as DeepSeek-V3's weights)
        group_size: --group-size: weight quantization group: one scale per this many input channels (0: none) (default: 0)
        zero_points: --zero-points [flag]: asymmetric groups: a zero point per group too
        salient_fraction: --salient-fraction: AWQ-style: fraction of input channels kept in fp16 (e.g. 0.01) (default: 0)
        outlier_fraction: --outlier-fraction: LLM.int8(): fraction of input features multiplied in fp16 (needs int8 activations) (default: 0)
        mla_form: --mla-form: MLA models: auto (naive prefill, absorbed decode), naive or absorbed (default: auto)
        diffusion_steps: --diffusion-steps: diffusion models: denoising steps per block (default: the model file's)
        block_length: --block-length: diffusion models: tokens per block (default: the model file's)
        cache_prefix: --cache-prefix [flag]: diffusion models: block diffusion with a KV cache of the prefix
        tp: --tp: tensor-parallel GPUs per pipeline stage (Megatron-LM splits; KV heads fewer than tp are replicated) (default: 1)
        pp: --pp: pipeline stages (each layer kind's count must divide) (default: 1)
        ep: --ep: expert-parallel GPUs of MoE layers: 1 (experts split like dense layers), the --tp value (whole experts spread over the stage's GPUs, all-to-all), or with --attention-dp any count (the replica's GPUs, across nodes) (default: 1)
        replicas: --replicas: data-parallel copies of the tp x pp replica, each serving its share (default: 1)
        microbatches: --microbatches: pipeline micro-batches per prefill pass (0: one per sequence) (default: 0)
        overlap_communication: --overlap-communication [flag]: count collectives as hidden behind computation (default: they add to the step)
        two_batch_overlap: --two-batch-overlap [flag]: run each pass as two micro-batches of half the sequences, one's communication beside the other's computation on two streams (DeepSeek-V3's dual micro-batch overlap; needs --pp 1)
        attention_dp: --attention-dp [flag]: attention data parallel with wide expert parallel: the replica is --ep GPUs, each running whole attention, dense layers and shared experts for its share of the sequences and (experts + redundant) / ep routed experts (needs --tp 1, --pp 1)
        redundant_experts: --redundant-experts: with --attention-dp: extra routed-expert copies a load balancer places (DeepSeek's EPLB: 32) (default: 0)
        expert_imbalance: --expert-imbalance: with --attention-dp: routed tokens of the busiest GPU over the mean (1: balanced) (default: 1)
        all_to_all: --all-to-all: with --attention-dp: throughput (a token crosses the network once per remote node, NVLink forwards it) or low-latency (every copy straight over the network) (default: throughput)
        method: --method: roofline, bandwidth, or calibrated (a probed hardware file, or its achievable fractions); default: calibrated where the hardware file has calibration or achievable data, else roofline
        allow_beyond_context: --allow-beyond-context [flag]: compare beyond a model's max_context

    Raises InputError (the CLI's exit 2) with the CLI's message on bad input.
    """
    ...

def plan(
    model: Spec,
    *,
    emit: Optional[Tuple[str, str]] = None,
    emit_model: Optional[Value] = None,
    hardware: Optional[Value] = None,
    dtype: Optional[Value] = None,
    weights: Optional[Value] = None,
    attention_weights: Optional[Value] = None,
    activations: Optional[Value] = None,
    activation_storage: Optional[Value] = None,
    embedding_dtype: Optional[Value] = None,
    kv_dtype: Optional[Value] = None,
    weight_scheme: Optional[Value] = None,
    group_size: Optional[Value] = None,
    zero_points: bool = False,
    salient_fraction: Optional[Value] = None,
    outlier_fraction: Optional[Value] = None,
    method: Optional[Value] = None,
    tp: Optional[Value] = None,
    pp: Optional[Value] = None,
    ep: Optional[Value] = None,
    max_batch: Optional[Value] = None,
    chunked_prefill: Optional[Value] = None,
    disaggregate: Optional[Value] = None,
    attention_dp: Optional[Value] = None,
    two_batch_overlap: Optional[Value] = None,
    redundant_experts: Optional[Value] = None,
    all_to_all: Optional[Value] = None,
    max_tokens: Optional[Value] = None,
    block_size: Optional[Value] = None,
    prefix_cache: bool = False,
    kv_offload: Optional[Value] = None,
    host_bandwidth: Optional[Value] = None,
    memory_fraction: Optional[Value] = None,
    stack: Optional[Value] = None,
    bands_from: Optional[Value] = None,
    no_bands: bool = False,
    confidence: Optional[Value] = None,
    trace: Optional[Value] = None,
    requests: Optional[Value] = None,
    rate: Optional[Value] = None,
    arrivals: Optional[Value] = None,
    prompt_len: Optional[Value] = None,
    output_len: Optional[Value] = None,
    shared_prefix_fraction: Optional[Value] = None,
    prefix_tokens: Optional[Value] = None,
    sessions: Optional[Value] = None,
    session_turns: Optional[Value] = None,
    seed: Optional[Value] = None,
    max_requests: Optional[Value] = None,
    slo_ttft_p90: Optional[Value] = None,
    slo_ttft_p99: Optional[Value] = None,
    slo_tpot_p90: Optional[Value] = None,
    slo_tpot_p99: Optional[Value] = None,
    slo_itl_p90: Optional[Value] = None,
    slo_itl_p99: Optional[Value] = None,
    slo_e2e: Optional[Value] = None,
    minimize: Optional[Value] = None,
    maximize: Optional[Value] = None,
    gpus: Optional[Value] = None,
    seeds: Optional[Value] = None,
    max_gpus: Optional[Value] = None,
    max_gpus_per_node: Optional[Value] = None,
    price: Optional[Union[str, Sequence[str]]] = None,
    top: Optional[Value] = None,
    rate_tolerance: Optional[Value] = None,
    min_headroom: Optional[Value] = None,
    whole_nodes: bool = False,
    max_configurations: Optional[Value] = None,
    no_prune: bool = False,
    plot: Optional[Value] = None,
    report: Optional[Value] = None,
    threads: Optional[Value] = None,
    quiet: bool = False,
) -> PlanResult:
    """The cheapest deployments that meet a request rate and latency objectives.

    Runs ``streamspark plan`` in-process. Returns PlanResult.

    Parameters (the CLI's options; lists for comma-separated values):
        emit: --emit [2 values]: also write the chosen deployment's launch commands, benchmark client and read-back scripts: --emit vllm|sglang|trtllm DIR
        emit_model: --emit-model: with --emit, the checkpoint to serve (default: the one the model file's source cites)
        model: --model: model names or paths, comma-separated
        hardware: --hardware: hardware names or paths, comma-separated (default: every GPU in hardware/ once, its profiled file where there is one)
        dtype: --dtype: formats, comma-separated; each sets weights, activations, embedding and KV cache: fp32, bf16, fp16, fp8, int8, int4 (default: bf16)
        weights: --weights: layer weight matrices only (e.g. int4, int3 for weight-only quantization)
        attention_weights: --attention-weights: attention projections (q, k, v, o) in this format instead of --weights (Llama 3.1's FP8 checkpoints: --dtype fp8 --attention-weights bf16)
        activations: --activations: activations; matrix multiplies run at this format's peak
        activation_storage: --activation-storage: the format activations are kept in between kernels, when not --activations (W8A8 FP8 stacks: --dtype fp8 --activation-storage bf16)
        embedding_dtype: --embedding-dtype: embedding table and lm head (default: the activations' stored format)
        kv_dtype: --kv-dtype: KV cache and recurrent state (default: the activations' stored format)
        weight_scheme: --weight-scheme: block-scaled layer weights: mxfp4 (FP4 in blocks of 32, E8M0 scales), nvfp4 (FP4 in blocks of 16, FP8 scales) or fp8-block (FP8, one FP32 scale per 128 x 128 block, as DeepSeek-V3's weights)
        group_size: --group-size: weight quantization group: one scale per this many input channels (0: none) (default: 0)
        zero_points: --zero-points [flag]: asymmetric groups: a zero point per group too
        salient_fraction: --salient-fraction: AWQ-style: fraction of input channels kept in fp16 (e.g. 0.01) (default: 0)
        outlier_fraction: --outlier-fraction: LLM.int8(): fraction of input features multiplied in fp16 (needs int8 activations) (default: 0)
        method: --method: iteration cost: roofline, bandwidth or calibrated; default: calibrated where the hardware file has calibration or achievable data, else roofline
        tp: --tp: tensor-parallel degrees, e.g. 1,2,4,8 or 1..8 (default: 1,2,4,8)
        pp: --pp: pipeline stages, e.g. 1,2 (default: 1)
        ep: --ep: mixture-of-experts models: experts spread over the TP GPUs (on), or not (off), or both (default: off,on)
        max_batch: --max-batch: scheduler's sequences per iteration, a list (default 256, or the --stack preset's)
        chunked_prefill: --chunked-prefill: off, on, or off,on (default off, or the --stack preset's)
        disaggregate: --disaggregate: also search disaggregated deployments: units of R prefill and S decode replicas for each R:S given (e.g. 1:1,1:2,2:1), each pool on any --hardware at any --tp (pp 1)
        attention_dp: --attention-dp: mixture-of-experts models: also search attention data parallel with wide expert parallel over each GPU count given (e.g. 8,16,32: the replica's GPUs, across nodes; --max-batch is the replica's, all its GPUs together)
        two_batch_overlap: --two-batch-overlap: two-micro-batch overlap of communication with computation: off, on, or off,on, for every layout that communicates (pp 1) (default: off)
        redundant_experts: --redundant-experts: with --attention-dp: extra routed-expert copies a load balancer places (default: 0)
        all_to_all: --all-to-all: with --attention-dp: throughput or low-latency (default: throughput)
        max_tokens: --max-tokens: tokens per iteration (default 8192, or the --stack preset's)
        block_size: --block-size: paged KV: tokens per block (default 16, or the --stack preset's)
        prefix_cache: --prefix-cache [flag]: each replica caches prompt blocks across requests (a system prompt, conversations' histories) as serve-sim --prefix-cache does; the bounds take every declared shared prefix as a hit
        kv_offload: --kv-offload: with --prefix-cache: host memory per GPU for the cache's evicted blocks, e.g. '200 GB' (over the hardware file's host_link; a GPU without one is left out unless --host-bandwidth)
        host_bandwidth: --host-bandwidth: with --kv-offload: the device-host link for every GPU, e.g. '64 GB/s'
        memory_fraction: --memory-fraction: usable fraction of device memory (default 0.9, or the --stack preset's; KV gets it minus weights and activations, or as the preset accounts it)
        stack: --stack: serving-stack preset (stacks/NAME.yaml, or a path): its scheduler limits, KV memory accounting, host costs and (in serving simulations) CUDA-graph sizes, unless set here
        bands_from: --bands-from: measurement files (CSV or JSON lines, as validate --measured reads) whose rows' errors give the p10-p90 band beside each prediction (default: every CSV of the catalog's measurements/ folder)
        no_bands: --no-bands [flag]: print no prediction band (the validation rows are not predicted)
        confidence: --confidence: plan so that each objective holds at this probability by the validation bands (0.9: every limit x (1 + the p10 error of its stack, GPU and metric class); in [0.5, 1); GPUs without a band are left out)
        trace: --trace: requests from a file (.csv or .jsonl: arrival_s, prompt_tokens, output_tokens[, shared_prefix_tokens, session_id]) instead of a generated workload
        requests: --requests: requests to generate (default: 1000)
        rate: --rate: target requests/s of the whole deployment (with --trace: default the trace's own rate)
        arrivals: --arrivals: poisson or constant (default: poisson)
        prompt_len: --prompt-len: prompt lengths: N, fixed:N, uniform:A:B, lognormal:MEDIAN:SIGMA[:MAX] (default: fixed:512)
        output_len: --output-len: output lengths, same forms (default: fixed:128)
        shared_prefix_fraction: --shared-prefix-fraction: fraction of requests that start with a common prefix (default: 0)
        prefix_tokens: --prefix-tokens: length of the common prefix (default: 0)
        sessions: --sessions: conversations at a time: requests are dealt to them in turn, each prompt the conversation so far plus --prompt-len new tokens (0: none) (default: 0)
        session_turns: --session-turns: turns of a conversation before its slot starts a new one (default: 4)
        seed: --seed: workload seed (default: 0)
        max_requests: --max-requests: the most requests one simulation replays (generated or from --trace) (default: 200000)
        slo_ttft_p90: --slo-ttft-p90: p90 time to first token, e.g. '1 s'
        slo_ttft_p99: --slo-ttft-p99: p99 time to first token
        slo_tpot_p90: --slo-tpot-p90: p90 time per output token, e.g. '50 ms'
        slo_tpot_p99: --slo-tpot-p99: p99 time per output token
        slo_itl_p90: --slo-itl-p90: p90 inter-token latency: of every gap between two of a request's tokens, pooled over the requests, e.g. '50 ms'
        slo_itl_p99: --slo-itl-p99: p99 inter-token latency
        slo_e2e: --slo-e2e: p90 end-to-end latency
        minimize: --minimize: cost (default) or gpus
        maximize: --maximize: rate: the highest rate a fleet of --gpus serves
        gpus: --gpus: the fleet's GPUs (with --maximize rate)
        seeds: --seeds: plan once per workload sample (seeds, e.g. 1,2,3): the most demanding sample's plan is shown, with every sample's answer and the spread of its capacity
        max_gpus: --max-gpus: most GPUs a deployment may use (0: no limit) (default: 0)
        max_gpus_per_node: --max-gpus-per-node: largest TP group (0: each hardware's topology.gpus_per_node) (default: 0)
        price: --price [repeatable: a list gives it several times]: USD per GPU-hour overriding the hardware file's, e.g. h100-sxm=2.49 (repeatable, or comma-separated)
        top: --top: ranked deployments to show (and to rank exactly) (default: 10)
        rate_tolerance: --rate-tolerance: the rate bisection stops when failing / passing rate <= 1 + this (at least 0.0001) (default: 0.02)
        min_headroom: --min-headroom: spare capacity each deployment keeps above the target rate, e.g. 20% (default: 0%)
        whole_nodes: --whole-nodes [flag]: rent whole nodes (topology.gpus_per_node GPUs): GPUs and price are the nodes', spare GPUs run more replicas
        max_configurations: --max-configurations: the most configurations the grid may span before plan refuses it (default: 20000)
        no_prune: --no-prune [flag]: simulate every configuration that fits, not only those whose bound can reach the top
        plot: --plot: write the Pareto chart (throughput per GPU vs tokens/s per user) as SVG
        report: --report: write a one-file HTML report
        threads: --threads: worker threads (0: all cores) (default: 0)
        quiet: --quiet [flag]: no progress on stderr

    Raises InputError (the CLI's exit 2) with the CLI's message on bad input.
    """
    ...

def serve_sim(
    model: Spec,
    hardware: Optional[Spec] = None,
    *,
    dtype: Optional[Value] = None,
    weights: Optional[Value] = None,
    attention_weights: Optional[Value] = None,
    activations: Optional[Value] = None,
    activation_storage: Optional[Value] = None,
    embedding_dtype: Optional[Value] = None,
    kv_dtype: Optional[Value] = None,
    weight_scheme: Optional[Value] = None,
    group_size: Optional[Value] = None,
    zero_points: bool = False,
    salient_fraction: Optional[Value] = None,
    outlier_fraction: Optional[Value] = None,
    tp: Optional[Value] = None,
    pp: Optional[Value] = None,
    ep: Optional[Value] = None,
    replicas: Optional[Value] = None,
    microbatches: Optional[Value] = None,
    overlap_communication: bool = False,
    two_batch_overlap: bool = False,
    attention_dp: bool = False,
    redundant_experts: Optional[Value] = None,
    expert_imbalance: Optional[Value] = None,
    all_to_all: Optional[Value] = None,
    disaggregate: Optional[Value] = None,
    kv_link: Optional[Value] = None,
    kv_link_bandwidth: Optional[Value] = None,
    kv_layerwise: bool = False,
    method: Optional[Value] = None,
    kv_memory: Optional[Value] = None,
    memory_fraction: Optional[Value] = None,
    trace: Optional[Value] = None,
    requests: Optional[Value] = None,
    rate: Optional[Value] = None,
    arrivals: Optional[Value] = None,
    prompt_len: Optional[Value] = None,
    output_len: Optional[Value] = None,
    shared_prefix_fraction: Optional[Value] = None,
    prefix_tokens: Optional[Value] = None,
    sessions: Optional[Value] = None,
    session_turns: Optional[Value] = None,
    seed: Optional[Value] = None,
    max_requests: Optional[Value] = None,
    policy: Optional[Value] = None,
    max_batch: Optional[Value] = None,
    max_tokens: Optional[Value] = None,
    chunked_prefill: bool = False,
    no_chunked_prefill: bool = False,
    kv: Optional[Value] = None,
    block_size: Optional[Value] = None,
    max_output: Optional[Value] = None,
    preemption: Optional[Value] = None,
    host_bandwidth: Optional[Value] = None,
    slo_ttft: Optional[Value] = None,
    slo_tpot: Optional[Value] = None,
    slo_itl: Optional[Value] = None,
    prefix_cache: bool = False,
    kv_offload: Optional[Value] = None,
    stack: Optional[Value] = None,
    bands_from: Optional[Value] = None,
    no_bands: bool = False,
    requests_csv: Optional[Value] = None,
    concurrency: Optional[Value] = None,
    slo_ttft_p90: Optional[Value] = None,
    slo_ttft_p99: Optional[Value] = None,
    slo_tpot_p90: Optional[Value] = None,
    slo_tpot_p99: Optional[Value] = None,
    slo_itl_p90: Optional[Value] = None,
    slo_itl_p99: Optional[Value] = None,
    slo_e2e: Optional[Value] = None,
    speculative: Optional[Value] = None,
) -> ServeSimResult:
    """A serving workload simulated request by request.

    Runs ``streamspark serve-sim`` in-process. Returns ServeSimResult.

    Parameters (the CLI's options; lists for comma-separated values):
        model: --model: model name in model_zoo/ or a YAML path
        hardware: --hardware: hardware name in hardware/ or a YAML path (required unless --disaggregate)
        dtype: --dtype: weights, activations, embedding and KV cache: fp32, bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, int8, int4 (default: bf16)
        weights: --weights: layer weight matrices only (e.g. int4, int3 for weight-only quantization)
        attention_weights: --attention-weights: attention projections (q, k, v, o) in this format instead of --weights (Llama 3.1's FP8 checkpoints: --dtype fp8 --attention-weights bf16)
        activations: --activations: activations; matrix multiplies run at this format's peak
        activation_storage: --activation-storage: the format activations are kept in between kernels, when not --activations (W8A8 FP8 stacks: --dtype fp8 --activation-storage bf16)
        embedding_dtype: --embedding-dtype: embedding table and lm head (default: the activations' stored format)
        kv_dtype: --kv-dtype: KV cache and recurrent state (default: the activations' stored format)
        weight_scheme: --weight-scheme: block-scaled layer weights: mxfp4 (FP4 in blocks of 32, E8M0 scales), nvfp4 (FP4 in blocks of 16, FP8 scales) or fp8-block (FP8, one FP32 scale per 128 x 128 block, as DeepSeek-V3's weights)
        group_size: --group-size: weight quantization group: one scale per this many input channels (0: none) (default: 0)
        zero_points: --zero-points [flag]: asymmetric groups: a zero point per group too
        salient_fraction: --salient-fraction: AWQ-style: fraction of input channels kept in fp16 (e.g. 0.01) (default: 0)
        outlier_fraction: --outlier-fraction: LLM.int8(): fraction of input features multiplied in fp16 (needs int8 activations) (default: 0)
        tp: --tp: tensor-parallel GPUs per pipeline stage (Megatron-LM splits; KV heads fewer than tp are replicated) (default: 1)
        pp: --pp: pipeline stages (each layer kind's count must divide) (default: 1)
        ep: --ep: expert-parallel GPUs of MoE layers: 1 (experts split like dense layers), the --tp value (whole experts spread over the stage's GPUs, all-to-all), or with --attention-dp any count (the replica's GPUs, across nodes) (default: 1)
        replicas: --replicas: data-parallel copies of the tp x pp replica, each serving its share (default: 1)
        microbatches: --microbatches: pipeline micro-batches per prefill pass (0: one per sequence) (default: 0)
        overlap_communication: --overlap-communication [flag]: count collectives as hidden behind computation (default: they add to the step)
        two_batch_overlap: --two-batch-overlap [flag]: run each pass as two micro-batches of half the sequences, one's communication beside the other's computation on two streams (DeepSeek-V3's dual micro-batch overlap; needs --pp 1)
        attention_dp: --attention-dp [flag]: attention data parallel with wide expert parallel: the replica is --ep GPUs, each running whole attention, dense layers and shared experts for its share of the sequences and (experts + redundant) / ep routed experts (needs --tp 1, --pp 1)
        redundant_experts: --redundant-experts: with --attention-dp: extra routed-expert copies a load balancer places (DeepSeek's EPLB: 32) (default: 0)
        expert_imbalance: --expert-imbalance: with --attention-dp: routed tokens of the busiest GPU over the mean (1: balanced) (default: 1)
        all_to_all: --all-to-all: with --attention-dp: throughput (a token crosses the network once per remote node, NVLink forwards it) or low-latency (every copy straight over the network) (default: throughput)
        disaggregate: --disaggregate: prefill and decode on two pools, the prompt's KV moved between them: prefill=HW:tpN[:ppM][xR],decode=HW:tpN[:ppM][xS] (R, S replicas; HW may differ)
        kv_link: --kv-link: with --disaggregate, the link the KV moves over: auto (intra-node when both pools are one hardware file whose GPUs fit a node, else inter-node), intra-node, inter-node or none (no cost) (default: auto)
        kv_link_bandwidth: --kv-link-bandwidth: with --disaggregate, one prefill replica's KV link bandwidth, e.g. '50 GB/s' (default: the topology's per-GPU link times the GPUs sending at once)
        kv_layerwise: --kv-layerwise [flag]: with --disaggregate, stream each prompt's KV layer by layer as the prefill computes it (the transfer may start with the prompt; default: when it ends)
        method: --method: iteration cost: roofline, bandwidth or calibrated, as in analyze; default: calibrated where the hardware file has calibration or achievable data, else roofline
        kv_memory: --kv-memory: bytes for the KV cache of each GPU, e.g. '40 GB' (default: see --memory-fraction)
        memory_fraction: --memory-fraction: usable fraction of device memory (default 0.9, or the --stack preset's); the KV cache gets it minus weights and activations (or as the preset accounts it)
        trace: --trace: requests from a file (.csv or .jsonl: arrival_s, prompt_tokens, output_tokens[, shared_prefix_tokens, session_id]) instead of a generated workload
        requests: --requests: requests to generate (default: 1000)
        rate: --rate: arrivals per second (0: all at time 0) (default: 0)
        arrivals: --arrivals: poisson or constant (default: poisson)
        prompt_len: --prompt-len: prompt lengths: N, fixed:N, uniform:A:B, lognormal:MEDIAN:SIGMA[:MAX] (default: fixed:512)
        output_len: --output-len: output lengths, same forms (default: fixed:128)
        shared_prefix_fraction: --shared-prefix-fraction: fraction of requests that start with a common prefix (default: 0)
        prefix_tokens: --prefix-tokens: length of the common prefix (default: 0)
        sessions: --sessions: conversations at a time: requests are dealt to them in turn, each prompt the conversation so far plus --prompt-len new tokens (0: none) (default: 0)
        session_turns: --session-turns: turns of a conversation before its slot starts a new one (default: 4)
        seed: --seed: workload seed (default: 0)
        max_requests: --max-requests: the most requests one simulation replays (generated or from --trace) (default: 200000)
        policy: --policy: continuous or static (default: continuous)
        max_batch: --max-batch: sequences per iteration (static: the batch it waits for); default 256, or the --stack preset's
        max_tokens: --max-tokens: tokens per iteration; default 8192, or the --stack preset's
        chunked_prefill: --chunked-prefill [flag]: split prompts over iterations to fill the token budget
        no_chunked_prefill: --no-chunked-prefill [flag]: whole prompts in one iteration (the default, unless a --stack preset chunks)
        kv: --kv: paged or contiguous (auto: paged for continuous batching) (default: auto)
        block_size: --block-size: paged KV: tokens per block; default 16, or the --stack preset's
        max_output: --max-output: contiguous KV reserves prompt + this many tokens (0: up to max_context) (default: 0)
        preemption: --preemption: recompute or swap, when the KV cache is full (default: recompute)
        host_bandwidth: --host-bandwidth: device-host link for swap preemption (and serve-sim's --kv-offload), e.g. '64 GB/s' (default: the hardware file's host_link)
        slo_ttft: --slo-ttft: TTFT objective for goodput, e.g. '500 ms'
        slo_tpot: --slo-tpot: TPOT objective for goodput, e.g. '50 ms'
        slo_itl: --slo-itl: inter-token objective for goodput: every gap between two of a request's tokens, e.g. '50 ms'
        prefix_cache: --prefix-cache [flag]: cache prompt blocks across requests (a system prompt, a conversation's history) and reuse them, evicting the least recently used idle ones (paged KV, continuous batching, recompute preemption)
        kv_offload: --kv-offload: with --prefix-cache: host memory per GPU for the cache's evicted blocks, e.g. '200 GB'; a hit there loads them back (both ways at --host-bandwidth)
        stack: --stack: serving-stack preset (stacks/NAME.yaml, or a path): its scheduler limits, KV memory accounting, host costs and (in serving simulations) CUDA-graph sizes, unless set here
        bands_from: --bands-from: measurement files (CSV or JSON lines, as validate --measured reads) whose rows' errors give the p10-p90 band beside each prediction (default: every CSV of the catalog's measurements/ folder)
        no_bands: --no-bands [flag]: print no prediction band (the validation rows are not predicted)
        requests_csv: --requests-csv: also write one CSV row per request
        concurrency: --concurrency: at most N requests in flight, a benchmark client's limit (bench_serving --max-concurrency): each sent at its arrival or when one finishes, and timed from then
        slo_ttft_p90: --slo-ttft-p90: p90 time to first token, e.g. '1 s'
        slo_ttft_p99: --slo-ttft-p99: p99 time to first token
        slo_tpot_p90: --slo-tpot-p90: p90 time per output token, e.g. '50 ms'
        slo_tpot_p99: --slo-tpot-p99: p99 time per output token
        slo_itl_p90: --slo-itl-p90: p90 inter-token latency: of every gap between two of a request's tokens, pooled over the requests, e.g. '50 ms'
        slo_itl_p99: --slo-itl-p99: p99 inter-token latency
        slo_e2e: --slo-e2e: p90 end-to-end latency
        speculative: --speculative: speculative decoding: draft=MODEL|self:layers=N,k=K,acceptance=A[:A2..] or heads=medusa|eagle|mtp,k=K,acceptance=A1:A2:.. (see analyze)

    Raises InputError (the CLI's exit 2) with the CLI's message on bad input.
    """
    ...

def validate_measured(
    measured: Spec,
    *,
    model: Optional[Value] = None,
    hardware: Optional[Value] = None,
    method: Optional[Value] = None,
    tolerance: Optional[Value] = None,
    per_row: bool = False,
    intervals: bool = False,
    junit: Optional[Value] = None,
    stack: Optional[Value] = None,
    json: Optional[Value] = None,
) -> ValidationResult:
    """Predictions against a measurement file of serving-stack runs (`validate --measured`).

    Runs ``streamspark validate --measured FILE`` in-process. Returns ValidationResult.

    Parameters (the CLI's options; lists for comma-separated values):
        model: --model: model name in model_zoo/ or a YAML path
        hardware: --hardware: this machine's hardware file (from `streamspark probe`); with --measured, hardware files (comma-separated) replacing the catalog entries of their names or of the GPUs they profile (from `fit`; without -H, the catalog's profiled files for their GPUs)
        measured: --measured: compare with a measurement file of serving-stack runs (.csv or .jsonl) instead of running the runtime
        method: --method: calibrated, roofline or bandwidth (default: calibrated)
        tolerance: --tolerance: exit 4 when a phase's median |error| exceeds P percent (P or P%, >= 0); with --measured also per metric: ttft=20%,tpot=10%,e2e=..,output_tok_s=..
        per_row: --per-row [flag]: with --measured: every row's metric against the tolerance, not the metrics' medians
        intervals: --intervals [flag]: with --measured: each stack, hardware and metric's p10-p90 error band, its leave-one-out coverage and its coverage with each model and layout held out
        junit: --junit: with --measured: also write the checks as JUnit XML to this file (for CI dashboards)
        stack: --stack: with --measured: every row's serving-stack preset (default: the preset each row's stack and stack_version columns match, if any)
        json: --json: also write the JSON report of the same run to this file (atomically)

    Raises InputError (the CLI's exit 2) with the CLI's message on bad input.
    """
    ...

def fit(
    hardware: Spec,
    *,
    measured: Optional[Value] = None,
    profile: Optional[Value] = None,
    rows: Optional[Value] = None,
    profiled_on: Optional[Value] = None,
    fit_models: Optional[Value] = None,
    host_from: Optional[Value] = None,
    host_stack: Optional[Value] = None,
    attention_from: Optional[Value] = None,
    attention_fit_stride: Optional[Value] = None,
    gemm: Optional[Value] = None,
    name: Optional[Value] = None,
    profile_source: Optional[Value] = None,
    stack: Optional[Value] = None,
    output: Optional[Value] = None,
) -> FitResult:
    """A serving stack's efficiencies and overheads fitted to measurements, or a GPU's operator costs to a published per-operator profile.

    Runs ``streamspark fit`` in-process. Returns FitResult.

    Parameters (the CLI's options; lists for comma-separated values):
        measured: --measured: measurement file (.csv or .jsonl), or several comma-separated: their rows fitted and held out together
        profile: --profile: a measured-operator table (from import-profile): fit GEMM rates, small-operator costs, collective curves and host overhead instead
        hardware: --hardware: the hardware to fit (catalog name or file)
        rows: --rows: hardware: the rows measured on it; all: every row (the parameters are fractions of each GPU's achievable rates) (default: hardware)
        profiled_on: --profiled-on: with --profile: fit the rows measured on this hardware (default: --hardware's); another GPU's rows carry over as fractions of each GPU's datasheet roofline
        fit_models: --fit-models: with --profile: the models whose rows are fitted, as the profile names them (default meta-llama/Llama-2-7b-hf); every other model's rows are held out
        host_from: --host-from: with --profile: the hardware whose host rows give the host overhead (default: --profiled-on's)
        host_stack: --host-stack: with --profile: the serving stack whose host code the host rows timed (Vidur's: vLLM); the file says so, and runs under another stack's preset take the preset's host costs instead of these
        attention_from: --attention-from: with --profile: the hardware whose attention rows give the attention kernel's costs (default: --profiled-on's); another GPU's fit carries over as the same fractions of the roofline, launch overhead and query tile
        attention_fit_stride: --attention-fit-stride: with --profile: fit the attention rows whose KV context is a multiple of this many tokens; the others are held out (default: 256)
        gemm: --gemm: with --profile: roofline (efficiencies and a launch cost fitted to every measured shape) or table (the measured times, interpolated between shapes) (default: roofline)
        name: --name: with --profile: the written file's name (default: <hardware>-profiled)
        profile_source: --profile-source: with --profile: where the profile comes from (repository, commit, path), for the written file's provenance
        stack: --stack: serving-stack preset (stacks/NAME.yaml, or a path): its scheduler limits, KV memory accounting, host costs and (in serving simulations) CUDA-graph sizes, unless set here
        output: --output: hardware YAML to write with the fit (atomically)

    Raises InputError (the CLI's exit 2) with the CLI's message on bad input.
    """
    ...
