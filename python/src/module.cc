// The weft_torch Python module: importing it registers the torch.distributed backend "weft",
// whose creator is the ProcessGroupWeft class itself (store, rank, size, timeout).
#include "process_group.h"
#include "pybind11/chrono.h"
#include "pybind11/pybind11.h"
#include "torch/csrc/utils/pybind.h"

namespace py = pybind11;
using weft::torch_backend::ProcessGroupWeft;

PYBIND11_MODULE(weft_torch, m) {
  m.doc() =
      "Weft as a torch.distributed backend: import weft_torch, then "
      "torch.distributed.init_process_group(\"weft\")";
  // c10d's own bindings (ProcessGroup, Store) must exist before a class can derive from them.
  py::module_ dist = py::module_::import("torch.distributed");
  py::class_<ProcessGroupWeft, c10::intrusive_ptr<ProcessGroupWeft>, c10d::ProcessGroup>(
      m, "ProcessGroupWeft",
      "A process group over a Weft communicator, for CPU tensors; created by "
      "torch.distributed with the group's store, rank, size and timeout")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             // Creation waits for the other ranks, which may need this interpreter meanwhile.
             py::gil_scoped_release no_gil;
             return ProcessGroupWeft::Create(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout") = kProcessGroupDefaultTimeout);
  dist.attr("Backend").attr("register_backend")("weft", m.attr("ProcessGroupWeft"));
}
