// gloo_peer: Gloo's all-reduce algorithms over its TCP transport on loopback, measured and
// printed like nccl-tests (peer_driver.h), one table per algorithm, so that compare-peers sets
// Gloo's numbers beside Weft's. Ranks are started by weftrun (WEFT_RANK, WEFT_SIZE) and meet
// through Gloo's FileStore in a directory they share:
//
//   weftrun -n 2 -- gloo_peer --store /tmp/x -b 8 -e 256M -f 4 [--algorithm ring,allreduce]
//
// Algorithms: ring, ring_chunked, halving_doubling and bcube are Gloo's in-place algorithm
// classes (Allreduce*<T>); their out-of-place half copies the input into the output first, as a
// caller with separate buffers must. allreduce is gloo::allreduce(AllreduceOptions), the entry
// point PyTorch's ProcessGroupGloo calls, which takes separate buffers itself. bcube needs a rank
// count divisible by its base (2), or its results are wrong: the default list leaves it out then.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier.h"
#include "gloo/config.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "nccl_format.h"
#include "peer_buffers.h"
#include "peer_driver.h"
#include "peer_options.h"

namespace weft::peers {
namespace {

constexpr const char* kAlgorithms[] = {"ring", "ring_chunked", "halving_doubling", "bcube",
                                       "allreduce"};

// Why `algorithm` cannot reduce correctly over `ranks` ranks, or "" when it can.
std::string Unsupported(absl::string_view algorithm, int ranks) {
  if (algorithm == "bcube" && ranks % 2 != 0) {
    return "bcube needs a rank count divisible by its base, 2";
  }
  return "";
}

// Runs `body`, turning Gloo's exceptions (timeouts, closed connections) into a Status.
template <typename Body>
absl::Status Guarded(const char* what, Body&& body) {
  try {
    body();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(what, ": ", e.what()));
  }
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn UnboundReduce(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return static_cast<ReduceFn>(&gloo::product<T>);
    case ReduceOp::kMin:
      return static_cast<ReduceFn>(&gloo::min<T>);
    case ReduceOp::kMax:
      return static_cast<ReduceFn>(&gloo::max<T>);
    default:
      return static_cast<ReduceFn>(&gloo::sum<T>);
  }
}

template <typename T>
const gloo::ReductionFunction<T>* BoundReduce(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return gloo::ReductionFunction<T>::product;
    case ReduceOp::kMin:
      return gloo::ReductionFunction<T>::min;
    case ReduceOp::kMax:
      return gloo::ReductionFunction<T>::max;
    default:
      return gloo::ReductionFunction<T>::sum;
  }
}

class GlooRuntime : public PeerRuntime {
 public:
  explicit GlooRuntime(std::shared_ptr<gloo::Context> context) : context_(std::move(context)) {}
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  absl::Status Barrier() override {
    return Guarded("gloo::barrier", [&] {
      gloo::BarrierOptions options(context_);
      gloo::barrier(options);
    });
  }

  absl::StatusOr<double> AllReduceDouble(double value, Combine how) override {
    const ReduceOp op = how == Combine::kSum   ? ReduceOp::kSum
                        : how == Combine::kMin ? ReduceOp::kMin
                                               : ReduceOp::kMax;
    absl::Status s = Guarded("gloo::allreduce of a double", [&] {
      gloo::AllreduceOptions options(context_);
      options.setOutput(&value, 1);
      options.setReduceFunction(UnboundReduce<double>(op));
      gloo::allreduce(options);
    });
    if (!s.ok()) return s;
    return value;
  }

 private:
  std::shared_ptr<gloo::Context> context_;
};

// One of Gloo's in-place algorithm classes, built once per size and layout.
template <typename T, template <typename> class Algorithm>
class AlgorithmCase : public PeerCase {
 public:
  AlgorithmCase(const std::shared_ptr<gloo::Context>& context, const Geometry& geometry,
                const PeerOptions& options, bool in_place)
      : buffers_(Collective::kAllReduce, geometry, options.type, options.op, context->rank,
                 context->size, in_place) {
    algorithm_ = std::make_unique<Algorithm<T>>(
        context, std::vector<T*>{static_cast<T*>(buffers_.recv())},
        static_cast<int>(geometry.count), BoundReduce<T>(options.op));
  }

