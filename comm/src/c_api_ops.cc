// The C API's operations: collectives, point-to-point, groups.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "c_api.h"
#include "engine.h"

namespace weft::capi {
namespace {

// The calling thread's open group (NCCL's groups are per thread, across communicators).
struct GroupState {
  int depth = 0;
  struct Member {
    std::shared_ptr<CommCore> core;
    bool blocking = false;  // holds an operation issued without a request: weftGroupEnd waits
  };
  std::vector<Member> members;  // in the order this thread first used them
  std::shared_ptr<std::atomic<bool>> open;
};
thread_local GroupState group;

std::optional<DataType> ToType(weftDataType_t type) {
  switch (type) {
    case weftInt8:
      return DataType::kInt8;
    case weftUint8:
      return DataType::kUint8;
    case weftInt32:
      return DataType::kInt32;
    case weftUint32:
      return DataType::kUint32;
    case weftInt64:
      return DataType::kInt64;
    case weftUint64:
      return DataType::kUint64;
    case weftFloat16:
      return DataType::kFloat16;
    case weftFloat32:
      return DataType::kFloat32;
    case weftFloat64:
      return DataType::kFloat64;
    case weftBfloat16:
      return DataType::kBFloat16;
    default:
      return std::nullopt;
  }
}

std::optional<ReduceOp> ToOp(weftRedOp_t op) {
  switch (op) {
    case weftSum:
      return ReduceOp::kSum;
    case weftProd:
      return ReduceOp::kProd;
    case weftMax:
      return ReduceOp::kMax;
    case weftMin:
      return ReduceOp::kMin;
    case weftAvg:
      return ReduceOp::kAvg;
    default:
      return std::nullopt;
  }
}

}  // namespace

Converted Convert(const Communicator& comm, const char* function, weftDataType_t type,
                  std::optional<weftRedOp_t> op) {
  Converted c;
  const std::optional<DataType> t = ToType(type);
  const std::optional<ReduceOp> o = op ? ToOp(*op) : std::optional<ReduceOp>(ReduceOp::kSum);
  if (!t) {
    c.status = absl::InvalidArgumentError(absl::StrCat(
        "rank ", comm.rank(), ": ", function, ": invalid data type ", static_cast<int>(type)));
  } else if (!o) {
    c.status = absl::InvalidArgumentError(absl::StrCat("rank ", comm.rank(), ": ", function,
                                                       ": invalid reduction operator ",
                                                       static_cast<int>(*op)));
  } else {
    c.type = *t;
    c.op = *o;
  }
  return c;
}

Work Refused(const absl::Status& status) { return Engine::Finished(status); }

bool InGroup() { return group.depth > 0; }

std::shared_ptr<std::atomic<bool>> OpenGroupFlag() { return group.open; }

void JoinGroup(const std::shared_ptr<CommCore>& core, bool blocking) {
  auto it = std::find_if(group.members.begin(), group.members.end(),
                         [&](const GroupState::Member& m) { return m.core == core; });
  if (it == group.members.end()) {
    core->comm->GroupStart();
    group.members.push_back({core, false});
    it = group.members.end() - 1;
  }
  it->blocking = it->blocking || blocking;
}

weftResult_t Finish(CommCore& core, Work work, weftRequest_t* request) {
  if (work.Test()) {
    // Finished at issue: refused arguments, an earlier failure, or a tiny collective done.
    const absl::Status status = work.status();
    if (status.code() == absl::StatusCode::kInvalidArgument) return FromStatus(status);
    if (!status.ok()) return SetError(core.shared->Failed(status), std::string(status.message()));
  }
  if (request == nullptr) {
    if (InGroup()) return weftSuccess;  // weftGroupEnd waits
    const absl::Status status = work.Wait();
    if (status.ok()) return weftSuccess;
    return SetError(core.shared->Failed(status), std::string(status.message()));
  }
  if (!work.Test()) core.shared->Track(work);
  auto* made = new weftRequest;
  made->work = std::move(work);
  made->shared = core.shared;
  made->group_open = OpenGroupFlag();
  *request = made;
  return weftSuccess;
}

}  // namespace weft::capi

using weft::Communicator;
using weft::capi::Convert;
using weft::capi::Refused;
using weft::capi::RunOp;

