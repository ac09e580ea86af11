#!/usr/bin/python3
"""The upstream Kokoro model's outputs for voxd's oracle fixtures (scripts/make-kokoro-fixtures.mjs runs it).

  /usr/bin/python3 scripts/kokoro-oracle.py REFERENCE_DIR CHECKPOINT_DIR CASES_JSON OUT_DIR

REFERENCE_DIR is hexgrad/kokoro's model code as ../shared/reference/kokoro holds it (imported from there, never copied
into voxd); CHECKPOINT_DIR holds kokoro-v1_0.pth and config.json; CASES_JSON is a list of cases
{name, phonemes, voice (a float32 [510*256] file), speed, full}. For each case OUT_DIR/<name>/ gets case.json (token ids,
style row, durations, the shapes of what follows) and float32 little-endian files of the intermediates, captured
with forward hooks on upstream's own modules. `full` adds the generator's harmonic source, its spectrum and its last
convolution's output, so the generator can be checked on the upstream model's own inputs, and the decoder's
input from the text encoder (large: a case without `full` leaves it out). No noise: the generator's
random initial phases and noise are zeros, as the reference's oracle.py --no-noise makes them.
Needs Debian 12's python3-torch and python3-numpy.
"""
import json, os, sys, types

reference, checkpoint_dir, cases_file, out_dir = sys.argv[1:5]
sys.path[:0] = [os.path.join(reference, 'shims'), reference]
import numpy as np
import torch
import torch.nn.utils.parametrizations as parametrizations
if not hasattr(parametrizations, 'weight_norm'):  # torch < 2.1: the old-style weight_norm the release was saved with
    parametrizations.weight_norm = torch.nn.utils.weight_norm
from kokoro.model import KModel
import kokoro.istftnet as istftnet

torch.set_num_threads(max(1, os.cpu_count() or 1))
model = KModel(repo_id='hexgrad/Kokoro-82M', config=os.path.join(checkpoint_dir, 'config.json'),
               model=os.path.join(checkpoint_dir, 'kokoro-v1_0.pth')).eval()

# no noise: the random initial phases and the Gaussian noise become zeros
istftnet.torch = types.SimpleNamespace(**{k: getattr(torch, k) for k in dir(torch) if not k.startswith('__')})
istftnet.torch.rand = lambda *size, **kw: torch.zeros(*size, **{k: v for k, v in kw.items() if k in ('dtype', 'device')})
istftnet.torch.randn_like = lambda t, **kw: torch.zeros_like(t)

captured = {}
def keep(name, take):
    return lambda module, inputs, output: captured.__setitem__(name, take(inputs, output))
first_output = lambda i, o: o[0] if isinstance(o, tuple) else o
hooks = [
    (model.bert, 'bert', first_output),
    (model.bert_encoder, 'bert_encoder', first_output),
    (model.predictor.text_encoder, 'predictor_text_encoder', first_output),
    (model.predictor.duration_proj, 'duration_logits', first_output),
    (model.text_encoder, 'text_encoder', first_output),
    (model.decoder, 'decoder_in_asr', lambda i, o: i[0]),
    (model.decoder, 'decoder_in_F0', lambda i, o: i[1]),
    (model.decoder, 'decoder_in_N', lambda i, o: i[2]),
    (model.decoder.generator.m_source, 'generator_source', lambda i, o: o[0]),
    (model.decoder.generator.noise_convs[0], 'generator_har', lambda i, o: i[0]),
    (model.decoder.generator.conv_post, 'generator_post', first_output),
]
for module, name, take in hooks:
    module.register_forward_hook(keep(name, take))
full_only = {'decoder_in_asr', 'generator_source', 'generator_har', 'generator_post'}  # the large ones

for case in json.load(open(cases_file, encoding='utf-8')):
    captured.clear()
    pack = np.fromfile(case['voice'], dtype='<f4').reshape(-1, 256)
    row = len(case['phonemes']) - 1  # the upstream pipeline's choice of style row
    ref_s = torch.from_numpy(pack[row].copy()).reshape(1, 256)
    ids = [0, *[model.vocab[p] for p in case['phonemes'] if p in model.vocab], 0]
    with torch.no_grad():
        audio, durations = model.forward_with_tokens(torch.tensor([ids]), ref_s, case['speed'])
        # the unrounded durations, to show how far each is from a rounding tie
        sums = torch.sigmoid(captured['duration_logits']).sum(axis=-1)[0] / case['speed']
    target = os.path.join(out_dir, case['name'])
    os.makedirs(target, exist_ok=True)
    shapes = {}
    for name, value in sorted(captured.items()):
        if name in full_only and not case.get('full'):
            continue
        array = np.ascontiguousarray(value.detach().numpy().astype('<f4'))
        shapes[name] = list(array.shape)
        array.tofile(os.path.join(target, name + '.f32'))
    np.ascontiguousarray(audio.numpy().astype('<f4')).tofile(os.path.join(target, 'audio.f32'))
    ties = float((sums - sums.floor() - 0.5).abs().min())
    json.dump({'phonemes': case['phonemes'], 'input_ids': ids, 'style_row': row, 'speed': case['speed'],
               'durations': durations.reshape(-1).tolist(), 'closest_tie': ties, 'samples': int(audio.numel()), 'shapes': shapes},
              open(os.path.join(target, 'case.json'), 'w', encoding='utf-8'), ensure_ascii=False, indent=1)
    print(json.dumps({'case': case['name'], 'tokens': len(ids), 'frames': int(durations.sum()), 'closest_tie': round(ties, 4)}))
