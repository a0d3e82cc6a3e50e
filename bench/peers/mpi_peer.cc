// mpi_peer: the MPI library's collectives measured and printed like nccl-tests (peer_driver.h),
// so that compare-peers sets Open MPI's numbers beside Weft's. One collective per run:
//
//   mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl self,vader
//       mpi_peer --collective all_reduce -b 8 -e 256M -f 4 [-d float|double|int32] [-o sum]
//
// all_reduce is MPI_Allreduce, reduce_scatter MPI_Reduce_scatter_block, all_gather
// MPI_Allgather, broadcast MPI_Bcast from rank 0. In-place runs pass MPI_IN_PLACE; MPI_Bcast has
// a single buffer, so both halves of a broadcast row time the same call. The banner names the
// library and the transport settings it runs with, read back through the MPI tool interface.
#include <mpi.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nccl_format.h"
#include "peer_buffers.h"
#include "peer_driver.h"
#include "peer_options.h"

namespace weft::peers {
namespace {

absl::Status MpiStatus(int code, absl::string_view what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return absl::InternalError(absl::StrCat(what, " failed: ", absl::string_view(text, length)));
}

MPI_Datatype MpiType(DataType type) {
  switch (type) {
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    default:
      return MPI_FLOAT;  // ParsePeerOptions admits int32, float and double only
  }
}

MPI_Op MpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return MPI_PROD;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    default:
      return MPI_SUM;  // ParsePeerOptions rejects avg
  }
}

class MpiRuntime : public PeerRuntime {
 public:
  MpiRuntime() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status Barrier() override { return MpiStatus(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  absl::StatusOr<double> AllReduceDouble(double value, Combine how) override {
    MPI_Op op = how == Combine::kSum ? MPI_SUM : how == Combine::kMin ? MPI_MIN : MPI_MAX;
    absl::Status s = MpiStatus(
        MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, op, MPI_COMM_WORLD), "MPI_Allreduce");
    if (!s.ok()) return s;
    return value;
  }

 private:
  int rank_ = 0, size_ = 1;
};

class MpiCase : public PeerCase {
 public:
  MpiCase(Collective collective, const Geometry& geometry, const PeerOptions& options, int rank,
          int ranks, bool in_place)
      : collective_(collective),
        // MPI_Bcast has one buffer: the out-of-place half is the in-place call.
        buffers_(collective, geometry, options.type, options.op, rank, ranks,
                 in_place || collective == Collective::kBroadcast),
        type_(MpiType(options.type)),
        op_(MpiOp(options.op)) {}

  PeerBuffers& buffers() override { return buffers_; }

  absl::Status Run() override {
    const Geometry& g = buffers_.geometry();
    void* send = buffers_.in_place() ? MPI_IN_PLACE : buffers_.send();
    void* recv = buffers_.recv();
    switch (collective_) {
      case Collective::kAllReduce:
        return MpiStatus(
            MPI_Allreduce(send, recv, static_cast<int>(g.count), type_, op_, MPI_COMM_WORLD),
            "MPI_Allreduce");
      case Collective::kReduceScatter:
        return MpiStatus(MPI_Reduce_scatter_block(send, recv, static_cast<int>(g.recv_count), type_,
                                                  op_, MPI_COMM_WORLD),
                         "MPI_Reduce_scatter_block");
      case Collective::kAllGather:
        return MpiStatus(MPI_Allgather(send, static_cast<int>(g.send_count), type_, recv,
                                       static_cast<int>(g.send_count), type_, MPI_COMM_WORLD),
                         "MPI_Allgather");
      case Collective::kBroadcast:
        return MpiStatus(MPI_Bcast(recv, static_cast<int>(g.count), type_, 0, MPI_COMM_WORLD),
                         "MPI_Bcast");
    }
    return absl::InternalError("unknown collective");
  }