extern "C" {

weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                           weftRequest_t* request) {
  return RunOp(comm, request, "weftAllReduce", [&](Communicator& c) {
    const auto a = Convert(c, "weftAllReduce", datatype, op);
    return a.status.ok() ? c.AllReduce(sendbuff, recvbuff, count, a.type, a.op) : Refused(a.status);
  });
}

weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                               weftRequest_t* request) {
  return RunOp(comm, request, "weftReduceScatter", [&](Communicator& c) {
    const auto a = Convert(c, "weftReduceScatter", datatype, op);
    return a.status.ok() ? c.ReduceScatter(sendbuff, recvbuff, recvcount, a.type, a.op)
                         : Refused(a.status);
  });
}

weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           weftDataType_t datatype, weftComm_t comm, weftRequest_t* request) {
  return RunOp(comm, request, "weftAllGather", [&](Communicator& c) {
    const auto a = Convert(c, "weftAllGather", datatype);
    return a.status.ok() ? c.AllGather(sendbuff, recvbuff, sendcount, a.type) : Refused(a.status);
  });
}

weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           weftDataType_t datatype, int root, weftComm_t comm,
                           weftRequest_t* request) {
  return RunOp(comm, request, "weftBroadcast", [&](Communicator& c) {
    const auto a = Convert(c, "weftBroadcast", datatype);
    return a.status.ok() ? c.Broadcast(sendbuff, recvbuff, count, a.type, root) : Refused(a.status);
  });
}

weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                        weftRedOp_t op, int root, weftComm_t comm, weftRequest_t* request) {
  return RunOp(comm, request, "weftReduce", [&](Communicator& c) {
    const auto a = Convert(c, "weftReduce", datatype, op);
    return a.status.ok() ? c.Reduce(sendbuff, recvbuff, count, a.type, a.op, root)
                         : Refused(a.status);
  });
}

weftResult_t weftAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                          weftDataType_t datatype, weftComm_t comm, weftRequest_t* request) {
  return RunOp(comm, request, "weftAllToAll", [&](Communicator& c) {
    const auto a = Convert(c, "weftAllToAll", datatype);
    return a.status.ok() ? c.AllToAll(sendbuff, recvbuff, count, a.type) : Refused(a.status);
  });
}

weftResult_t weftBarrier(weftComm_t comm, weftRequest_t* request) {
  return RunOp(comm, request, "weftBarrier", [&](Communicator& c) { return c.Barrier(); });
}

weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftRequest_t* request) {
  return RunOp(comm, request, "weftSend", [&](Communicator& c) {
    const auto a = Convert(c, "weftSend", datatype);
    return a.status.ok() ? c.Send(sendbuff, count, a.type, peer) : Refused(a.status);
  });
}

weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                      weftComm_t comm, weftRequest_t* request) {
  return RunOp(comm, request, "weftRecv", [&](Communicator& c) {
    const auto a = Convert(c, "weftRecv", datatype);
    return a.status.ok() ? c.Recv(recvbuff, count, a.type, peer) : Refused(a.status);
  });
}

weftResult_t weftGroupStart(void) {
  return weft::capi::Guarded("weftGroupStart", [] {
    if (weft::capi::group.depth++ == 0) {
      weft::capi::group.open = std::make_shared<std::atomic<bool>>(true);
    }
    return weftSuccess;
  });
}

weftResult_t weftGroupEnd(void) {
  using weft::capi::group;
  return weft::capi::Guarded("weftGroupEnd", [] {
    if (group.depth == 0) {
      return weft::capi::SetError(weftInvalidUsage, "weftGroupEnd: no group was started");
    }
    if (--group.depth > 0) return weftSuccess;
    std::vector<weft::capi::GroupState::Member> members = std::move(group.members);
    group.members.clear();
    group.open->store(false);
    group.open = nullptr;
    std::vector<weft::Work> works;
    for (const auto& m : members) works.push_back(m.core->comm->GroupEnd());
    weftResult_t first = weftSuccess;
    std::string message;
    for (size_t i = 0; i < members.size(); ++i) {
      weft::capi::CommShared& shared = *members[i].core->shared;
      if (!members[i].blocking) {
        shared.Track(works[i]);
        continue;
      }
      const absl::Status status = works[i].Wait();
      if (!status.ok() && first == weftSuccess) {
        first = shared.Failed(status);
        message = std::string(status.message());
      }
    }
    return first == weftSuccess ? weftSuccess : weft::capi::SetError(first, message);
  });
}

}  // extern "C"
