// The C API's result codes, its per-thread last error, and its version.
#include <string>

#include "c_api.h"

namespace weft::capi {
namespace {

thread_local std::string last_error;

}  // namespace

weftResult_t SetError(weftResult_t result, const std::string& message) {
  last_error = message;
  return result;
}

weftResult_t ToResult(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return weftSuccess;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return weftInvalidArgument;
    case absl::StatusCode::kFailedPrecondition:
      return weftInvalidUsage;  // mismatched operations across ranks, calls out of order
    case absl::StatusCode::kUnavailable:
      return weftRemoteError;  // a link closed, a peer failed or exited
    case absl::StatusCode::kDeadlineExceeded:
      return weftTimeout;
    case absl::StatusCode::kCancelled:
      return weftAborted;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      return weftInternalError;
    default:
      return weftSystemError;  // resources, permissions, files
  }
}

weftResult_t FromStatus(const absl::Status& status) {
  if (status.ok()) return weftSuccess;
  return SetError(ToResult(status), std::string(status.message()));
}

}  // namespace weft::capi

extern "C" {

weftResult_t weftGetVersion(int* version) {
  if (version == nullptr) {
    return weft::capi::SetError(weftInvalidArgument, "weftGetVersion: version is NULL");
  }
  *version = WEFT_VERSION_CODE;
  return weftSuccess;
}

const char* weftGetErrorString(weftResult_t result) {
  switch (result) {
    case weftSuccess:
      return "no error";
    case weftSystemError:
      return "system error";
    case weftInternalError:
      return "internal error";
    case weftInvalidArgument:
      return "invalid argument";
    case weftInvalidUsage:
      return "invalid usage";
    case weftRemoteError:
      return "remote error: another rank failed";
    case weftInProgress:
      return "operation in progress";
    case weftTimeout:
      return "timed out";
    case weftAborted:
      return "communicator aborted";
    default:
      return "unknown result code";
  }
}

const char* weftGetLastError(weftComm_t /*comm*/) { return weft::capi::last_error.c_str(); }

}  // extern "C"
