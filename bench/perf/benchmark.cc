#include "perf/benchmark.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "absl/strings/str_cat.h"
#include "perf/test_data.h"
#include "weft/comm/shared_memory.h"

namespace weft::perf {
namespace {

constexpr size_t kAlignment = 4096;

// -R picks the allocator; FreeBuffer tells the two kinds apart.
absl::StatusOr<std::byte*> AllocateBuffer(size_t bytes, int local_register) {
  if (local_register != 0) {
    absl::StatusOr<void*> shared = AllocShared(bytes);
    if (!shared.ok()) return shared.status();
    return static_cast<std::byte*>(*shared);
  }
  void* plain = std::aligned_alloc(kAlignment, bytes);
  if (plain == nullptr) return absl::ResourceExhaustedError("out of memory");
  return static_cast<std::byte*>(plain);
}

void FreeBuffer(void* buffer) {
  if (buffer != nullptr && !FreeShared(buffer).ok()) std::free(buffer);
}

// Operations issued and not yet waited for. Issuing stalls once kMaxInFlight are outstanding,
// as launching does on a full CUDA stream, so a long -n or -w neither queues millions of
// operations nor times their allocation.
class InFlight {
 public:
  static constexpr size_t kMaxInFlight = 1024;

  absl::Status Add(const Work& work) {
    // Finished already (an eager tiny collective): nothing to hold on to.
    if (work.Test()) return work.status();
    works_.push_back(work);
    if (works_.size() <= kMaxInFlight) return absl::OkStatus();
    const absl::Status oldest = works_.front().Wait();
    works_.pop_front();
    return oldest;
  }

  // Operations finish in issue order and a failure fails every later one, so the last one's
  // status is everyone's.
  absl::Status WaitAll() {
    const absl::Status last = works_.empty() ? absl::OkStatus() : works_.back().Wait();
    works_.clear();
    return last;
  }