  PeerBuffers& buffers() override { return buffers_; }

  absl::Status Run() override {
    if (!buffers_.in_place()) {
      std::memcpy(buffers_.recv(), buffers_.send(), buffers_.geometry().count * sizeof(T));
    }
    return Guarded("gloo algorithm run", [&] { algorithm_->run(); });
  }

 private:
  PeerBuffers buffers_;
  std::unique_ptr<gloo::Algorithm> algorithm_;
};

// gloo::allreduce with its options (buffers registered) built once per size and layout.
template <typename T>
class UnboundCase : public PeerCase {
 public:
  UnboundCase(const std::shared_ptr<gloo::Context>& context, const Geometry& geometry,
              const PeerOptions& options, bool in_place)
      : buffers_(Collective::kAllReduce, geometry, options.type, options.op, context->rank,
                 context->size, in_place),
        options_(context) {
    if (!in_place) options_.setInput(static_cast<T*>(buffers_.send()), geometry.count);
    options_.setOutput(static_cast<T*>(buffers_.recv()), geometry.count);
    options_.setReduceFunction(UnboundReduce<T>(options.op));
  }

  PeerBuffers& buffers() override { return buffers_; }

  absl::Status Run() override {
    return Guarded("gloo::allreduce", [&] { gloo::allreduce(options_); });
  }

 private:
  PeerBuffers buffers_;
  gloo::AllreduceOptions options_;
};

template <typename T>
absl::StatusOr<std::unique_ptr<PeerCase>> MakeTypedCase(
    const std::string& algorithm, const std::shared_ptr<gloo::Context>& context,
    const Geometry& geometry, const PeerOptions& options, bool in_place) {
  std::unique_ptr<PeerCase> made;
  absl::Status s = Guarded("setting up the algorithm", [&] {
    if (algorithm == "ring") {
      made = std::make_unique<AlgorithmCase<T, gloo::AllreduceRing>>(context, geometry, options,
                                                                     in_place);
    } else if (algorithm == "ring_chunked") {
      made = std::make_unique<AlgorithmCase<T, gloo::AllreduceRingChunked>>(context, geometry,
                                                                            options, in_place);
    } else if (algorithm == "halving_doubling") {
      made = std::make_unique<AlgorithmCase<T, gloo::AllreduceHalvingDoubling>>(context, geometry,
                                                                                options, in_place);
    } else if (algorithm == "bcube") {
      made = std::make_unique<AlgorithmCase<T, gloo::AllreduceBcube>>(context, geometry, options,
                                                                      in_place);
    } else {
      made = std::make_unique<UnboundCase<T>>(context, geometry, options, in_place);
    }
  });
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(algorithm, ": ", s.message()));
  return made;
}

absl::StatusOr<std::unique_ptr<PeerCase>> MakeCase(const std::string& algorithm,
                                                   const std::shared_ptr<gloo::Context>& context,
                                                   const Geometry& geometry,
                                                   const PeerOptions& options, bool in_place) {
  switch (options.type) {
    case DataType::kInt32:
      return MakeTypedCase<int32_t>(algorithm, context, geometry, options, in_place);
    case DataType::kFloat64:
      return MakeTypedCase<double>(algorithm, context, geometry, options, in_place);
    default:
      return MakeTypedCase<float>(algorithm, context, geometry, options, in_place);
  }
}

absl::StatusOr<int> EnvironmentInt(const char* name) {
  const char* text = std::getenv(name);
  int value = 0;
  if (text == nullptr || !absl::SimpleAtoi(text, &value) || value < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " is ", text ? absl::StrCat("'", text, "'") : "unset",
        ": start gloo_peer under weftrun, e.g. weftrun -n 2 -- gloo_peer --store DIR"));
  }
  return value;
}