 private:
  Collective collective_;
  PeerBuffers buffers_;
  MPI_Datatype type_;
  MPI_Op op_;
};

// The value of one MPI tool-interface control variable after MPI_Init (components rewrite
// theirs at selection, e.g. vader's single-copy mechanism when CMA is refused), or "?" where
// this MPI does not have it. Enumerations are given by name.
std::string ControlVariable(const char* name) {
  int index = 0;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return "?";
  char cvar_name[256], description[1024];
  int name_length = sizeof(cvar_name), description_length = sizeof(description);
  int verbosity = 0, binding = 0, scope = 0;
  MPI_Datatype type;
  MPI_T_enum enumeration;
  if (MPI_T_cvar_get_info(index, cvar_name, &name_length, &verbosity, &type, &enumeration,
                          description, &description_length, &binding, &scope) != MPI_SUCCESS ||
      binding != MPI_T_BIND_NO_OBJECT) {
    return "?";
  }
  MPI_T_cvar_handle handle;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return "?";
  std::string value = "?";
  if (type == MPI_CHAR) {
    std::vector<char> text(static_cast<size_t>(count) + 1, '\0');
    if (MPI_T_cvar_read(handle, text.data()) == MPI_SUCCESS) value = text.data();
  } else if (type == MPI_INT && count == 1) {
    int number = 0;
    if (MPI_T_cvar_read(handle, &number) == MPI_SUCCESS) {
      value = std::to_string(number);
      int items = 0;
      if (enumeration != MPI_T_ENUM_NULL &&
          MPI_T_enum_get_info(enumeration, &items, cvar_name, &name_length) == MPI_SUCCESS) {
        for (int i = 0; i < items; ++i) {
          int item_value = 0;
          char item_name[256];
          int item_length = sizeof(item_name);
          if (MPI_T_enum_get_item(enumeration, i, &item_value, item_name, &item_length) ==
                  MPI_SUCCESS &&
              item_value == number) {
            value = item_name;
          }
        }
      }
    }
  }
  MPI_T_cvar_handle_free(&handle);
  return value.empty() ? "(default)" : value;
}

std::string Banner(int ranks) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  absl::string_view first_line(version, static_cast<size_t>(length));
  first_line = first_line.substr(0, first_line.find_first_of(",\n"));
  std::string banner = absl::StrCat("peer: ", first_line, ", ", ranks, " ranks\n");
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS) {
    absl::StrAppend(&banner, "transport: pml ", ControlVariable("pml"), ", btl ",
                    ControlVariable("btl"), ", vader single-copy ",
                    ControlVariable("btl_vader_single_copy_mechanism"), "\n");
    MPI_T_finalize();
  }
  return banner;
}

int Main(int argc, char** argv) {
  if (int code = MPI_Init(&argc, &argv); code != MPI_SUCCESS) {
    std::fprintf(stderr, "mpi_peer: %s\n", MpiStatus(code, "MPI_Init").ToString().c_str());
    return 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MpiRuntime runtime;
  absl::StatusOr<PeerOptions> options = ParsePeerOptions(argc, argv);
  std::optional<Collective> collective;
  if (options.ok()) {
    collective = ParseCollective(options->collective);
    if (!collective) {
      options = absl::InvalidArgumentError(
          absl::StrCat("--collective '", options->collective,
                       "': expected all_reduce, reduce_scatter, all_gather or broadcast"));
    }
  }
  if (options.ok() && options->max_bytes / SizeOf(options->type) > INT_MAX) {
    options = absl::InvalidArgumentError(absl::StrCat(
        "-e ", options->max_bytes, ": MPI counts are int, at most ", INT_MAX, " elements"));
  }
  if (!options.ok()) {
    if (runtime.rank() == 0) {
      std::fprintf(stderr, "mpi_peer: %s\n", options.status().ToString().c_str());
    }
    MPI_Finalize();
    return 2;
  }
  // -T bounds the whole run: a peer that stops answering must not hold the job forever.
  if (options->timeout_s > 0) alarm(static_cast<unsigned>(options->timeout_s));

  const std::string banner = Banner(runtime.size());
  absl::StatusOr<int64_t> wrong = RunSweep(
      *options, *collective, banner, runtime,
      [&](const Geometry& geometry, bool in_place) -> absl::StatusOr<std::unique_ptr<PeerCase>> {
        return std::make_unique<MpiCase>(*collective, geometry, *options, runtime.rank(),
                                         runtime.size(), in_place);
      });
  if (!wrong.ok()) {
    std::fprintf(stderr, "# error: %s\n", wrong.status().ToString().c_str());
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may be waiting in a collective
    return 1;
  }
  MPI_Finalize();
  return *wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace weft::peers

int main(int argc, char** argv) { return weft::peers::Main(argc, argv); }
