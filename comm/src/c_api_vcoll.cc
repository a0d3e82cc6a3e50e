// The variable-count collectives of the C API.
//
// Not yet: weft::Communicator gains AllGatherV, ReduceScatterV and AllToAllV on the `vcoll`
// branch; until it lands these refuse with weftInvalidUsage.
#include "c_api.h"

namespace {

weftResult_t NotYet(const char* function, weftRequest_t* request) {
  if (request != nullptr) *request = nullptr;
  return weft::capi::SetError(
      weftInvalidUsage, std::string(function) + ": not yet (needs Communicator::" + (function + 4) +
                            ", which has not landed)");
}

}  // namespace

extern "C" {

weftResult_t weftAllGatherV(const void*, size_t, void*, const size_t*, const size_t*,
                            weftDataType_t, weftComm_t, weftRequest_t* request) {
  return NotYet("weftAllGatherV", request);
}

weftResult_t weftReduceScatterV(const void*, void*, const size_t*, weftDataType_t, weftRedOp_t,
                                weftComm_t, weftRequest_t* request) {
  return NotYet("weftReduceScatterV", request);
}

weftResult_t weftAllToAllV(const void*, const size_t*, const size_t*, void*, const size_t*,
                           const size_t*, weftDataType_t, weftComm_t, weftRequest_t* request) {
  return NotYet("weftAllToAllV", request);
}

}  // extern "C"