 private:
  std::deque<Work> works_;
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

absl::Status Annotate(const absl::Status& status, const std::string& what) {
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

// Which variant failed, with -V.
absl::Status InVariant(const absl::Status& status, const Variant& variant) {
  if (variant.name.empty()) return status;
  return Annotate(status, absl::StrCat("variant ", variant.name));
}

// The next size of the sweep, or 0 when it would pass -e.
size_t NextSize(size_t size, const Options& o) {
  if (o.step_factor > 1) {
    if (size > o.max_bytes / static_cast<size_t>(o.step_factor)) return 0;
    return size * static_cast<size_t>(o.step_factor);
  }
  if (o.step_bytes > o.max_bytes - size) return 0;
  return size + o.step_bytes;
}

}  // namespace

Benchmark::Benchmark(std::vector<Variant> variants, const Options& options,
                     const Collective& collective, Report& report)
    : variants_(std::move(variants)),
      comm_(variants_.front().comm),
      options_(options),
      collective_(collective),
      report_(report),
      rank_(comm_->rank()),
      ranks_(comm_->size()),
      send_buffer_(nullptr, FreeBuffer),
      recv_buffer_(nullptr, FreeBuffer) {}

Benchmark::~Benchmark() = default;

absl::Status Benchmark::Run() {
  if (collective_.rooted() && options_.root >= ranks_) {
    return absl::InvalidArgumentError(
        absl::StrCat("-r ", options_.root, " is not a rank: the job has ", ranks_, " ranks"));
  }
  // Room for the largest size plus -u elements of the widest type (8 bytes), rounded to pages.
  const size_t wanted = options_.max_bytes + 8 * static_cast<size_t>(options_.unalign);
  buffer_bytes_ = std::max<size_t>(kAlignment, (wanted + kAlignment - 1) / kAlignment * kAlignment);
  for (auto* buffer : {&send_buffer_, &recv_buffer_}) {
    absl::StatusOr<std::byte*> allocated = AllocateBuffer(buffer_bytes_, options_.local_register);
    if (!allocated.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "rank ", rank_, ": allocating 2 buffers of ", buffer_bytes_, " bytes for -e ",
          options_.max_bytes, " failed (", allocated.status().message(), "): lower -e"));
    }
    buffer->reset(*allocated);
    std::memset(buffer->get(), 0, buffer_bytes_);  // touch every page before timing
  }
  std::vector<int> roots;
  if (!collective_.rooted()) {
    roots = {-1};
  } else if (options_.root == -1) {
    for (int r = 0; r < ranks_; ++r) roots.push_back(r);
  } else {
    roots = {options_.root};
  }
  const std::vector<ReduceOp> ops = collective_.op_column() == OpColumn::kOperator
                                        ? options_.ops
                                        : std::vector<ReduceOp>{ReduceOp::kSum};
  for (DataType type : options_.types) {
    for (ReduceOp op : ops) {
      for (int root : roots) {
        if (absl::Status s = TimeTest(type, op, root); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

Benchmark::Case Benchmark::MakeCase(size_t size, DataType type, ReduceOp op, int root,
                                    bool in_place) const {
  const size_t es = SizeOf(type);
  Case c{.layout = collective_.GetLayout(size / es, es, ranks_),
         .type = type,
         .op = op,
         .root = root,
         .in_place = in_place,
         .bytes = 0};
  c.bytes = std::max(c.layout.send_count, c.layout.recv_count) * es;
  return c;
}

absl::Status Benchmark::TimeTest(DataType type, ReduceOp op, int root) {
  for (const Variant& variant : variants_) {
    comm_ = variant.comm;
    if (absl::Status s = WarmUp(type, op, root); !s.ok()) return InVariant(s, variant);
  }
  size_t turn = 0;
  for (int cycle = 1; options_.run_cycles == 0 || cycle <= options_.run_cycles; ++cycle) {
    for (size_t size = options_.min_bytes;; size = NextSize(size, options_)) {
      // The variant that goes first rotates, so that none always follows the same one (whose
      // progress thread may still be polling) or always starts the size.
      for (size_t k = 0; k < variants_.size(); ++k) {
        const Variant& variant = variants_[(turn + k) % variants_.size()];
        comm_ = variant.comm;
        if (absl::Status s = TimeRow(cycle, size, type, op, root, variant.name); !s.ok()) {
          return InVariant(s, variant);
        }
      }
      ++turn;
      if (NextSize(size, options_) == 0) break;
    }
  }
  return absl::OkStatus();
}

absl::Status Benchmark::WarmUp(DataType type, ReduceOp op, int root) {
  if (absl::Status s = Barrier(); !s.ok()) return s;
  // Every size from -b, doubling, as nccl-tests does whatever the step.
  for (size_t size = options_.min_bytes; size <= options_.max_bytes; size *= 2) {
    const Case c = MakeCase(size, type, op, root, false);
    if (absl::Status s = Compress(c); !s.ok()) return Annotate(s, "warm-up");
    InFlight warmup;
    for (int i = 0; i < options_.warmup_iters; ++i) {
      absl::StatusOr<Work> issued = Issue(c, i, false);
      if (!issued.ok()) return Annotate(issued.status(), "warm-up");
      if (absl::Status s = warmup.Add(*issued); !s.ok()) return Annotate(s, "warm-up");
    }
    if (absl::Status s = warmup.WaitAll(); !s.ok()) return Annotate(s, "warm-up");
    if (size == 0 || size > options_.max_bytes / 2) break;
  }
  return absl::OkStatus();
}

absl::Status Benchmark::TimeRow(int cycle, size_t size, DataType type, ReduceOp op, int root,
                                const std::string& variant) {
  const char* redop = collective_.op_column() == OpColumn::kNone ? "none" : Name(op);
  const Case out_of_place = MakeCase(size, type, op, root, false);
  report_.BeginRow(static_cast<int64_t>(out_of_place.bytes),
                   static_cast<int64_t>(out_of_place.layout.param_count), Name(type), redop, root);
  const std::optional<Prediction> prediction = Predict(out_of_place);
  for (bool in_place : {false, true}) {
    const Case c = MakeCase(size, type, op, root, in_place);
    Measurement m{.cycle = cycle,
                  .bytes = static_cast<int64_t>(c.bytes),
                  .count = static_cast<int64_t>(c.layout.param_count),
                  .type = Name(type),
                  .redop = redop,
                  .root = root,
                  .in_place = in_place,
                  .wrong = std::nullopt,
                  .prediction = prediction,
                  .variant = variant,
                  .wire = std::nullopt};
    if (absl::Status s = BenchTime(c, &m); !s.ok()) {
      return Annotate(s, absl::StrCat(c.bytes, " B ", Name(type), " ", redop, " root ", root,
                                      in_place ? " in-place" : " out-of-place"));
    }
    report_.AddHalf(m);
  }
  report_.EndRow();
  return absl::OkStatus();
}

absl::Status Benchmark::BenchTime(const Case& c, Measurement* out) {
  if (absl::Status s = Compress(c); !s.ok()) return s;
  // Valid inputs for the timed operations (garbage could hold NaNs and denormals, which reduce
  // slowly); the results are not looked at.
  TestData(c.type, c.op, collective_.reduces(), ranks_, 0)
      .FillInput(rank_, const_cast<void*>(At(c, 0).send),
                 collective_.InputCount(c.layout, rank_, c.root));
  absl::StatusOr<Work> sync = Issue(c, 0, false);
  if (!sync.ok()) return sync.status();
  if (absl::Status s = sync->Wait(); !s.ok()) return Annotate(s, "untimed operation");
  if (absl::Status s = Barrier(); !s.ok()) return s;

  const bool grouped = collective_.grouped() && options_.agg_iters > 1;
  InFlight timed;
  const Clock::time_point start = Clock::now();
  for (int iter = 0; iter < options_.iters; ++iter) {
    if (grouped) comm_->GroupStart();
    for (int a = 0; a < options_.agg_iters; ++a) {
      absl::StatusOr<Work> issued = Issue(c, iter * options_.agg_iters + a, grouped);
      if (!issued.ok()) return Annotate(issued.status(), "timed iteration");
      if (!grouped) {
        if (absl::Status s = timed.Add(*issued); !s.ok()) return Annotate(s, "timed iteration");
      }
    }
    if (grouped) {
      const Work group = comm_->GroupEnd();
      if (absl::Status s = timed.Add(group); !s.ok()) return Annotate(s, "timed iteration");
      if (options_.blocking > 0) {
        if (absl::Status s = group.Wait(); !s.ok()) return Annotate(s, "timed iteration");
        if (options_.blocking == 1) {
          if (absl::Status s = Barrier(); !s.ok()) return s;
        }
      }
    }
  }
  const double ops = static_cast<double>(options_.iters) * options_.agg_iters;
  const double issue_seconds = Seconds(Clock::now() - start) / ops;
  if (absl::Status s = timed.WaitAll(); !s.ok()) return Annotate(s, "timed iterations");
  absl::StatusOr<double> seconds = CombineTime(Seconds(Clock::now() - start) / ops);
  if (!seconds.ok()) return seconds.status();

  if (compressed_) out->wire = compressed_->PerOperation();
  out->algbw = static_cast<double>(c.bytes) / 1e9 / *seconds;
  out->busbw = out->algbw * collective_.BusFactor(ranks_);
  out->time_us = (options_.report_cputime ? issue_seconds : *seconds) * 1e6;
  if (out->prediction.has_value() && out->prediction->predicted_us.has_value()) {
    out->prediction->measured_over_predicted = *seconds * 1e6 / *out->prediction->predicted_us;
  }
  if (absl::Status s = Barrier(); !s.ok()) return s;

  absl::StatusOr<std::optional<int64_t>> wrong = Check(c);
  if (!wrong.ok()) return wrong.status();
  out->wrong = *wrong;
  return absl::OkStatus();
}

std::optional<Prediction> Benchmark::Predict(const Case& c) const {
  if (!options_.predicted) return std::nullopt;
  Prediction prediction;
  const char* collective = collective_.tuned_name();
  if (collective == nullptr) {
    prediction.algorithm = "p2p";
  } else if (c.layout.param_count == 0) {
    prediction.algorithm = "none";
  } else {
    prediction.algorithm = comm_->AlgorithmFor(collective, c.bytes);
    const double seconds = comm_->PredictedSeconds(collective, c.bytes);
    if (seconds > 0) prediction.predicted_us = seconds * 1e6;
  }
  return prediction;
}

Benchmark::Pointers Benchmark::At(const Case& c, int iter) const {
  const size_t es = SizeOf(c.type);
  const size_t steps = c.bytes > 0 ? std::max<size_t>(1, options_.max_bytes / c.bytes) : 1;
  const size_t shift = c.bytes * (static_cast<size_t>(iter) % steps);
  const size_t unalign = static_cast<size_t>(options_.unalign) * es;
  std::byte* send = send_buffer_.get() + unalign + shift;
  std::byte* recv = recv_buffer_.get() + unalign + shift;
  if (!c.in_place) return {send, recv};
  const size_t rank = static_cast<size_t>(rank_);
  return {recv + c.layout.send_in_place_offset * rank * es,
          recv + c.layout.recv_in_place_offset * rank * es};
}

absl::StatusOr<Work> Benchmark::Issue(const Case& c, int iter, bool in_group) {
  const Pointers p = At(c, iter);
  if (compressed_) {
    // Synchronous: the operation is over when Run returns.
    if (absl::Status s = compressed_->Run(p.send, p.recv); !s.ok()) return s;
    return Work::Succeeded();
  }
  Work work = collective_.Run(*comm_, p.send, p.recv, c.layout.param_count, c.type, c.op, c.root);
  if (options_.blocking > 0 && !in_group) {
    if (absl::Status s = work.Wait(); !s.ok()) return s;
    if (options_.blocking == 1) {
      if (absl::Status s = Barrier(); !s.ok()) return s;
    }
  }
  return work;
}

absl::StatusOr<std::optional<int64_t>> Benchmark::Check(const Case& c) {
  if (options_.check == 0 || (c.in_place && !collective_.checks_in_place())) return std::nullopt;
  const size_t es = SizeOf(c.type);
  const std::vector<Block> expected = collective_.Expected(c.layout, rank_, ranks_, c.root);
  int64_t wrong = 0;
  for (int i = 0; i < options_.check && wrong == 0; ++i) {
    const TestData data(c.type, c.op, collective_.reduces(), ranks_, ++check_seed_);
    const Pointers p = At(c, 0);
    // Clear the receive region first: in place the send region lies inside it.
    std::memset(p.recv, 0, c.layout.recv_count * es);
    data.FillInput(rank_, const_cast<void*>(p.send),
                   collective_.InputCount(c.layout, rank_, c.root));
    if (absl::Status s = Compress(c); !s.ok()) return Annotate(s, "check operation");
    absl::StatusOr<Work> work = Issue(c, 0, false);
    if (!work.ok()) return Annotate(work.status(), "check operation");
    if (absl::Status s = work->Wait(); !s.ok()) return Annotate(s, "check operation");
    InjectErrors(c, p.recv);
    int64_t counts[2] = {0, 0};  // wrong elements; ranks that found any
    if (compressed_) {
      absl::StatusOr<std::vector<float>> want = CompressedExpected(
          collective_, c.layout, *options_.compression, data, rank_, ranks_, compressed_->ring());
      if (!want.ok()) return Annotate(want.status(), "documented result");
      counts[0] = CountWrongFloats(p.recv, *want);
    } else {
      for (const Block& block : expected) counts[0] += data.CountWrong(p.recv, block);
    }
    counts[1] = counts[0] > 0 ? 1 : 0;
    if (absl::Status s =
            comm_->AllReduce(counts, counts, 2, DataType::kInt64, ReduceOp::kSum).Wait();
        !s.ok()) {
      return Annotate(s, "summing wrong values over ranks");
    }
    report_.CountFailedChecks(static_cast<int>(counts[1]));
    wrong = counts[0];
  }
  return wrong;
}

void Benchmark::InjectErrors(const Case& c, void* recv) const {
  const size_t es = SizeOf(c.type);
  int64_t left = options_.inject_errors;
  for (const Block& block : collective_.Expected(c.layout, rank_, ranks_, c.root)) {
    auto* elements = static_cast<std::byte*>(recv) + block.recv_offset * es;
    for (size_t i = 0; i < block.count && left > 0; ++i, --left) elements[i * es] ^= std::byte{1};
  }
}

absl::Status Benchmark::Compress(const Case& c) {
  if (!options_.compression) return absl::OkStatus();
  compressed_.reset();  // the old object's buffers go first
  absl::StatusOr<std::unique_ptr<CompressedOp>> made =
      CompressedOp::Create(collective_, comm_, c.layout, *options_.compression);
  if (!made.ok()) return made.status();
  compressed_ = *std::move(made);
  return absl::OkStatus();
}

absl::StatusOr<double> Benchmark::CombineTime(double seconds) {
  if (options_.average == 0) return seconds;  // rank 0 prints its own
  const ReduceOp op = options_.average == 2   ? ReduceOp::kMin
                      : options_.average == 3 ? ReduceOp::kMax
                                              : ReduceOp::kSum;
  double combined = seconds;
  if (absl::Status s = comm_->AllReduce(&combined, &combined, 1, DataType::kFloat64, op).Wait();
      !s.ok()) {
    return Annotate(s, "combining times over ranks");
  }
  return options_.average == 1 ? combined / ranks_ : combined;
}

absl::Status Benchmark::Barrier() {
  if (absl::Status s = comm_->Barrier().Wait(); !s.ok()) return Annotate(s, "barrier");
  return absl::OkStatus();
}

}  // namespace weft::perf
