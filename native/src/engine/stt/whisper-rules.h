// Whisper's decoding rules (stt/whisper-rules.cpp), apart so that each can be checked on its own.
#pragma once

#include "stt/whisper-batch-model.h"
#include "stt/whisper-sequence.h"

#include <vector>

// Starts decoding the current window at the sequence's current temperature: the whole prompt is fed again.
void voxd_whisper_start_attempt(const voxd_whisper_batch_model & m, voxd_whisper_sequence & seq);

// log(sum(exp(v))) over [first, last), -inf when every value is -inf.
float voxd_whisper_logsumexp(const float * first, const float * last);

// Whisper's suppression and timestamp rules (the reference decoder's), on the logits of a window's next token.
void voxd_whisper_filter(const voxd_whisper_batch_model & m, const voxd_whisper_sequence & seq, float * logits);

// The entropy of the window's token counts: a low value means a loop of repeated tokens (whisper.cpp's check).
double voxd_whisper_entropy(const std::vector<voxd_whisper_token> & tokens);