// Every rank publishes its loopback address in the store and connects to every other.
absl::StatusOr<std::shared_ptr<gloo::Context>> Connect(const PeerOptions& options, int rank,
                                                       int size) {
  std::error_code error;
  std::filesystem::create_directories(options.store_dir, error);
  if (error) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank,
                                                      ": cannot create the store directory '",
                                                      options.store_dir, "': ", error.message()));
  }
  std::shared_ptr<gloo::rendezvous::Context> context;
  absl::Status s = Guarded("connecting over TCP through the file store", [&] {
    gloo::transport::tcp::attr attr("127.0.0.1");
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore files(options.store_dir);
    // weftrun's store port differs between jobs: keys left by an earlier job are not read.
    const char* port = std::getenv("WEFT_PORT");
    gloo::rendezvous::PrefixStore store(absl::StrCat("job", port ? port : "0"), files);
    context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::seconds(options.timeout_s > 0 ? options.timeout_s : 60));
    context->connectFullMesh(store, device);
  });
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("rank ", rank, " of ", size, ": ", s.message(),
                                               " (store ", options.store_dir, ")"));
  }
  return std::shared_ptr<gloo::Context>(std::move(context));
}

int Main(int argc, char** argv) {
  absl::StatusOr<PeerOptions> options = ParsePeerOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "gloo_peer: %s\n", options.status().ToString().c_str());
    return 2;
  }
  if (options->store_dir.empty()) {
    std::fprintf(stderr, "gloo_peer: --store DIR is required (a directory every rank sees)\n");
    return 2;
  }
  if (options->collective != "all_reduce") {
    std::fprintf(stderr, "gloo_peer: --collective %s: only all_reduce is measured\n",
                 options->collective.c_str());
    return 2;
  }
  if (options->max_bytes / SizeOf(options->type) > INT_MAX) {
    std::fprintf(stderr, "gloo_peer: -e %zu: Gloo's algorithms count in int, at most %d elements\n",
                 options->max_bytes, INT_MAX);
    return 2;
  }
  // -T bounds the whole run, connection included.
  if (options->timeout_s > 0) alarm(static_cast<unsigned>(options->timeout_s));

  absl::StatusOr<int> rank = EnvironmentInt("WEFT_RANK");
  absl::StatusOr<int> size = EnvironmentInt("WEFT_SIZE");
  if (!rank.ok() || !size.ok()) {
    std::fprintf(stderr, "gloo_peer: %s\n",
                 (rank.ok() ? size.status() : rank.status()).ToString().c_str());
    return 2;
  }
  if (*rank >= *size) {
    std::fprintf(stderr, "gloo_peer: WEFT_RANK %d is not below WEFT_SIZE %d\n", *rank, *size);
    return 2;
  }
  if (options->algorithms.empty()) {
    for (const char* name : kAlgorithms) {
      if (Unsupported(name, *size).empty()) options->algorithms.push_back(name);
    }
  }
  for (const std::string& name : options->algorithms) {
    if (std::find(std::begin(kAlgorithms), std::end(kAlgorithms), name) == std::end(kAlgorithms)) {
      std::fprintf(stderr, "gloo_peer: unknown algorithm '%s'; known: %s\n", name.c_str(),
                   absl::StrJoin(kAlgorithms, ", ").c_str());
      return 2;
    }
    if (std::string why = Unsupported(name, *size); !why.empty()) {
      std::fprintf(stderr, "gloo_peer: algorithm '%s' with %d ranks: %s\n", name.c_str(), *size,
                   why.c_str());
      return 2;
    }
  }
  absl::StatusOr<std::shared_ptr<gloo::Context>> context = Connect(*options, *rank, *size);
  if (!context.ok()) {
    std::fprintf(stderr, "gloo_peer: %s\n", context.status().ToString().c_str());
    return 1;
  }
  GlooRuntime runtime(*context);
  int64_t wrong = 0;
  for (const std::string& algorithm : options->algorithms) {
    const std::string banner = absl::StrCat(
        "peer: Gloo ", GLOO_VERSION_MAJOR, ".", GLOO_VERSION_MINOR, ".", GLOO_VERSION_PATCH, ", ",
        *size, " ranks\ntransport: tcp 127.0.0.1\n", "algorithm: ", algorithm, "\n");
    absl::StatusOr<int64_t> result =
        RunSweep(*options, Collective::kAllReduce, banner, runtime,
                 [&](const Geometry& geometry, bool in_place) {
                   return MakeCase(algorithm, *context, geometry, *options, in_place);
                 });
    if (!result.ok()) {
      std::fprintf(stderr, "# error: %s: %s\n", algorithm.c_str(),
                   result.status().ToString().c_str());
      return 1;
    }
    wrong += *result;
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace weft::peers

int main(int argc, char** argv) { return weft::peers::Main(argc, argv); }
