#include "config.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ops.h"
#include "weft/comm/byte_size.h"
#include "weft/comm/compression.h"
#include "weft/comm/json.h"

namespace weft::trainer {
namespace {

using Member =
    std::variant<int Config::*, uint64_t Config::*, double Config::*, std::string Config::*>;

const std::vector<std::pair<const char*, Member>>& Fields() {
  static const auto* fields = new std::vector<std::pair<const char*, Member>>{
      {"n_layer", &Config::n_layer},
      {"n_head", &Config::n_head},
      {"n_embd", &Config::n_embd},
      {"seq_len", &Config::seq_len},
      {"batch_size", &Config::batch_size},
      {"grad_accum", &Config::grad_accum},
      {"steps", &Config::steps},
      {"seed", &Config::seed},
      {"lr", &Config::lr},
      {"min_lr_ratio", &Config::min_lr_ratio},
      {"warmup_steps", &Config::warmup_steps},
      {"weight_decay", &Config::weight_decay},
      {"beta1", &Config::beta1},
      {"beta2", &Config::beta2},
      {"eps", &Config::eps},
      {"grad_clip", &Config::grad_clip},
      {"lr_scaling", &Config::lr_scaling},
      {"lr_base_batch", &Config::lr_base_batch},
      {"data", &Config::data},
      {"val_fraction", &Config::val_fraction},
      {"eval_every", &Config::eval_every},
      {"eval_batches", &Config::eval_batches},
      {"checkpoint_every", &Config::checkpoint_every},
      {"keep_checkpoints", &Config::keep_checkpoints},
      {"threads", &Config::threads},
      {"bucket_cap_mb", &Config::bucket_cap_mb},
      {"first_bucket_mb", &Config::first_bucket_mb},
      {"zero", &Config::zero},
      {"shard_group", &Config::shard_group},
      {"max_gathered_mb", &Config::max_gathered_mb},
      {"prefetch", &Config::prefetch},
      {"tp", &Config::tp},
      {"pp", &Config::pp},
      {"dp", &Config::dp},
      {"sequence_parallel", &Config::sequence_parallel},
      {"micro_batches", &Config::micro_batches},
      {"recompute", &Config::recompute},
      {"recompute_layers", &Config::recompute_layers},
      {"precision", &Config::precision},
      {"grad_reduce_dtype", &Config::grad_reduce_dtype},
      {"loss_scale", &Config::loss_scale},
      {"loss_scale_window", &Config::loss_scale_window},
      {"inject_overflow_step", &Config::inject_overflow_step},
      {"compression", &Config::compression},
      {"topk_ratio", &Config::topk_ratio},
      {"compression_rank", &Config::compression_rank},
      {"compression_warmup_steps", &Config::compression_warmup_steps},
      {"offload", &Config::offload},
      {"offload_dir", &Config::offload_dir},
      {"memory_budget", &Config::memory_budget},
      {"offload_block_kb", &Config::offload_block_kb},
      {"offload_tile_blocks", &Config::offload_tile_blocks},
      {"pp_schedule", &Config::pp_schedule},
      {"pp_chunks", &Config::pp_chunks},
      {"sample_tokens", &Config::sample_tokens},
      {"sample_prompt", &Config::sample_prompt},
  };
  return *fields;
}

std::string KnownKeys() {
  std::vector<std::string> names;
  for (const auto& [name, member] : Fields()) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

absl::Status SetField(Config* config, absl::string_view key, absl::string_view text, bool quoted) {
  if (key == "shard_group" && text == "node") {
    config->shard_group = kShardGroupNode;
    return absl::OkStatus();
  }
  for (const auto& [name, member] : Fields()) {
    if (key != name) continue;
    auto bad = [&](const char* what) {
      return absl::InvalidArgumentError(
          absl::StrCat("config key \"", key, "\": \"", text, "\" is not ", what));
    };
    if (const auto* m = std::get_if<int Config::*>(&member)) {
      if (quoted || !absl::SimpleAtoi(text, &(config->**m))) return bad("an integer");
    } else if (const auto* m = std::get_if<uint64_t Config::*>(&member)) {
      if (quoted || !absl::SimpleAtoi(text, &(config->**m))) return bad("an unsigned integer");
    } else if (const auto* m = std::get_if<double Config::*>(&member)) {
      if (quoted || !absl::SimpleAtod(text, &(config->**m))) return bad("a number");
    } else {
      config->*std::get<std::string Config::*>(member) = std::string(text);
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown config key \"", key, "\"; known keys: ", KnownKeys()));
}

}  // namespace

ModelShape Config::shape() const {
  ModelShape s;
  s.n_layer = n_layer;
  s.n_head = n_head;
  s.n_embd = n_embd;
  s.seq_len = seq_len;
  return s;
}

ActivationOptions Config::activations() const {
  ActivationOptions a;
  a.recompute = recompute == "full"        ? Recompute::kFull
                : recompute == "selective" ? Recompute::kSelective
                                           : Recompute::kNone;
  a.recompute_layers = recompute_layers;
  a.precision = precision == "bf16"   ? Precision::kBFloat16
                : precision == "fp16" ? Precision::kFloat16
                                      : Precision::kFloat32;
  return a;
}

double Config::scaled_lr() const {
  const double ratio = static_cast<double>(batch_size) / lr_base_batch;
  if (lr_scaling == "linear") return lr * ratio;
  if (lr_scaling == "sqrt") return lr * std::sqrt(ratio);
  return lr;
}

absl::StatusOr<Config> ParseConfig(absl::string_view json, absl::string_view source) {
  absl::StatusOr<JsonValue> document = ParseJson(json);
  if (!document.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", document.status().message()));
  }
  if (document->type != JsonValue::Type::kObject) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": a config is one JSON object"));
  }
  // Configs are flat: string keys with string or number values.
  Config config;
  for (size_t i = 0; i < document->names.size(); ++i) {
    const JsonValue& value = document->values[i];
    const bool quoted = value.type == JsonValue::Type::kString;
    if (value.type == JsonValue::Type::kBool) {  // for the true/false settings
      if (absl::Status s =
              SetField(&config, document->names[i], value.boolean ? "true" : "false", false);
          !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
      }
      continue;
    }
    if (!quoted && value.type != JsonValue::Type::kNumber) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": config key \"", document->names[i],
                       "\": values are strings, numbers or booleans"));
    }
    if (absl::Status s = SetField(&config, document->names[i], value.text, quoted); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
    }
  }
  return config;
}

