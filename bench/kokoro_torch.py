#!/usr/bin/python3
"""Times the upstream Kokoro model (hexgrad/kokoro's own code on PyTorch) for bench/tts-kokoro.ts.

  /usr/bin/python3 bench/kokoro_torch.py REFERENCE_DIR MODEL_DIR THREADS RUNS JSON_INPUTS

JSON_INPUTS is a list of {input_ids, style} (style: 256 floats); each run passes every input through KModel's
forward_with_tokens once, in order, with the generator's noise on as upstream runs it. Prints one JSON line: the
seconds of each run and the samples made per run.
"""
import json, os, sys, time

reference, model_dir, threads, runs, inputs_file = sys.argv[1:6]
sys.path[:0] = [os.path.join(reference, 'shims'), reference]
import torch
import torch.nn.utils.parametrizations as parametrizations
if not hasattr(parametrizations, 'weight_norm'):  # torch < 2.1: the old-style weight_norm the release was saved with
    parametrizations.weight_norm = torch.nn.utils.weight_norm
from kokoro.model import KModel

torch.set_num_threads(int(threads))
model = KModel(repo_id='hexgrad/Kokoro-82M', config=os.path.join(model_dir, 'config.json'),
               model=os.path.join(model_dir, 'kokoro-v1_0.pth')).eval()
inputs = [(torch.tensor([i['input_ids']]), torch.tensor([i['style']], dtype=torch.float32)) for i in json.load(open(inputs_file))]
seconds, samples = [], 0
with torch.no_grad():
    model.forward_with_tokens(*inputs[0], 1.0)  # warm up
    for _ in range(int(runs)):
        start, samples = time.perf_counter(), 0
        for ids, style in inputs:
            audio, _ = model.forward_with_tokens(ids, style, 1.0)
            samples += audio.numel()
        seconds.append(time.perf_counter() - start)
print(json.dumps({'seconds': seconds, 'samples': samples}))
