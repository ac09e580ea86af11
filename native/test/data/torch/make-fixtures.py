#!/usr/bin/python3
"""Writes the PyTorch checkpoints native/test/torch-checkpoint.test.cpp reads, with torch itself.

    /usr/bin/python3 native/test/data/torch/make-fixtures.py

(Debian 12's python3-torch, 1.13; its torch.save output is deterministic, so the files only change when this script
does.) Values are small integers and exactly representable fractions, so that the test can state them.

  state-dict.pt   torch.save's default zip format, pickle protocol 2: a DataParallel model's state dict (an
                  OrderedDict with "module." keys and _metadata), float16/bfloat16/float64/int64 storages, views
                  (a transpose, two slices of one storage, a broadcast), a Parameter, a 0-d tensor, plain numbers,
                  strings and lists, and 300 strings first, so that later memo indices need LONG_BINPUT/LONG_BINGET
  voice.pt        one bare tensor of shape [4, 1, 8], as a Kokoro voice pack is saved
  protocol4.pt    pickle protocol 4 (FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL)
  legacy.pt       _use_new_zipfile_serialization=False: the pre-1.6 format, which the reader refuses
  os-system.pt    a pickle that calls os.system (a GLOBAL "posix system"), which the reader refuses
  compressed.pt   state-dict.pt's entries deflated, which the reader refuses
  duplicate.pt    two tensors with one name ({'a.b': ..., 'a': {'b': ...}}), which the reader refuses
  cycle.pt        a hand-written pickle whose list holds itself, and
  dag.pt          one of 40 lists each holding the one before twice (2^40 paths): both refused, neither walked
                  forever (stored with Python's zipfile, so without torch's data descriptors and padding)
legacy.pt differs on each run (the legacy format pickles storage addresses); the rest is byte for byte the same.
"""
import collections, os, zipfile
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def out(name):
    return os.path.join(HERE, name)


model = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.LayerNorm(3)))
with torch.no_grad():
    for i, p in enumerate(model.parameters()):  # 0.weight [3,2], 0.bias [3], 1.weight [3], 1.bias [3]
        p.copy_(torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) + 100 * i)

base = torch.arange(20, dtype=torch.float32)
checkpoint = {
    'names': [f'n{i}' for i in range(300)],
    'model': model.state_dict(),
    'dtypes': {
        'f16': torch.tensor([1.5, -2.0, 65504.0, 2.0 ** -14, 2.0 ** -24, float('-inf')], dtype=torch.float16),
        'bf16': torch.tensor([1.5, -2.0, 2.0 ** 100], dtype=torch.bfloat16),
        'f64': torch.tensor([[0.1, 0.25], [-7.0, 1e-3]], dtype=torch.float64),
        'i64': torch.arange(3),
    },
    'views': {
        'transposed': torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
        'a': base[2:8].view(2, 3),
        'b': base[10:14],
        'broadcast': torch.arange(4, dtype=torch.float32).reshape(1, 4).expand(3, 4),
    },
    'param': torch.nn.Parameter(torch.tensor([3.0, 4.0])),
    'scalar': torch.tensor(2.5),
    'step': 7, 'lr': 0.5, 'name': 'kokoro', 'flags': [True, False, None], 'big': 2 ** 40, 'neg': -3,
}
torch.save(checkpoint, out('state-dict.pt'))

torch.save(torch.arange(32, dtype=torch.float32).reshape(4, 1, 8) * 0.5, out('voice.pt'))

torch.save({'w': torch.tensor([[1.0, 2.0], [3.0, 4.0]]), 'nested': collections.OrderedDict(x=torch.tensor([5.0]))},
           out('protocol4.pt'), pickle_protocol=4)

torch.save({'w': torch.tensor([1.0])}, out('legacy.pt'), _use_new_zipfile_serialization=False)


class CallsOsSystem:
    def __reduce__(self):
        return (os.system, ('echo this must never run',))


torch.save({'w': torch.tensor([1.0]), 'payload': CallsOsSystem()}, out('os-system.pt'))

with zipfile.ZipFile(out('state-dict.pt')) as src, zipfile.ZipFile(out('compressed.pt'), 'w', zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist():
        entry = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
        entry.compress_type = zipfile.ZIP_DEFLATED
        dst.writestr(entry, src.read(info.filename))

torch.save({'a.b': torch.tensor([1.0]), 'a': {'b': torch.tensor([2.0])}}, out('duplicate.pt'))


def hand_written(name, pickle):
    with zipfile.ZipFile(out(name), 'w', zipfile.ZIP_STORED) as z:
        z.writestr(zipfile.ZipInfo('archive/data.pkl', date_time=(1980, 1, 1, 0, 0, 0)), pickle)
        z.writestr(zipfile.ZipInfo('archive/version', date_time=(1980, 1, 1, 0, 0, 0)), b'3\n')


# PROTO 2, EMPTY_DICT, 'a', EMPTY_LIST, BINPUT 1, BINGET 1, APPEND, SETITEM, STOP
hand_written('cycle.pt', b'\x80\x02}X\x01\x00\x00\x00a]q\x01h\x01as.')
# EMPTY_LIST, BINPUT 0, then 40 times MARK, BINGET k, BINGET k, LIST, BINPUT k+1; STOP
hand_written('dag.pt', b'\x80\x02]q\x00' + b''.join(bytes([0x28, 0x68, k, 0x68, k, 0x6c, 0x71, k + 1]) for k in range(40)) + b'.')
