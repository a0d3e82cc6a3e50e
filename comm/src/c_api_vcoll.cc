// The variable-count collectives of the C API: arrays of nranks entries become the vectors that
// weft::Communicator takes.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "c_api.h"

namespace weft::capi {
namespace {

// The comm.size() entries at `array`; a NULL array sets `error` (unless it holds one already).
std::vector<size_t> Entries(const Communicator& comm, const char* function, const char* name,
                            const size_t* array, absl::Status* error) {
  if (array != nullptr) return std::vector<size_t>(array, array + comm.size());
  if (error->ok()) {
    *error = absl::InvalidArgumentError(
        absl::StrCat("rank ", comm.rank(), ": ", function, ": ", name, " is NULL"));
  }
  return {};
}

}  // namespace
}  // namespace weft::capi

using weft::Communicator;
using weft::capi::Convert;
using weft::capi::Entries;
using weft::capi::Refused;
using weft::capi::RunOp;

extern "C" {

weftResult_t weftAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                            const size_t* recvcounts, const size_t* recvdispls,
                            weftDataType_t datatype, weftComm_t comm, weftRequest_t* request) {
  constexpr const char* kFunction = "weftAllGatherV";
  return RunOp(comm, request, kFunction, [&](Communicator& c) {
    auto a = Convert(c, kFunction, datatype);
    const std::vector<size_t> counts = Entries(c, kFunction, "recvcounts", recvcounts, &a.status);
    const std::vector<size_t> displs = Entries(c, kFunction, "recvdispls", recvdispls, &a.status);
    return a.status.ok() ? c.AllGatherV(sendbuff, sendcount, recvbuff, counts, displs, a.type)
                         : Refused(a.status);
  });
}

weftResult_t weftReduceScatterV(const void* sendbuff, void* recvbuff, const size_t* recvcounts,
                                weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                weftRequest_t* request) {
  constexpr const char* kFunction = "weftReduceScatterV";
  return RunOp(comm, request, kFunction, [&](Communicator& c) {
    auto a = Convert(c, kFunction, datatype, op);
    const std::vector<size_t> counts = Entries(c, kFunction, "recvcounts", recvcounts, &a.status);
    return a.status.ok() ? c.ReduceScatterV(sendbuff, recvbuff, counts, a.type, a.op)
                         : Refused(a.status);
  });
}

weftResult_t weftAllToAllV(const void* sendbuff, const size_t* sendcounts, const size_t* senddispls,
                           void* recvbuff, const size_t* recvcounts, const size_t* recvdispls,
                           weftDataType_t datatype, weftComm_t comm, weftRequest_t* request) {
  constexpr const char* kFunction = "weftAllToAllV";
  return RunOp(comm, request, kFunction, [&](Communicator& c) {
    auto a = Convert(c, kFunction, datatype);
    const std::vector<size_t> scounts = Entries(c, kFunction, "sendcounts", sendcounts, &a.status);
    const std::vector<size_t> sdispls = Entries(c, kFunction, "senddispls", senddispls, &a.status);
    const std::vector<size_t> rcounts = Entries(c, kFunction, "recvcounts", recvcounts, &a.status);
    const std::vector<size_t> rdispls = Entries(c, kFunction, "recvdispls", recvdispls, &a.status);
    return a.status.ok()
               ? c.AllToAllV(sendbuff, scounts, sdispls, recvbuff, rcounts, rdispls, a.type)
               : Refused(a.status);
  });
}

}  // extern "C"
