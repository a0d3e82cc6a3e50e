"""Lets torch 1.13's FullyShardedDataParallel run on CPU tensors (and import on Python 3.11).

Debian's torch 1.13 cannot even import FSDP on Python 3.11: a dataclass in its sharded-tensor
metadata has an instance of another, unhashable, dataclass as a default, which Python 3.11 rejects
as mutable; this module makes that one class hashable while FSDP is imported (later torch versions
use a default_factory instead). Then, torch 1.13's FSDP refuses to run without CUDA ("FSDP does not
support CPU only execution") and orders its collectives against computation with CUDA streams and
events. On CPU every operation runs in program order, so streams and events have nothing to order.
Importing this module gives FSDP's own modules a stand-in `torch.cuda` whose streams and events do
nothing, pins FSDP's compute device to the CPU, and lets Tensor.record_stream accept the stand-in
streams. Nothing else changes: FSDP's collectives (_all_gather_base, _reduce_scatter_base,
all_reduce, broadcast) still go through torch.distributed to the process group. Later torch versions
run FSDP on CPU without this.
"""

import contextlib
import dataclasses
import types

import torch

_dataclass = dataclasses.dataclass


def _hashable_tensor_properties(cls=None, /, **kwargs):
    def wrap(cls):
        made = _dataclass(cls, **kwargs)
        if made.__name__ == "TensorProperties" and made.__hash__ is None:
            made.__hash__ = object.__hash__  # only ever a default value, never a dict key
        return made

    return wrap if cls is None else wrap(cls)


dataclasses.dataclass = _hashable_tensor_properties
try:
    import torch.distributed.fsdp.flat_param as _flat_param
    import torch.distributed.fsdp.fully_sharded_data_parallel as _fsdp
finally:
    dataclasses.dataclass = _dataclass


class _Stream:
    def wait_stream(self, _other):
        pass

    def wait_event(self, _event):
        pass

    def synchronize(self):
        pass


class _Event:
    def record(self, _stream=None):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True


_CURRENT = _Stream()
_CUDA = types.SimpleNamespace(
    is_available=lambda: True,
    Stream=_Stream,
    Event=_Event,
    stream=lambda _stream: contextlib.nullcontext(),
    current_stream=lambda: _CURRENT,
    synchronize=lambda: None,
    current_device=lambda: 0,
    device_count=lambda: 1,
)


class _TorchWithCpuStreams(types.ModuleType):
    """torch, except that .cuda is the stand-in above."""

    cuda = _CUDA

    def __getattr__(self, name):
        return getattr(torch, name)


for _module in (_fsdp, _flat_param):
    _module.torch = _TorchWithCpuStreams("torch")

_fsdp.FullyShardedDataParallel._get_compute_device = (
    lambda self, module, ignored_params, device_from_device_id: torch.device("cpu"))

_record_stream = torch.Tensor.record_stream


def _record_stream_on_cpu(tensor, stream):
    if not isinstance(stream, _Stream):
        _record_stream(tensor, stream)


torch.Tensor.record_stream = _record_stream_on_cpu