absl::StatusOr<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read config file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

absl::Status ApplyOverride(Config* config, absl::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set expects key=value, got \"", assignment, "\""));
  }
  const absl::string_view key = assignment.substr(0, eq);
  const absl::string_view value = assignment.substr(eq + 1);
  // Strings need no quotes on the command line; numbers are checked by the field's type.
  bool is_string = false;
  for (const auto& [name, member] : Fields()) {
    if (key == name) is_string = std::holds_alternative<std::string Config::*>(member);
  }
  return SetField(config, key, value, is_string);
}

absl::Status Validate(const Config& c, int world_size) {
  std::vector<std::string> errors;
  auto require = [&](bool ok, std::string message) {
    if (!ok) errors.push_back(std::move(message));
  };
  require(c.n_layer >= 1, absl::StrCat("n_layer must be >= 1 (got ", c.n_layer, ")"));
  require(c.n_head >= 1, absl::StrCat("n_head must be >= 1 (got ", c.n_head, ")"));
  require(
      c.n_embd >= 1 && c.n_embd <= ops::kMaxLayerNormWidth,
      absl::StrCat("n_embd must be in [1, ", ops::kMaxLayerNormWidth, "] (got ", c.n_embd, ")"));
  require(c.n_head < 1 || c.n_embd % c.n_head == 0,
          absl::StrCat("n_embd (", c.n_embd, ") must be divisible by n_head (", c.n_head, ")"));
  require(c.seq_len >= 2, absl::StrCat("seq_len must be >= 2 (got ", c.seq_len, ")"));
  require(c.steps >= 1, absl::StrCat("steps must be >= 1 (got ", c.steps, ")"));
  require(c.grad_accum >= 1, absl::StrCat("grad_accum must be >= 1 (got ", c.grad_accum, ")"));
  require(c.batch_size >= 1, absl::StrCat("batch_size must be >= 1 (got ", c.batch_size, ")"));
  // The mesh: dp × tp × pp = world size, and every cut the tensor-parallel layers make.
  require(c.tp >= 1, absl::StrCat("tp must be >= 1 (got ", c.tp, ")"));
  require(c.pp >= 1, absl::StrCat("pp must be >= 1 (got ", c.pp, ")"));
  require(c.dp >= 0, absl::StrCat("dp must be >= 0, 0 for the ranks left (got ", c.dp, ")"));
  const int dp = c.tp >= 1 && c.pp >= 1 ? c.data_parallel(world_size) : 0;
  if (c.tp >= 1 && c.pp >= 1 && c.dp >= 0) {
    require(dp >= 1 && dp * c.tp * c.pp == world_size,
            c.dp > 0
                ? absl::StrCat("the world size (", world_size, " ranks) must equal dp × tp × pp (",
                               c.dp, " × ", c.tp, " × ", c.pp, " = ", c.dp * c.tp * c.pp, ")")
                : absl::StrCat("the world size (", world_size,
                               " ranks) must be a multiple of tp × pp (", c.tp, " × ", c.pp, " = ",
                               c.tp * c.pp, ")"));
  }
  if (c.tp > 1) {
    const int vocab = ModelShape().vocab;
    require(c.n_head % c.tp == 0, absl::StrCat("n_head (", c.n_head, ") must be divisible by tp (",
                                               c.tp, "): each rank holds whole attention heads"));
    require(c.n_embd % c.tp == 0,
            absl::StrCat("n_embd (", c.n_embd, ") must be divisible by tp (", c.tp, ")"));
    require(4 * c.n_embd % c.tp == 0, absl::StrCat("the MLP width 4·n_embd (", 4 * c.n_embd,
                                                   ") must be divisible by tp (", c.tp, ")"));
    require(vocab % c.tp == 0,
            absl::StrCat("the vocabulary (", vocab, ") must be divisible by tp (", c.tp, ")"));
  }
  require(
      c.sequence_parallel == "true" || c.sequence_parallel == "false",
      absl::StrCat("sequence_parallel must be true or false (got \"", c.sequence_parallel, "\")"));
  if (c.sequence_parallel == "true" && c.tp > 1) {
    require(c.seq_len % c.tp == 0,
            absl::StrCat("sequence_parallel: seq_len (", c.seq_len, ") must be divisible by tp (",
                         c.tp, "): every rank holds an equal share of the token rows"));
  }
  require(c.recompute == "none" || c.recompute == "selective" || c.recompute == "full",
          absl::StrCat("recompute must be none, selective or full (got \"", c.recompute, "\")"));
  require(c.recompute_layers == -1 || (c.recompute == "full" && c.recompute_layers >= 0),
          absl::StrCat("recompute_layers=", c.recompute_layers,
                       " needs recompute=full and a count >= 0 (-1: every block)"));
  const auto is_dtype = [](const std::string& t) {
    return t == "fp32" || t == "bf16" || t == "fp16";
  };
  require(is_dtype(c.precision),
          absl::StrCat("precision must be fp32, bf16 or fp16 (got \"", c.precision, "\")"));
  require(is_dtype(c.grad_reduce_dtype),
          absl::StrCat("grad_reduce_dtype must be fp32, bf16 or fp16 (got \"", c.grad_reduce_dtype,
                       "\")"));
  require(
      c.compression == "none" || c.compression == "powersgd" ||
          ParseCodec(c.compression).has_value(),
      absl::StrCat("compression must be none, fp16, bf16, int8, onebit, topk or powersgd (got \"",
                   c.compression, "\")"));
  require(c.compression_rank >= 1,
          absl::StrCat("compression_rank (", c.compression_rank, ") must be >= 1"));
  require(c.compression == "none" || c.grad_reduce_dtype == "fp32",
          absl::StrCat("compression=", c.compression, " needs grad_reduce_dtype=fp32 (got ",
                       c.grad_reduce_dtype, "): it replaces the gradient collectives"));
  require(c.compression != "powersgd" || c.zero == 0,
          absl::StrCat("compression=powersgd needs zero=0 (got zero=", c.zero,
                       "): it compresses whole gradient matrices, which ZeRO's units cut apart"));
  require(c.topk_ratio > 0 && c.topk_ratio <= 1 && c.compression_warmup_steps >= 0,
          absl::StrCat("topk_ratio (", c.topk_ratio, ") must be in (0, 1] and ",
                       "compression_warmup_steps (", c.compression_warmup_steps, ") >= 0"));
  require(c.offload == "none" || c.offload == "optimizer" || c.offload == "optimizer+params",
          absl::StrCat("offload must be none, optimizer or optimizer+params (got \"", c.offload,
                       "\")"));
  require(c.offload != "optimizer+params" || c.zero == 3,
          absl::StrCat("offload=optimizer+params needs zero=3 (got zero=", c.zero,
                       "): only ZeRO-3 keeps parameters as slices apart from the units in use"));
  require(c.memory_budget.empty() || ParseByteSize(c.memory_budget).has_value(),
          absl::StrCat("memory_budget \"", c.memory_budget,
                       "\" is not a size (bytes, or with K, M or G: \"512M\", \"2G\")"));
  require(c.offload_block_kb >= 4 && c.offload_block_kb % 4 == 0 && c.offload_tile_blocks >= 1,
          absl::StrCat("offload_block_kb (", c.offload_block_kb,
                       ") must be a multiple of 4 and offload_tile_blocks (", c.offload_tile_blocks,
                       ") at least 1"));
  require(c.loss_scale >= 1 && c.loss_scale_window >= 1,
          absl::StrCat("loss_scale (", c.loss_scale, ") must be >= 1 and loss_scale_window (",
                       c.loss_scale_window, ") >= 1"));
  // The pipeline: whole chunks of blocks per stage, whole micro-batches, a schedule that exists.
  require(c.micro_batches >= 1,
          absl::StrCat("micro_batches must be >= 1 (got ", c.micro_batches, ")"));
  require(c.pp_chunks >= 1, absl::StrCat("pp_chunks must be >= 1 (got ", c.pp_chunks, ")"));
  require(
      c.pp_schedule == "gpipe" || c.pp_schedule == "1f1b" || c.pp_schedule == "interleaved",
      absl::StrCat("pp_schedule must be gpipe, 1f1b or interleaved (got \"", c.pp_schedule, "\")"));
  if (c.pp == 1) {
    require(c.micro_batches == 1, absl::StrCat("micro_batches=", c.micro_batches,
                                               " needs pp > 1 (grad_accum splits a rank's batch)"));
    require(c.pp_chunks == 1, absl::StrCat("pp_chunks=", c.pp_chunks, " needs pp > 1"));
  }
  if (c.pp > 1 && c.pp_chunks >= 1) {
    require(c.n_layer % (c.pp * c.pp_chunks) == 0,
            absl::StrCat("n_layer (", c.n_layer, ") must be divisible by pp × pp_chunks (", c.pp,
                         " × ", c.pp_chunks, " = ", c.pp * c.pp_chunks,
                         "): every stage holds whole, equal chunks of blocks"));
    require(c.zero <= 1, absl::StrCat("zero=", c.zero,
                                      " with pp > 1: pipeline parallelism composes with zero=0 "
                                      "or 1 (each micro-batch's backward would reduce again)"));
  }
  if (c.pp >= 1 && c.pp_chunks >= 1 && c.recompute_layers > 0) {
    const int per_chunk = c.n_layer / (c.pp * c.pp_chunks);
    require(c.recompute_layers <= per_chunk,
            absl::StrCat("recompute_layers (", c.recompute_layers, ") exceeds the ", per_chunk,
                         " blocks of each chunk"));
  }
  require((c.pp_schedule == "interleaved") == (c.pp_chunks > 1),
          absl::StrCat("pp_chunks=", c.pp_chunks, " with pp_schedule=", c.pp_schedule,
                       ": the interleaved schedule needs pp_chunks >= 2, the others 1"));
  if (c.pp_schedule == "interleaved" && c.pp >= 1) {
    require(c.micro_batches % c.pp == 0,
            absl::StrCat("micro_batches (", c.micro_batches, ") must be divisible by pp (", c.pp,
                         ") for the interleaved schedule"));
  }
  if (c.grad_accum >= 1 && c.batch_size >= 1 && dp >= 1 && c.micro_batches >= 1) {
    const int share = c.batch_size / (dp * c.grad_accum);
    require(c.batch_size % (dp * c.grad_accum) != 0 || share % c.micro_batches == 0,
            absl::StrCat("each data-parallel rank's batch share (", share,
                         " sequences) must be divisible by micro_batches (", c.micro_batches, ")"));
  }
  if (c.grad_accum >= 1 && c.batch_size >= 1 && dp >= 1) {
    require(c.batch_size % (dp * c.grad_accum) == 0,
            absl::StrCat("batch_size (", c.batch_size,
                         ", global) must be divisible by dp × grad_accum (", dp, " × ",
                         c.grad_accum, " = ", dp * c.grad_accum,
                         "): choose a batch_size that is a multiple, or other rank/accum counts"));
  }
  require(c.lr > 0, absl::StrCat("lr must be > 0 (got ", c.lr, ")"));
  require(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1,
          absl::StrCat("min_lr_ratio must be in [0, 1] (got ", c.min_lr_ratio, ")"));
  require(c.warmup_steps >= 0, "warmup_steps must be >= 0");
  require(c.weight_decay >= 0, "weight_decay must be >= 0");
  require(c.beta1 >= 0 && c.beta1 < 1, "beta1 must be in [0, 1)");
  require(c.beta2 >= 0 && c.beta2 < 1, "beta2 must be in [0, 1)");
  require(c.eps > 0, "eps must be > 0");
  require(c.grad_clip >= 0, "grad_clip must be >= 0 (0 disables clipping)");
  require(c.lr_scaling == "none" || c.lr_scaling == "sqrt" || c.lr_scaling == "linear",
          absl::StrCat("lr_scaling must be none, sqrt or linear (got \"", c.lr_scaling, "\")"));
  require(c.lr_base_batch >= 1, "lr_base_batch must be >= 1");
  require(!c.data.empty(), "data must name a text file or directory");
  require(c.val_fraction > 0 && c.val_fraction < 1,
          absl::StrCat("val_fraction must be in (0, 1) (got ", c.val_fraction, ")"));
  require(c.eval_every >= 0 && c.eval_batches >= 1, "eval_every >= 0 and eval_batches >= 1");
  require(c.checkpoint_every >= 0, "checkpoint_every must be >= 0 (0 disables)");
  require(c.keep_checkpoints >= 2,
          "keep_checkpoints must be >= 2 (a corrupt newest checkpoint falls back to the previous)");
  require(c.threads >= 1 && c.threads <= 256,
          absl::StrCat("threads must be in [1, 256] (got ", c.threads, ")"));
  require(c.bucket_cap_mb > 0 && c.first_bucket_mb > 0, "bucket caps must be > 0");
  require(c.zero >= 0 && c.zero <= 3, absl::StrCat("zero must be 0, 1, 2 or 3 (got ", c.zero, ")"));
  require(c.shard_group >= 0 || c.shard_group == kShardGroupNode,
          absl::StrCat("shard_group must be a number >= 0 or \"node\" (got ", c.shard_group, ")"));
  if (c.shard_group != 0) {
    require(c.zero >= 1,
            absl::StrCat("shard_group=",
                         c.shard_group == kShardGroupNode ? "node" : absl::StrCat(c.shard_group),
                         " shards optimizer state: it needs zero=1, 2 or 3"));
  }
  require(c.compression == "none" || c.zero == 0 || c.shard_group == 0 || c.shard_group == dp,
          absl::StrCat("compression=", c.compression, " with zero=", c.zero,
                       " needs one shard group of every data-parallel rank (shard_group=0): ",
                       "hybrid sharding's replica all-reduces are not compressed"));
  if (c.shard_group > 0 && dp >= 1) {
    require(dp % c.shard_group == 0,
            absl::StrCat("shard_group (", c.shard_group, ") must divide the data-parallel ranks (",
                         dp, "): every group shards the same way"));
  }
  require(c.max_gathered_mb > 0,
          absl::StrCat("max_gathered_mb must be > 0 (got ", c.max_gathered_mb, ")"));
  require(c.prefetch == "true" || c.prefetch == "false",
          absl::StrCat("prefetch must be true or false (got \"", c.prefetch, "\")"));
  require(c.sample_tokens >= 0, "sample_tokens must be >= 0");
  require(!c.sample_prompt.empty() && c.sample_prompt.size() < static_cast<size_t>(c.seq_len),
          "sample_prompt must hold 1 to seq_len - 1 bytes");
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("invalid training config (", world_size, " rank",
                                                 world_size == 1 ? "" : "s", "):\n  ",
                                                 absl::StrJoin(errors, "\n  ")));
}

std::string ToJson(const Config& config) {
  std::vector<std::string> entries;
  for (const auto& [name, member] : Fields()) {
    std::string value;
    if (const auto* m = std::get_if<int Config::*>(&member)) {
      const bool node = *m == &Config::shard_group && config.shard_group == kShardGroupNode;
      value = node ? "\"node\"" : absl::StrCat(config.**m);
    } else if (const auto* m = std::get_if<uint64_t Config::*>(&member)) {
      value = absl::StrCat(config.**m);
    } else if (const auto* m = std::get_if<double Config::*>(&member)) {
      value = absl::StrFormat("%.17g", config.**m);
    } else {
      value = JsonQuote(config.*std::get<std::string Config::*>(member));
    }
    entries.push_back(absl::StrCat("  \"", name, "\": ", value));
  }
  return absl::StrCat("{\n", absl::StrJoin(entries, ",\n"), "\n}\n");
}

}  // namespace weft::trainer
