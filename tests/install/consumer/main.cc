// Creates a one-rank communicator and a gradient reducer over it through the installed headers
// and libraries.
#include <weft/comm/communicator.h>
#include <weft/shard/grad_reducer.h>

#include <cstdio>

int main() {
  auto comm = weft::Communicator::CreateFromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", comm.status().ToString().c_str());
    return 1;
  }
  float x[3] = {1, 2, 3};
  absl::Status s =
      (*comm)->AllReduce(x, x, 3, weft::DataType::kFloat32, weft::ReduceOp::kSum).Wait();
  std::printf("%s %g %g %g\n", s.ok() ? "ok" : s.ToString().c_str(), x[0], x[1], x[2]);
  if (!s.ok() || x[2] != 3) return 1;

  auto reducer = weft::shard::GradReducer::Create(comm->get(), {{"x", x, 3}});
  if (!reducer.ok()) {
    std::fprintf(stderr, "%s\n", reducer.status().ToString().c_str());
    return 1;
  }
  (*reducer)->BeginBackward(/*sync=*/true);
  s = (*reducer)->MarkReady(0);
  if (s.ok()) s = (*reducer)->Finish(absl::Seconds(60));
  std::printf("reducer %s %g\n", s.ok() ? "ok" : s.ToString().c_str(), x[2]);
  return s.ok() && x[2] == 3 ? 0 : 1;
}
