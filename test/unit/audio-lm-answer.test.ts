/**
 * What of an audio language model's answer is transcript (src/engines/audio-lm-answer.ts): Qwen3-ASR's language
 * preamble and reasoning blocks are left out, streamed or whole, however the answer is cut into pieces.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AnswerFilter } from '../../src/engines/audio-lm-answer.js';

/** The answer fed in pieces of `size` characters, and what came out of each push and of the end. */
function stream(answer: string, size: number, preamble = true): { text: string; filter: AnswerFilter } {
  const filter = new AnswerFilter({ preamble });
  let text = '';
  for (let i = 0; i < answer.length; i += size) text += filter.push(answer.slice(i, i + size));
  return { text: text + filter.end(), filter };
}

const CASES: [answer: string, transcript: string, language: string | null][] = [
  ['language English<asr_text>And so, my fellow Americans.', 'And so, my fellow Americans.', 'English'],
  ['language None<asr_text>', '', null],
  ['<think>the speaker sounds American</think> Ask not what your country can do.', ' Ask not what your country can do.', null],
  ['language German<asr_text>Guten <think>hm</think>Tag', 'Guten Tag', 'German'],
  ['Plain transcript with no preamble.', 'Plain transcript with no preamble.', null],
  ['languages are hard', 'languages are hard', null],
  ['lang', 'lang', null],
  ['a < b and <asr', 'a < b and <asr', null],
  ['unfinished <think>thought', 'unfinished ', null],
  // cut short (max_tokens) inside the preamble: nothing of it is transcript
  ['language Eng', '', null],
  ['language English<asr', '', null],
];

describe('audio language model answers', () => {
  for (const [answer, transcript, language] of CASES) {
    it(`keeps the transcript of ${JSON.stringify(answer)}`, () => {
      for (const size of [1, 2, 3, 7, answer.length || 1]) {
        const { text, filter } = stream(answer, size);
        assert.equal(text, transcript, `in pieces of ${size}`);
        assert.equal(filter.language, language, `language, in pieces of ${size}`);
      }
    });
  }

  it('looks for no preamble on a model that writes none: a transcript may start with the word', () => {
    for (const size of [1, 4, 100]) assert.equal(stream('language is what we speak', size, false).text, 'language is what we speak');
    assert.equal(stream('language Eng', 3, false).text, 'language Eng');
  });

  it('lets text through as soon as it cannot be a preamble', () => {
    const filter = new AnswerFilter({ preamble: true });
    assert.equal(filter.push('lan'), '');
    assert.equal(filter.push('d ho'), 'land ho');
    assert.equal(filter.push('!'), '!');
  });
});
