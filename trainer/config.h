// Config: everything that defines a training run, read from a flat JSON object and overridden
// by `--set key=value`, validated against the job's shape before any work starts.
//
// The batch is global: `batch_size` sequences per optimizer step, split over data-parallel
// ranks and gradient-accumulation micro-steps (micro-batch = batch_size / (dp · grad_accum)).
// Any (ranks, grad_accum) with the same batch_size trains the same model up to rounding.
//
// The ranks form a mesh of dp × tp × pp (tp varying fastest, so a tensor-parallel group is
// consecutive ranks, then dp, then pp); dp = 0 takes the ranks left over by tp and pp.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model.h"

namespace weft::trainer {

// shard_group's value for "node".
inline constexpr int kShardGroupNode = -1;

struct Config {
  // Model.
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  int seq_len = 64;
  // Batch and schedule.
  int batch_size = 12;  // global sequences per step
  int grad_accum = 1;
  int steps = 200;
  uint64_t seed = 1337;
  // AdamW and learning rate: linear warm-up to lr, cosine decay to lr · min_lr_ratio.
  double lr = 1e-3;
  double min_lr_ratio = 0.1;
  int warmup_steps = 20;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // global-norm clip; 0 disables
  // "none": lr as given. "sqrt" / "linear": lr · (batch_size / lr_base_batch)^(1/2 or 1).
  std::string lr_scaling = "none";
  int lr_base_batch = 12;
  // Data: a text file or a directory of text files ("fortunes" names the system's corpus).
  std::string data = "fortunes";
  double val_fraction = 0.1;
  // Cadences (in steps; 0 disables).
  int eval_every = 50;
  int eval_batches = 4;  // validation sequences = eval_batches · batch_size
  int checkpoint_every = 100;
  int keep_checkpoints = 3;
  // Execution.
  int threads = 1;            // OpenBLAS threads per rank
  double bucket_cap_mb = 25;  // gradient reducer buckets
  double first_bucket_mb = 1;
  // ZeRO stage (data_parallel.h): 0 plain data parallel; 1 optimizer state sharded; 2 also
  // gradients; 3 also parameters (gathered per unit around its use).
  int zero = 0;
  // Hybrid sharding: shard inside groups of this many consecutive ranks and replicate across the
  // groups (0: one group of every rank; kShardGroupNode, "node" in a config: the ranks of each
  // node, from the hosts the communicator found).
  int shard_group = 0;
  double max_gathered_mb = 1024;  // zero = 3: gathered parameters alive at once (prefetch cap)
  std::string prefetch = "true";  // zero = 3: gather the next unit while this one computes
  // Mesh: tensor-parallel and pipeline degrees, and data-parallel (0: world / (tp · pp)).
  int tp = 1;
  int pp = 1;
  int dp = 0;
  // tp > 1: split the regions between linears over the tensor-parallel group's token rows.
  std::string sequence_parallel = "false";
  // pp > 1: each data-parallel rank's share of an accumulation step is cut into micro_batches,
  // run through the stages by the schedule ("gpipe", "1f1b" or "interleaved", with pp_chunks
  // model chunks per stage).
  int micro_batches = 1;
  // Activation recomputation: "none", "selective" (the attention core) or "full" (whole blocks).
  std::string recompute = "none";
  int recompute_layers = -1;  // recompute=full: only the first K blocks of each chunk (-1: all)
  // Mixed precision (model.h's ActivationOptions): "fp32", "bf16" or "fp16", with fp32 master
  // weights and moments; the data-parallel gradient reduction in "fp32", "bf16" or "fp16".
  std::string precision = "fp32";
  std::string grad_reduce_dtype = "fp32";
  // fp16's dynamic loss scaling (loss_scaler.h): the first scale, and the clean steps after which
  // it doubles.
  double loss_scale = 65536;
  int loss_scale_window = 1000;
  // Testing: at this step (from 0), rank 0's gradient gets an infinity before the overflow check
  // (-1: never).
  int inject_overflow_step = -1;
  // Offload (offload/): "none", "optimizer" (AdamW's moments in files under offload_dir, default
  // OUT/offload, streamed through each step) or "optimizer+params" (zero=3: this rank's parameter
  // slices too, read before each unit's gather). memory_budget ("512M", "2G"; empty: none)
  // offloads what the per-rank figures say must go, moments first. Disk tiles are
  // offload_tile_blocks blocks of offload_block_kb KiB at most (fewer and smaller for small
  // moments, down to 64 KiB blocks).
  // Gradient compression over the data-parallel ranks: "none", "fp16", "bf16", "int8", "onebit"
  // or "topk" (zero=0: a CompressedAllReduce per bucket; zero=1-3 without hybrid sharding: a
  // CompressedReduceScatter per unit; error feedback either way), or "powersgd" (zero=0, rank
  // compression_rank, powersgd.h); topk_ratio of the elements for topk; after
  // compression_warmup_steps uncompressed steps.
  std::string compression = "none";
  int compression_rank = 4;
  double topk_ratio = 0.01;
  int compression_warmup_steps = 0;
  std::string offload = "none";
  std::string offload_dir;
  std::string memory_budget;
  int offload_block_kb = 1024;
  int offload_tile_blocks = 4;
  std::string pp_schedule = "1f1b";
  int pp_chunks = 1;
  int sample_tokens = 200;  // generated at the end (0: none)
  std::string sample_prompt = "The ";

  ModelShape shape() const;
  // What the model keeps of its activations and in which precision (recompute, recompute_layers,
  // precision).
  ActivationOptions activations() const;
  // The data-parallel degree on `world_size` ranks.
  int data_parallel(int world_size) const { return dp > 0 ? dp : world_size / (tp * pp); }
  // Sequences per data-parallel rank and accumulation step (split into micro_batches under pp).
  int micro_batch(int world_size) const {
    return batch_size / (data_parallel(world_size) * grad_accum);
  }
  // The learning rate after the scaling rule, before the schedule.
  double scaled_lr() const;
};

// Parses a flat JSON object whose keys are Config's field names. Unknown keys are errors.
absl::StatusOr<Config> ParseConfig(absl::string_view json, absl::string_view source);
absl::StatusOr<Config> LoadConfig(const std::string& path);
// `key=value` as on the command line.
absl::Status ApplyOverride(Config* config, absl::string_view assignment);
// Checks every field and the fit with `world_size` ranks, listing every check that fails.
absl::Status Validate(const Config& config, int world_size);
// The config as a flat JSON object that ParseConfig reads back to the same values.
std::string ToJson(const Config& config);

}  // namespace weft::trainer
